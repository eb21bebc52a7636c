/**
 * Watches one streamed answer as the relay (relay.ts) passes it on, and records its outcome once: time to the first
 * token, token usage, finish reason, and how it ended (complete, cut, an event over its bound or not JSON, the
 * engine's own error event). REST's byte relay hands it each event's bytes (`observeEvent`), which it decodes only
 * as far as it must; GraphQL's relay hands it each event's payload (`observe`).
 */
import { FAILED_ANSWER_STATUS, UPSTREAM_CUT, UPSTREAM_NOT_JSON } from './answer-errors.js';
import type { RoutedRequest } from './dispatch.js';
import { eventData } from './sse.js';

/**
 * The first text of an answer: a chat delta's content or reasoning, a text completion's text, or the first tool call.
 * JSON's spacing is the engine's: Python's `json.dumps` (llama-cpp-python's server) writes `"content": "hi"`.
 */
const FIRST_TOKEN = /"(?:(?:reasoning_)?content|text)":\s*"[^"]|"tool_calls":\s*\[\s*\{/;
/** A choice's finish reason: the key, optional whitespace, then its value (a string, or `null` until the last chunk). */
const FINISH_KEY = '"finish_reason":';
const FINISH_KEY_BYTES = Buffer.from(FINISH_KEY);
/** A usage object, not the `"usage":null` that OpenAI-style engines put in every chunk. */
const USAGE = /"usage":\s*\{/;
const USAGE_KEY_BYTES = Buffer.from('"usage":');
/** Shorter events are looked at as text: `data: [DONE]`, comments. */
const SHORT_EVENT_BYTES = 32;
/** An engine's error event (`data: {"error": …}`, or `{ "error": … }`): the key comes first. */
const DATA_FIELD_BYTES = Buffer.from('data:');
const ERROR_NAME_BYTES = Buffer.from('"error"');
const ERROR_PAYLOAD = /^\s*\{\s*"error"\s*:/;
/** How a token's event begins: one `data:` line whose payload is a JSON object. */
const OBJECT_EVENT_START = Buffer.from('data: {');

/** A space, tab, CR or LF: JSON's whitespace. */
const isWhitespace = (code: number | undefined) => code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;

/** The first byte at or after `at` that is not JSON's whitespace. */
function skipWhitespace(event: Buffer, at: number): number {
  while (isWhitespace(event[at])) at++;
  return at;
}

/** Whether an event's bytes hold a usage object (the key, optional whitespace, `{`). */
function hasUsageObject(event: Buffer): boolean {
  const key = event.indexOf(USAGE_KEY_BYTES);
  if (key < 0) return false;
  return event[skipWhitespace(event, key + USAGE_KEY_BYTES.length)] === 0x7b;
}

/** Whether an event's bytes open as an engine's error event: `data:`, then `{` and `"error"`, whitespace allowed between. */
function opensWithErrorKey(event: Buffer): boolean {
  if (
    event.length < DATA_FIELD_BYTES.length ||
    event.compare(DATA_FIELD_BYTES, 0, DATA_FIELD_BYTES.length, 0, DATA_FIELD_BYTES.length) !== 0
  )
    return false;
  const brace = skipWhitespace(event, DATA_FIELD_BYTES.length);
  if (event[brace] !== 0x7b) return false;
  const key = skipWhitespace(event, brace + 1);
  // Buffer.compare throws past the buffer's end: an event of spaces after its brace ends before a key could.
  if (key + ERROR_NAME_BYTES.length > event.length) return false;
  return event.compare(ERROR_NAME_BYTES, 0, ERROR_NAME_BYTES.length, key, key + ERROR_NAME_BYTES.length) === 0;
}

/**
 * The first finish reason given as a string in an event (text or bytes), or null: each `"finish_reason":` key in
 * turn, optional whitespace, then a string closed on its quote (a `null`, or a value cut short, is no reason). Plain
 * searches: this runs for every relayed token.
 */
function finishReasonOf(event: string | Buffer): string | null {
  const text = typeof event === 'string';
  const code = (at: number) => (text ? event.charCodeAt(at) : event[at]);
  const next = (from: number) => (text ? event.indexOf(FINISH_KEY, from) : event.indexOf(FINISH_KEY_BYTES, from));
  for (let key = next(0); key >= 0;) {
    let at = key + FINISH_KEY.length;
    while (isWhitespace(code(at))) at++;
    if (code(at) === 0x22) {
      const closing = text ? event.indexOf('"', at + 1) : event.indexOf(0x22, at + 1);
      if (closing < 0) return null;
      return text ? event.slice(at + 1, closing) : event.toString('utf8', at + 1, closing);
    }
    key = next(at);
  }
  return null;
}

/**
 * Whether an event has a token's shape: one `data: {…}` line, told by its first and last bytes and the absence of a
 * line break, without decoding it. An event of any other shape is decoded and parsed to be told valid.
 */
function isObjectShaped(event: Buffer): boolean {
  return (
    event.length > OBJECT_EVENT_START.length &&
    event[event.length - 1] === 0x7d &&
    event.compare(OBJECT_EVENT_START, 0, OBJECT_EVENT_START.length, 0, OBJECT_EVENT_START.length) === 0 &&
    event.indexOf(0x0a) < 0
  );
}

/** `data` read as a JSON object, or undefined when it is not one (JSON.parse's own message, which would quote it, goes nowhere). */
function jsonObject(data: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The token counts of an answer's usage object. */
export interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

/** Watches the events of one streamed answer and records the outcome once. */
export class StreamMeter {
  private ttftMs: number | null = null;
  private usage: Usage | null = null;
  private finishReason: string | null = null;
  /** The code of the engine's own error event in the stream (it shut down, its generation failed). */
  private engineError: string | null = null;
  completed = false;
  /** The replica's side ended first, without `[DONE]` (or sent nothing for the idle bound). */
  cut = false;
  /**
   * The replica's answer is invalid: an event over the bound (cut here), or one that is not JSON (cut here by a reader
   * that reads it, `relayChunks`; passed on as it is by REST's byte relay, which goes on).
   */
  invalid = false;

  constructor(private readonly routed: RoutedRequest) {}

  /**
   * Looks at one event's data; false when it is not to be passed on (the usage chunk, always requested upstream,
   * that the client did not ask for). `checked`: the data of a whole event of the stream, which is the replica's
   * invalid answer unless it is a JSON object (or `[DONE]`, or empty: a comment).
   */
  observe(data: string, checked = false): boolean {
    if (data === '[DONE]') {
      this.completed = true;
      return true;
    }
    if (this.ttftMs === null && FIRST_TOKEN.test(data)) this.ttftMs = performance.now() - this.routed.startedAt;
    if (this.engineError === null && ERROR_PAYLOAD.test(data)) this.engineError = engineErrorCode(data);
    const usage = USAGE.test(data);
    if (usage || (checked && data !== '')) {
      const chunk = jsonObject(data) as { usage?: Usage; choices?: unknown[] } | undefined;
      if (chunk === undefined) {
        // Not JSON (an engine's own shape, or cut short): passed on as it is, not counted.
        if (checked) this.invalid = true;
        return true;
      }
      if (usage && chunk.usage) this.usage = chunk.usage;
      if (usage && chunk.choices?.length === 0 && !this.routed.request.includeUsage) return false;
    }
    this.finishReason = finishReasonOf(data) ?? this.finishReason;
    return true;
  }

  /**
   * The same for one whole event's raw bytes. A token's event (the first token already seen, no usage object, not
   * `[DONE]`, of a token's shape: `data: {…}`) is only searched, never decoded; anything else is read as text by
   * `observe`, and checked to be JSON. So an event that is not a JSON object is told as such by its first or last
   * byte, or by its parse; a token's event braced as one is not parsed (that would double the relay's cost per token).
   */
  observeEvent(event: Buffer): boolean {
    this.routed.capture?.event(event);
    if (
      this.ttftMs === null ||
      event.length < SHORT_EVENT_BYTES ||
      hasUsageObject(event) ||
      opensWithErrorKey(event) ||
      !isObjectShaped(event)
    )
      return this.observe(eventData(event.toString('utf8')), true);
    this.finishReason = finishReasonOf(event) ?? this.finishReason;
    return true;
  }

  /** Whether the first token came: the idle bound counts from then on (a long prompt's prefill may take minutes). */
  get ttftSeen(): boolean {
    return this.ttftMs !== null;
  }

  /**
   * Records the outcome. An answer that ended in an error (an event over the bound or not JSON, the engine's own
   * error event) is recorded with that error's code and status 502, whatever was sent before, so that it counts as
   * the 5xx it is in the metrics, on every surface; a cut keeps its own class (`upstream_disconnected`).
   */
  finish(): void {
    if (!this.completed) this.routed.upstream.body.destroy();
    const failed = this.invalid ? UPSTREAM_NOT_JSON.code : this.engineError;
    this.routed.finish({
      promptTokens: this.usage?.prompt_tokens ?? null,
      completionTokens: this.usage?.completion_tokens ?? null,
      ttftMs: this.ttftMs,
      finishReason: this.finishReason,
      cancelled: !this.completed && failed === null,
      errorCode: failed ?? (this.cut ? UPSTREAM_CUT.code : null),
      ...(failed !== null ? { httpStatus: FAILED_ANSWER_STATUS } : {}),
    });
  }
}

/** The code of an engine's error event (OpenAI's `{ error: { code } }`), or `upstream_error` when it names none. */
function engineErrorCode(data: string): string {
  const code = (jsonObject(data) as { error?: { code?: unknown } } | undefined)?.error?.code;
  return typeof code === 'string' && code !== '' ? code : 'upstream_error';
}
