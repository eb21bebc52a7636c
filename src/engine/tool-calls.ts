/**
 * Tool calls in a generated answer (see ../domain/tools.ts for the request's rules).
 *
 * - `auto`: the model writes a call in its chat template's own syntax (Qwen's and Hermes'
 *   `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, and so on), which node-llama-cpp
 *   reads from the template (`ToolSyntax`); for a template that knows no tools, node-llama-cpp
 *   documents the tools in the system prompt with a syntax of its own (`||call: name({...})`).
 *   Text before the first call is the answer's content, streamed as it comes; from the first call
 *   on, the text is held and read as calls at the end. Text that turns out not to be a call
 *   (an unknown tool, arguments that are not a JSON object) is content after all.
 * - A forced call (`required`, a named tool): a grammar makes the answer a JSON list of
 *   `{"name", "arguments"}`, read at the end. The list is never content: one cut short (by
 *   max_tokens) gives the calls it had begun, as OpenAI's cut calls, not its JSON as text.
 *
 * Whitespace is loose in both: the model may space a call's syntax its own way. Text between
 * or after the calls that is not a call is content too, after what was streamed.
 */
import { isObject } from '../domain/field-checker.js';
import { argumentsValue, type ToolsRequest } from '../domain/tools.js';
import { firstIndexOf, partialMatchLength } from './text-stream.js';

/** How a model writes a call: `prefix name paramsPrefix {arguments} suffix`, calls one after another. */
export type ToolSyntax = {
  /** The call's opening, and other openings the model may use for it. */
  prefixes: string[];
  paramsPrefix: string;
  suffix: string;
  /** Text that starts a tool's result: the model imagining one ends the answer (a stop string). */
  resultPrefix: string;
};

/** A call read from an answer (the id is given when it is sent). */
export type ParsedCall = { name: string; arguments: string };

/** What a request's answer is read for: calls in the model's syntax, or a forced list of calls. */
export type ToolPlan = { names: ReadonlySet<string>; /** One call at most (`parallel_tool_calls: false`). */ single: boolean } & (
  { mode: 'auto'; syntax: ToolSyntax } | { mode: 'forced' }
);

export function toolPlan(tools: ToolsRequest, syntax: ToolSyntax): ToolPlan {
  const names = new Set(tools.definitions.map((d) => d.name));
  const single = !tools.parallel;
  return tools.choice.type === 'auto' ? { mode: 'auto', syntax, names, single } : { mode: 'forced', names, single };
}

const SPACE = /\s/;

/** The end of `literal` matched at `from`, whitespace in either matching any run of it (or none); -1 if it does not match. */
export function looseMatch(text: string, from: number, literal: string): number {
  let i = from;
  for (const ch of literal) {
    if (SPACE.test(ch)) continue;
    while (i < text.length && SPACE.test(text[i]!)) i++;
    if (text[i] !== ch) return -1;
    i++;
  }
  return i;
}

/** The end of the JSON object or array that starts at `from` (after whitespace); -1 if there is none or it is cut. */
export function jsonEnd(text: string, from: number): number {
  let i = from;
  while (i < text.length && SPACE.test(text[i]!)) i++;
  if (text[i] !== '{' && text[i] !== '[') return -1;
  let depth = 0;
  let inString = false;
  for (; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{' || ch === '[') depth++;
    else if (ch === '}' || ch === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** The start of a literal up to its first space: where a call is recognised in text, however the model spaces the rest. */
const anchorOf = (literal: string) => literal.trim().split(/\s/)[0]!;

/** The anchors of a syntax's call openings. */
const anchorsOf = (syntax: ToolSyntax) => syntax.prefixes.map(anchorOf).filter((a) => a !== '');

/** The call at `at` in the model's syntax, and where it ends; undefined when there is no complete call of an offered tool there. */
function callAt(text: string, at: number, syntax: ToolSyntax, names: ReadonlySet<string>): { call: ParsedCall; end: number } | undefined {
  const nameEnd = syntax.paramsPrefix.trim()[0];
  let pos = -1;
  for (const prefix of syntax.prefixes) if (pos < 0) pos = looseMatch(text, at, prefix);
  if (pos < 0 || nameEnd === undefined) return undefined;
  const end = text.indexOf(nameEnd, pos);
  if (end < 0) return undefined;
  const name = text.slice(pos, end).trim();
  if (!names.has(name)) return undefined;
  pos = looseMatch(text, end, syntax.paramsPrefix);
  if (pos < 0) return undefined;
  const closed = looseMatch(text, pos, syntax.suffix);
  // No arguments: `name()`.
  if (closed >= 0) return { call: { name, arguments: '{}' }, end: closed };
  const argsEnd = jsonEnd(text, pos);
  if (argsEnd < 0 || argumentsValue(text.slice(pos, argsEnd)) === undefined) return undefined;
  const after = looseMatch(text, argsEnd, syntax.suffix);
  return after < 0 ? undefined : { call: { name, arguments: text.slice(pos, argsEnd).trim() }, end: after };
}

/**
 * Reads calls in the model's syntax from `text`, which starts with a call's opening: the calls,
 * and the text around them that is not a call (content). An opening that starts no complete
 * call of an offered tool (another tool's name, the tag mentioned in prose, a call cut short) is
 * content, and the calls after it are still read. Undefined when there is no call at all.
 */
export function parseNativeCalls(
  text: string,
  syntax: ToolSyntax,
  names: ReadonlySet<string>,
): { calls: ParsedCall[]; rest: string } | undefined {
  const anchors = anchorsOf(syntax);
  const calls: ParsedCall[] = [];
  let rest = '';
  let at = 0;
  while (at < text.length) {
    const found = callAt(text, at, syntax, names);
    if (found) calls.push(found.call);
    const contentFrom = found ? found.end : at;
    // Past this opening: the next one may start a call.
    const next = firstIndexOf(text, anchors, found ? found.end : at + 1);
    rest += text.slice(contentFrom, next < 0 ? text.length : next);
    at = next < 0 ? text.length : next;
  }
  if (calls.length === 0) return undefined;
  return { calls, rest: rest.trim() };
}

/** Reads a forced answer (a JSON list of calls); undefined when it is not one (cut by max_tokens). */
export function parseForcedCalls(text: string, names: ReadonlySet<string>): ParsedCall[] | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length === 0) return undefined;
  const calls: ParsedCall[] = [];
  for (const item of value as unknown[]) {
    const call = item as { name?: unknown; arguments?: unknown };
    if (typeof call?.name !== 'string' || !names.has(call.name) || !isObject(call.arguments)) return undefined;
    calls.push({ name: call.name, arguments: JSON.stringify(call.arguments) });
  }
  return calls;
}

/** The opening of a call in a forced list, up to its whole name. */
const FORCED_CALL_NAME = /\s*\{\s*"name"\s*:\s*"([^"\\]*)"/y;

/**
 * The calls a forced answer cut short had begun: each whose name is whole (and offered), with its
 * arguments as far as they got ('' when they had not begun; a whole object written as
 * parseForcedCalls writes it). A call whose name is cut is left out: its name is not known.
 */
export function parseCutCalls(text: string, names: ReadonlySet<string>): ParsedCall[] {
  const calls: ParsedCall[] = [];
  let at = looseMatch(text, 0, '[');
  while (at >= 0) {
    FORCED_CALL_NAME.lastIndex = at;
    const head = FORCED_CALL_NAME.exec(text);
    if (!head || !names.has(head[1]!)) break;
    const argsFrom = looseMatch(text, FORCED_CALL_NAME.lastIndex, ',"arguments":');
    const argsEnd = argsFrom < 0 ? -1 : jsonEnd(text, argsFrom);
    if (argsEnd < 0) {
      calls.push({ name: head[1]!, arguments: argsFrom < 0 ? '' : text.slice(argsFrom).trim() });
      break;
    }
    const args = argumentsValue(text.slice(argsFrom, argsEnd));
    calls.push({ name: head[1]!, arguments: args === undefined ? text.slice(argsFrom, argsEnd).trim() : JSON.stringify(args) });
    const closed = looseMatch(text, argsEnd, '}');
    at = closed < 0 ? -1 : looseMatch(text, closed, ',');
  }
  return calls;
}

/**
 * Sits between the answer's content and the client: passes content on, holds what may be (and,
 * from the first call on, what is) tool calls, and reads them at the end.
 */
export class ToolCallCapture {
  private held = '';
  private capturing: boolean;
  private readonly anchors: string[];

  constructor(private readonly plan: ToolPlan) {
    this.capturing = plan.mode === 'forced';
    this.anchors = plan.mode === 'auto' ? anchorsOf(plan.syntax) : [];
  }

  /** The content that is final with `text` ('' while it may be a call). */
  push(text: string): string {
    if (this.capturing) {
      this.held += text;
      return '';
    }
    const buffer = this.held + text;
    const first = firstIndexOf(buffer, this.anchors);
    if (first >= 0) {
      this.capturing = true;
      this.held = buffer.slice(first);
      return buffer.slice(0, first);
    }
    const keep = partialMatchLength(buffer, this.anchors);
    this.held = buffer.slice(buffer.length - keep);
    return buffer.slice(0, buffer.length - keep);
  }

  /**
   * At the end: the calls read, or none and the held text, which is content after all. A forced
   * answer that is not a whole list of calls (cut by max_tokens) has no content: `cut` has the
   * calls it had begun, the last one's arguments cut (none when no name was whole), for the
   * answer to send as they are with its own finish reason ("length").
   */
  finish(): { text: string; calls: ParsedCall[]; cut?: ParsedCall[] } {
    const text = this.held;
    this.held = '';
    if (!this.capturing) return { text, calls: [] };
    const { plan } = this;
    const one = (calls: ParsedCall[]) => (plan.single ? calls.slice(0, 1) : calls);
    if (plan.mode === 'forced') {
      const forced = parseForcedCalls(text, plan.names);
      return forced ? { text: '', calls: one(forced) } : { text: '', calls: [], cut: one(parseCutCalls(text, plan.names)) };
    }
    const read = parseNativeCalls(text, plan.syntax, plan.names);
    if (!read) return { text, calls: [] };
    return { text: read.rest, calls: one(read.calls) };
  }
}
