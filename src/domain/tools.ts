/**
 * Tool calling in a chat request (OpenAI's and the documented API's `tools`,
 * `tool_choice`, `parallel_tool_calls`), and the tool turns of a conversation
 * (an assistant message's `tool_calls`, a `tool` message's `tool_call_id`).
 *
 * - `tools`: 1 to MAX_TOOLS functions, named by 1 to 64 letters, digits, `_`
 *   or `-`, each name once; `parameters` is a JSON Schema object.
 * - `tool_choice`: `none` (the tools are left out of the prompt and the
 *   answer is text), `auto` (the default: the model answers or calls),
 *   `required` (at least one call), or `{"type": "function", "function":
 *   {"name": ...}}` (exactly one call of that tool). Any other than `none` or
 *   `auto` needs `tools`.
 * - A forced call (`required` or a named tool) is enforced by a grammar: the
 *   answer is a JSON list of calls (`forcedCallsSchema`), each call's
 *   arguments following its tool's `parameters` where that schema is within
 *   what the grammar enforces (json-schema-subset.ts), and any JSON object
 *   otherwise.
 * - With tools offered, `response_format` and `logprobs` are refused (the
 *   documented API refuses the first too).
 */
import { isObject } from './field-checker.js';
import { checkJsonSchema, type JsonSchema } from './json-schema-subset.js';
import { describe, fail } from './request-checks.js';

/** OpenAI's bound on the tools of one request. */
export const MAX_TOOLS = 128;
/** Calls one assistant message of the conversation may carry. */
export const MAX_MESSAGE_TOOL_CALLS = 128;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const TOOL_NAME_RULE = '1 to 64 letters, digits, _ or -';

export type ToolDefinition = { name: string; description?: string; parameters: JsonSchema };

export type ToolChoice = { type: 'auto' } | { type: 'required' } | { type: 'function'; name: string };

/** The tools a request offers (absent: none, or `tool_choice: "none"`). */
export type ToolsRequest = { definitions: ToolDefinition[]; choice: ToolChoice; parallel: boolean };

/** A call the assistant made, in a message of the conversation or in an answer. */
export type ToolCall = { id: string; name: string; arguments: string };

/** Any JSON object: the arguments of a tool whose schema the grammar cannot enforce. */
const ANY_OBJECT: JsonSchema = { type: 'object', additionalProperties: true };

function parseDefinition(tool: unknown, param: string): ToolDefinition {
  if (!isObject(tool))
    fail(`${param} must be an object like {"type": "function", "function": {...}} (got ${describe(tool)})`, param, 'invalid_type');
  if (tool.type !== 'function') fail(`${param}.type must be "function" (got ${describe(tool.type)})`, `${param}.type`);
  const fn = tool.function;
  if (!isObject(fn)) fail(`${param}.function must be an object with a name (got ${describe(fn)})`, `${param}.function`, 'invalid_type');
  if (typeof fn.name !== 'string' || !TOOL_NAME.test(fn.name))
    fail(`${param}.function.name must be ${TOOL_NAME_RULE} (got ${describe(fn.name)})`, `${param}.function.name`);
  if (fn.description !== undefined && fn.description !== null && typeof fn.description !== 'string')
    fail(
      `${param}.function.description must be a string (got ${describe(fn.description)})`,
      `${param}.function.description`,
      'invalid_type',
    );
  const parameters = fn.parameters ?? { type: 'object', properties: {} };
  if (!isObject(parameters))
    fail(
      `${param}.function.parameters must be a JSON Schema object (got ${describe(parameters)})`,
      `${param}.function.parameters`,
      'invalid_type',
    );
  if (fn.strict !== undefined && fn.strict !== null && typeof fn.strict !== 'boolean')
    fail(`${param}.function.strict must be a boolean (got ${describe(fn.strict)})`, `${param}.function.strict`, 'invalid_type');
  return { name: fn.name, ...(typeof fn.description === 'string' ? { description: fn.description } : {}), parameters };
}

function parseChoice(value: unknown, names: ReadonlySet<string>): ToolChoice | undefined {
  if (value === undefined || value === null || value === 'auto') return { type: 'auto' };
  if (value === 'none') return undefined;
  if (value === 'required') return { type: 'required' };
  if (!isObject(value))
    fail(
      `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}} (got ${describe(value)})`,
      'tool_choice',
    );
  if (value.type !== 'function') fail(`tool_choice.type must be "function" (got ${describe(value.type)})`, 'tool_choice.type');
  const fn = value.function;
  if (!isObject(fn) || typeof fn.name !== 'string')
    fail('tool_choice.function.name is required: the name of one of the tools', 'tool_choice.function.name', 'missing_required_parameter');
  if (!names.has(fn.name))
    fail(`tool_choice.function.name names no tool of this request (got ${describe(fn.name)})`, 'tool_choice.function.name');
  return { type: 'function', name: fn.name };
}

/** `tools`, `tool_choice` and `parallel_tool_calls` of a chat body (see the top of the file). */
export function parseTools(body: Record<string, unknown>): ToolsRequest | undefined {
  const { tools, tool_choice: choice, parallel_tool_calls: parallel } = body;
  if (parallel !== undefined && parallel !== null && typeof parallel !== 'boolean')
    fail(`parallel_tool_calls must be a boolean (got ${describe(parallel)})`, 'parallel_tool_calls', 'invalid_type');
  if (tools === undefined || tools === null) {
    if (choice !== undefined && choice !== null && choice !== 'none' && choice !== 'auto')
      fail('tool_choice needs tools: pass the tools the model may call', 'tool_choice');
    return undefined;
  }
  if (!Array.isArray(tools)) fail(`tools must be an array of tools (got ${describe(tools)})`, 'tools', 'invalid_type');
  if (tools.length === 0) fail('tools must list at least one tool (or be left out)', 'tools');
  if (tools.length > MAX_TOOLS) fail(`tools may list at most ${MAX_TOOLS} tools (got ${tools.length})`, 'tools');
  const definitions = tools.map((tool, i) => parseDefinition(tool, `tools[${i}]`));
  const names = new Set<string>();
  definitions.forEach(({ name }, i) => {
    if (names.has(name)) fail(`tools[${i}].function.name repeats the name "${name}": each tool needs its own`, `tools[${i}].function.name`);
    names.add(name);
  });
  const toolChoice = parseChoice(choice, names);
  if (!toolChoice) return undefined;
  const format = body.response_format;
  if (isObject(format) && format.type !== 'text')
    fail('response_format cannot be used with tools: leave one of them out', 'response_format');
  if (body.logprobs === true) fail('logprobs cannot be used with tools: leave one of them out', 'logprobs');
  return { definitions, choice: toolChoice, parallel: parallel !== false };
}

/** An assistant message's `tool_calls` (the calls it made, each answered by a later `tool` message). */
export function parseMessageToolCalls(value: unknown, param: string): ToolCall[] {
  if (!Array.isArray(value)) fail(`${param} must be an array of tool calls (got ${describe(value)})`, param, 'invalid_type');
  if (value.length > MAX_MESSAGE_TOOL_CALLS) fail(`${param} may hold at most ${MAX_MESSAGE_TOOL_CALLS} calls (got ${value.length})`, param);
  return value.map((call, j) => {
    const at = `${param}[${j}]`;
    if (!isObject(call)) fail(`${at} must be an object with id, type and function (got ${describe(call)})`, at, 'invalid_type');
    if (typeof call.id !== 'string' || call.id === '') fail(`${at}.id must be a non-empty string (got ${describe(call.id)})`, `${at}.id`);
    if (call.type !== undefined && call.type !== 'function')
      fail(`${at}.type must be "function" (got ${describe(call.type)})`, `${at}.type`);
    const fn = call.function;
    if (!isObject(fn))
      fail(`${at}.function must be an object with name and arguments (got ${describe(fn)})`, `${at}.function`, 'invalid_type');
    if (typeof fn.name !== 'string' || !TOOL_NAME.test(fn.name))
      fail(`${at}.function.name must be ${TOOL_NAME_RULE} (got ${describe(fn.name)})`, `${at}.function.name`);
    if (typeof fn.arguments !== 'string')
      fail(`${at}.function.arguments must be a string of JSON (got ${describe(fn.arguments)})`, `${at}.function.arguments`, 'invalid_type');
    if (argumentsValue(fn.arguments) === undefined)
      fail(
        `${at}.function.arguments must be a JSON object, as the model wrote it (got ${describe(fn.arguments)})`,
        `${at}.function.arguments`,
      );
    return { id: call.id, name: fn.name, arguments: fn.arguments };
  });
}

/** A call's arguments as a value (an empty string is no arguments), or undefined when they are not a JSON object. */
export function argumentsValue(text: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The messages' tool turns, checked: each `tool` message answers a call of an earlier assistant message, once. */
export function checkToolTurns(messages: readonly { role: string; toolCalls?: ToolCall[]; toolCallId?: string }[]): void {
  const open = new Set<string>();
  messages.forEach((message, i) => {
    for (const call of message.toolCalls ?? []) open.add(call.id);
    if (message.role !== 'tool') return;
    const id = message.toolCallId!;
    if (!open.has(id))
      fail(
        `messages[${i}].tool_call_id answers no call of an earlier assistant message, or one already answered (got ${JSON.stringify(id.slice(0, 80))})`,
        `messages[${i}].tool_call_id`,
      );
    open.delete(id);
  });
}

/**
 * The JSON the answer to a forced call must be: a list of calls (exactly one
 * for a named tool or without parallel calls), each `{"name", "arguments"}`.
 */
export function forcedCallsSchema(tools: ToolsRequest): JsonSchema {
  const offered =
    tools.choice.type === 'function'
      ? tools.definitions.filter((d) => d.name === (tools.choice as { name: string }).name)
      : tools.definitions;
  const calls = offered.map((tool) => {
    // Checked again as part of the whole list, which is what the grammar is made from.
    const enforceable = 'schema' in checkJsonSchema(tool.parameters);
    return {
      type: 'object',
      properties: { name: { const: tool.name }, arguments: enforceable ? tool.parameters : ANY_OBJECT },
      required: ['name', 'arguments'],
      additionalProperties: false,
    };
  });
  const single = tools.choice.type === 'function' || !tools.parallel;
  return { type: 'array', minItems: 1, ...(single ? { maxItems: 1 } : {}), items: calls.length === 1 ? calls[0]! : { anyOf: calls } };
}
