/**
 * Tool calling in a chat request (OpenAI's and the documented API's `tools`,
 * `tool_choice`, `parallel_tool_calls`), and the tool turns of a conversation
 * (an assistant message's `tool_calls`, a `tool` message's `tool_call_id`).
 *
 * - `tools`: 1 to MAX_TOOLS functions, named by 1 to 64 letters, digits, `_`
 *   or `-`, each name once; `parameters` is a JSON Schema of type `object`
 *   (TOOL_LIMITS bound its size).
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
import { isObject, nestingDepth } from './field-checker.js';
import { checkJsonSchema, schemaShapeViolation, violationPath, type JsonSchema } from './json-schema-subset.js';
import { describe, fail } from './request-checks.js';

/** OpenAI's bound on the tools of one request. */
export const MAX_TOOLS = 128;
/**
 * How large the tools may be: their JSON in all, and how deep a tool's
 * `parameters` nests. A template that knows no tools gets them written into
 * its system prompt by node-llama-cpp, which costs about size × depth on the
 * engine's event loop (a 60-deep, 890 KB schema took 27 s there), and
 * indents every line break of a description once per level it sits at (4,000
 * line breaks in each description of a 15-deep schema: 2 million tokens, 1.2 s).
 */
export const TOOL_LIMITS = { bytes: 128 * 1024, depth: 32, lineBreaks: 1000 } as const;
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

/** Line breaks in every string (and member name) of a JSON value. */
function lineBreaks(value: unknown): number {
  let count = 0;
  const stack = [value];
  while (stack.length > 0) {
    const current = stack.pop();
    if (typeof current === 'string') {
      for (let at = current.indexOf('\n'); at >= 0; at = current.indexOf('\n', at + 1)) count++;
    } else if (typeof current === 'object' && current !== null) {
      for (const [key, child] of Object.entries(current)) stack.push(key, child);
    }
  }
  return count;
}

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
  const parameters = fn.parameters ?? { type: 'object', properties: {}, additionalProperties: false };
  if (!isObject(parameters) || parameters.type !== 'object')
    fail(
      `${param}.function.parameters must be a JSON Schema of type "object", the call's arguments (got ${describe(parameters).slice(0, 80)})`,
      `${param}.function.parameters`,
      'invalid_type',
    );
  if (nestingDepth(parameters, TOOL_LIMITS.depth) > TOOL_LIMITS.depth)
    fail(`${param}.function.parameters nests JSON more than ${TOOL_LIMITS.depth} levels deep`, `${param}.function.parameters`);
  // Shaped as a JSON Schema all through: the template (or node-llama-cpp writing it into the prompt) reads every part.
  const misshapen = schemaShapeViolation(parameters, `${param}.function.parameters`);
  if (misshapen) fail(misshapen, violationPath(misshapen), 'invalid_type');
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
  const bytes = Buffer.byteLength(JSON.stringify(tools));
  if (bytes > TOOL_LIMITS.bytes) fail(`tools may take at most ${TOOL_LIMITS.bytes} bytes of JSON in all (got ${bytes})`, 'tools');
  const breaks = lineBreaks(tools);
  if (breaks > TOOL_LIMITS.lineBreaks)
    fail(`tools may hold at most ${TOOL_LIMITS.lineBreaks} line breaks in all their text (got ${breaks})`, 'tools');
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
  const calls = value.map((call, j): ToolCall => {
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
  const ids = new Set<string>();
  calls.forEach(({ id }, j) => {
    if (ids.has(id))
      fail(
        `${param}[${j}].id repeats the id ${JSON.stringify(id.slice(0, 80))}: each call of a message needs its own`,
        `${param}[${j}].id`,
      );
    ids.add(id);
  });
  return calls;
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

/**
 * The messages' tool turns, checked as OpenAI does: an assistant message that
 * calls tools is followed by one `tool` message per call (in any order), and
 * a `tool` message answers a call of the assistant message before them.
 */
export function checkToolTurns(messages: readonly { role: string; toolCalls?: ToolCall[]; toolCallId?: string }[]): void {
  let open: Set<string> | undefined;
  let openAt = -1;
  const unanswered = () => {
    const [id] = open ?? [];
    if (id === undefined) return;
    fail(
      `messages[${openAt}].tool_calls: the call ${JSON.stringify(id.slice(0, 80))} has no tool message answering it (an assistant message that calls tools is followed by one tool message per call)`,
      `messages[${openAt}].tool_calls`,
    );
  };
  messages.forEach((message, i) => {
    if (message.role === 'tool') {
      const id = message.toolCallId!;
      if (!open?.delete(id))
        fail(
          `messages[${i}].tool_call_id answers no call of the assistant message before it, or one already answered (got ${JSON.stringify(id.slice(0, 80))}); tool messages follow the assistant message whose calls they answer`,
          `messages[${i}].tool_call_id`,
        );
      return;
    }
    unanswered();
    open = message.toolCalls ? new Set(message.toolCalls.map((call) => call.id)) : undefined;
    openAt = i;
  });
  unanswered();
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
    // Inlined (no $defs of its own); checked again as part of the whole list, which is what the grammar is made from.
    const checked = checkJsonSchema(tool.parameters);
    return {
      type: 'object',
      properties: { name: { const: tool.name }, arguments: 'schema' in checked ? checked.schema : ANY_OBJECT },
      required: ['name', 'arguments'],
      additionalProperties: false,
    };
  });
  const single = tools.choice.type === 'function' || !tools.parallel;
  return { type: 'array', minItems: 1, ...(single ? { maxItems: 1 } : {}), items: calls.length === 1 ? calls[0]! : { anyOf: calls } };
}

/** A tool call as OpenAI sends it. */
export type WireToolCall = { id: string; type: 'function'; function: { name: string; arguments: string } };

export function wireToolCall(call: ToolCall): WireToolCall {
  return { id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } };
}

/** A parsed message in OpenAI's wire form again (`tool_calls`, `tool_call_id`), as an engine reads it. */
export function wireMessage(message: {
  role: string;
  content: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
}): Record<string, unknown> {
  const { role, content, toolCalls, toolCallId } = message;
  return {
    role,
    content,
    ...(toolCalls ? { tool_calls: toolCalls.map(wireToolCall) } : {}),
    ...(toolCallId !== undefined ? { tool_call_id: toolCallId } : {}),
  };
}

/** The request's tool fields in OpenAI's wire form (none when it offers no tools). */
export function wireTools(tools: ToolsRequest | undefined): Record<string, unknown> {
  if (!tools) return {};
  const { definitions, choice, parallel } = tools;
  return {
    tools: definitions.map((d) => ({ type: 'function', function: d })),
    tool_choice: choice.type === 'function' ? { type: 'function', function: { name: choice.name } } : choice.type,
    parallel_tool_calls: parallel,
  };
}
