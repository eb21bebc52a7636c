/**
 * Relays a routed answer to a client as it arrives, measuring it on the way:
 * time to the first token, token usage and finish reason. REST passes the
 * upstream bytes through as they are, one write per upstream chunk, looking
 * into an event only as far as byte searches need; GraphQL reads the events
 * as an async stream and parses them. Both split the stream with the one
 * parser (sse.ts), and hold the answer to its bounds (answer-bounds.ts): its
 * size, and the replica's silence once the first token came.
 */
import type { Writable } from 'node:stream';
import { DEFAULTS } from '../defaults.js';
import { stallGuard } from '../util/stall-guard.js';
import { ANSWER_MAX_BYTES, IdleBound, UpstreamIdleError } from './answer-bounds.js';
import type { RoutedRequest } from './dispatch.js';
import { eventData, EventTooLargeError, SseParser } from './sse.js';

/** The first text of an answer: a chat delta's content or reasoning, a text completion's text, or the first tool call. */
const FIRST_TOKEN = /"(?:(?:reasoning_)?content|text)":"[^"]|"tool_calls":\[\{/;
const FINISH_KEY = '"finish_reason":"';
const FINISH_KEY_BYTES = Buffer.from(FINISH_KEY);
/** A usage object, not the `"usage":null` that OpenAI-style engines put in every chunk. */
const USAGE = /"usage":\s*\{/;
const USAGE_KEY_BYTES = Buffer.from('"usage":');
/** Shorter events are looked at as text: `data: [DONE]`, comments. */
const SHORT_EVENT_BYTES = 32;
/** An engine's error event (`data: {"error": …}`): the key comes first, within this many bytes of the event's start. */
const ERROR_KEY_BYTES = Buffer.from('{"error"');
const ERROR_KEY_WITHIN = 16;
const ERROR_PAYLOAD = /^\s*\{\s*"error"\s*:/;

/** Whether an event's bytes hold a usage object (the key, optional whitespace, `{`). */
function hasUsageObject(event: Buffer): boolean {
  const key = event.indexOf(USAGE_KEY_BYTES);
  if (key < 0) return false;
  let at = key + USAGE_KEY_BYTES.length;
  while (event[at] === 0x20 || event[at] === 0x09 || event[at] === 0x0a || event[at] === 0x0d) at++;
  return event[at] === 0x7b;
}

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

/** The error of an answer whose replica stopped before it was complete (the engine died or its connection broke). */
export const UPSTREAM_CUT = {
  code: 'upstream_disconnected',
  message: 'The replica serving this request stopped before the answer was complete. Nothing more will come; retry the request.',
} as const;

/** The error of a replica's answer that is not what it should be: read whole or as one event, over its bound (answer-bounds.ts). */
export const UPSTREAM_TOO_LARGE = {
  code: 'upstream_invalid',
  message: 'The replica sent an answer larger than this request can produce. It was cut; retry the request.',
} as const;

/** The error of a replica's answer, or one event of its stream, that is not the JSON it should be (an engine of one's own gone wrong). */
export const UPSTREAM_NOT_JSON = {
  code: 'upstream_invalid',
  message: 'The replica sent an answer that is not valid JSON.',
} as const;

/**
 * Thrown by the readers below when the replica's answer broke off (`UPSTREAM_CUT`), or was cut here for what it
 * was (`UPSTREAM_TOO_LARGE`, `UPSTREAM_NOT_JSON`); the surfaces answer its code and message (src/http/failures.ts).
 */
export class UpstreamCutError extends Error {
  readonly code: string;
  constructor(cause?: unknown, error: { code: string; message: string } = UPSTREAM_CUT) {
    super(error.message, { cause });
    this.name = 'UpstreamCutError';
    this.code = error.code;
  }
}

/** The status a request ended by an error after its 200 is recorded with, as the same failure before it would have been. */
const FAILED_ANSWER_STATUS = 502;

/** Watches the events of one streamed answer and records the outcome once. */
class StreamMeter {
  private ttftMs: number | null = null;
  private usage: Usage | null = null;
  private finishReason: string | null = null;
  /** The code of the engine's own error event in the stream (it shut down, its generation failed). */
  private engineError: string | null = null;
  completed = false;
  /** The replica's side ended first, without `[DONE]` (or sent nothing for the idle bound). */
  cut = false;
  /** Cut here: an event over the bound, or one its reader could not read (`relayChunks`). */
  invalid = false;

  constructor(private readonly routed: RoutedRequest) {}

  /**
   * Looks at one event's data; false when it is not to be passed on (the
   * usage chunk, always requested upstream, that the client did not ask for).
   */
  observe(data: string): boolean {
    if (data === '[DONE]') {
      this.completed = true;
      return true;
    }
    if (this.ttftMs === null && FIRST_TOKEN.test(data)) this.ttftMs = performance.now() - this.routed.startedAt;
    if (this.engineError === null && ERROR_PAYLOAD.test(data)) this.engineError = engineErrorCode(data);
    if (USAGE.test(data)) {
      let chunk: { usage?: Usage; choices?: unknown[] };
      try {
        chunk = JSON.parse(data) as typeof chunk;
      } catch {
        return true; // not JSON (an engine's own shape, or cut short): passed on, not counted
      }
      if (chunk.usage) this.usage = chunk.usage;
      if (chunk.choices?.length === 0 && !this.routed.request.includeUsage) return false;
    }
    // Plain substring searches: this runs for every relayed token.
    const finish = data.indexOf(FINISH_KEY);
    if (finish >= 0) {
      const start = finish + FINISH_KEY.length;
      this.finishReason = data.slice(start, data.indexOf('"', start));
    }
    return true;
  }

  /**
   * The same for one event's raw bytes. A token's event (the first token
   * already seen, no usage object, not `[DONE]`) is only searched, never
   * decoded; anything else is read as text by `observe`.
   */
  observeEvent(event: Buffer): boolean {
    this.routed.capture?.event(event);
    const error = event.indexOf(ERROR_KEY_BYTES);
    if (this.ttftMs === null || event.length < SHORT_EVENT_BYTES || hasUsageObject(event) || (error >= 0 && error < ERROR_KEY_WITHIN))
      return this.observe(eventData(event.toString('utf8')));
    const finish = event.indexOf(FINISH_KEY_BYTES);
    if (finish >= 0) {
      const start = finish + FINISH_KEY_BYTES.length;
      this.finishReason = event.toString('utf8', start, event.indexOf(0x22, start));
    }
    return true;
  }

  /** Whether the first token came: the idle bound counts from then on (a long prompt's prefill may take minutes). */
  get ttftSeen(): boolean {
    return this.ttftMs !== null;
  }

  /**
   * Records the outcome. An answer that ended in an error (an event over the bound, the engine's own error event)
   * is recorded with that error's code and status 502, whatever was sent before, so that it counts as the 5xx it is
   * in the metrics, on every surface; a cut keeps its own class (`upstream_disconnected`).
   */
  finish(): void {
    if (!this.completed) this.routed.upstream.body.destroy();
    const failed = this.invalid ? UPSTREAM_TOO_LARGE.code : this.engineError;
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
  try {
    const code = (JSON.parse(data) as { error?: { code?: unknown } }).error?.code;
    return typeof code === 'string' && code !== '' ? code : 'upstream_error';
  } catch {
    return 'upstream_error';
  }
}

/** The idle bound of `routed`'s answer (ENGINE_IDLE_TIMEOUT_MS): past it, its body is destroyed as cut. */
function idleBound(routed: RoutedRequest): IdleBound {
  const idleMs = routed.idleTimeoutMs ?? 0;
  return new IdleBound(idleMs, () => routed.upstream.body.destroy(new UpstreamIdleError(idleMs)));
}

/** Thrown into `relayStream` by a reader of its events that could not read one (relay-chunks.ts). */
export class UnreadableEventError extends Error {}

/**
 * The `data:` payloads of a streamed answer, `[DONE]` included, for consumers
 * that parse them. The slot is released when the stream ends or the consumer
 * stops. An event over the answer's bound, or one its reader throws an
 * `UnreadableEventError` into the stream for, ends it as `upstream_invalid`; a
 * replica silent past the idle bound once the first token came, as cut
 * (both `UpstreamCutError`).
 */
export async function* relayStream(routed: RoutedRequest): AsyncGenerator<string> {
  const meter = new StreamMeter(routed);
  const parser = new SseParser(routed.maxAnswerBytes ?? ANSWER_MAX_BYTES);
  const idle = idleBound(routed);
  try {
    try {
      for await (const chunk of routed.upstream.body as AsyncIterable<Buffer>) {
        // The consumer's pace (a slow WebSocket) is not the replica's silence: the wait counts only between chunks.
        idle.pause();
        for (const data of parser.payloads(chunk)) {
          routed.capture?.event(data);
          if (meter.observe(data)) yield data;
        }
        if (meter.ttftSeen) idle.resume();
      }
      const last = parser.end();
      const data = last && eventData(last.toString('utf8').replace(/\s+$/, ''));
      if (data) {
        routed.capture?.event(data);
        if (meter.observe(data)) yield data;
      }
    } catch (error) {
      if (error instanceof EventTooLargeError || error instanceof UnreadableEventError) {
        meter.invalid = true;
        throw new UpstreamCutError(error, error instanceof EventTooLargeError ? UPSTREAM_TOO_LARGE : UPSTREAM_NOT_JSON);
      }
      meter.cut = true;
      throw new UpstreamCutError(error);
    }
    if (!meter.completed) {
      meter.cut = true;
      throw new UpstreamCutError();
    }
  } finally {
    idle.stop();
    meter.finish();
  }
}

/**
 * Passes a streamed answer's events through to `out` as they arrive, byte for
 * byte: each upstream chunk's complete events are written at once (less the
 * usage event a client did not ask for), with backpressure, and a partial
 * event waits for the rest (at the end of the answer, it goes as it is).
 * An answer the replica's side ends without `[DONE]` (the engine died, its
 * connection broke), one with an event over the answer's bound, and one
 * whose replica sent nothing for the idle bound once the first token came
 * end with `cutEvents`, never silently: the surface's events for an
 * `UpstreamCutError` (the OpenAI-compatible route's:
 * src/http/rest/chat-errors.ts). Resolves when the answer ended or either
 * side went away.
 */
export function pipeStream(
  routed: RoutedRequest,
  out: Writable,
  cutEvents: string,
  stallMs: number = DEFAULTS.streamStallTimeoutMs,
): Promise<void> {
  const meter = new StreamMeter(routed);
  // A client that takes nothing of the answer for stallMs is cut: its slot goes back (the replica may have finished).
  const stall = stallGuard(out, stallMs);
  const upstream = routed.upstream.body;
  const parser = new SseParser(routed.maxAnswerBytes ?? ANSWER_MAX_BYTES);
  const idle = idleBound(routed);
  return new Promise<void>((resolve) => {
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      stall.stop();
      idle.stop();
      meter.finish();
      resolve();
    };
    /** The replica's side ended: a stream it did not finish gets the cut events (the client is still there). */
    const upstreamEnded = () => {
      if (settled) return;
      if (!meter.completed && !out.destroyed && !out.writableEnded) {
        meter.cut = true;
        out.write(cutEvents);
      }
      done();
    };
    upstream.on('data', (chunk: Buffer) => {
      if (settled) return;
      let parsed;
      try {
        parsed = parser.push(chunk);
      } catch (error) {
        // An event over the bound (an engine that never ends one): the answer is cut here, its replica let go.
        if (!(error instanceof EventTooLargeError)) throw error;
        meter.invalid = true;
        return upstreamEnded();
      }
      if (!parsed) return;
      const { bytes, events } = parsed;
      // [from, start): whole events to pass on; an event the meter drops is cut out.
      let from = 0;
      let start = 0;
      const kept: Buffer[] = [];
      for (const event of events) {
        if (!meter.observeEvent(bytes.subarray(event.start, event.end))) {
          if (start > from) kept.push(bytes.subarray(from, start));
          from = event.next;
        }
        start = event.next;
      }
      if (start > from) kept.push(bytes.subarray(from, start));
      if (kept.length === 0) {
        if (meter.ttftSeen) idle.resume();
        return;
      }
      const accepted = out.write(kept.length === 1 ? kept[0]! : Buffer.concat(kept));
      stall.wrote(accepted);
      if (!accepted) {
        // The client is behind: the replica's silence meanwhile is not its own (the stall guard watches the client).
        idle.pause();
        upstream.pause();
        out.once('drain', () => {
          upstream.resume();
          if (meter.ttftSeen) idle.resume();
        });
      } else if (meter.ttftSeen) idle.resume();
    });
    upstream.once('end', () => {
      // A last event without its blank line (some servers end on `data: [DONE]\n`): it goes with one,
      // since SSE clients drop an event the stream ends inside.
      const last = parser.end()?.toString('utf8').replace(/\s+$/, '');
      if (last) routed.capture?.event(eventData(last));
      if (last && meter.observe(eventData(last)) && !out.destroyed) out.write(`${last}${last.includes('\r') ? '\r\n\r\n' : '\n\n'}`);
      upstreamEnded();
    });
    upstream.once('error', upstreamEnded);
    upstream.once('close', upstreamEnded);
    out.once('close', done);
  });
}

/**
 * The whole body of a non-streamed answer (one JSON document), measured: the
 * answer, or the replica's error answer. One over the answer's bound is cut
 * (its replica let go) and thrown as `upstream_invalid`; one whose replica
 * sends nothing for the idle bound (its head came with the whole generation
 * done) as a cut.
 */
export async function collectBody(routed: RoutedRequest): Promise<Buffer> {
  return (await collect(routed, false)).body;
}

/**
 * The same, read as the JSON object it should be, for consumers that read it (GraphQL): one that is not is thrown
 * as `upstream_invalid` (`UpstreamCutError`), and recorded so with status 502, as one over the bound is.
 */
export async function collectJson(routed: RoutedRequest): Promise<Record<string, unknown>> {
  return (await collect(routed, true)).parsed!;
}

async function collect(routed: RoutedRequest, json: boolean): Promise<{ body: Buffer; parsed?: Record<string, unknown> }> {
  const chunks: Buffer[] = [];
  const maxBytes = routed.maxAnswerBytes ?? ANSWER_MAX_BYTES;
  let size = 0;
  let completed = false;
  let cut = false;
  let tooLarge = false;
  let body = Buffer.alloc(0);
  let parsed: Record<string, unknown> | undefined;
  const idle = idleBound(routed);
  try {
    try {
      idle.resume();
      for await (const chunk of routed.upstream.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > maxBytes) {
          tooLarge = true;
          routed.upstream.body.destroy();
          throw new UpstreamCutError(undefined, UPSTREAM_TOO_LARGE);
        }
        chunks.push(chunk);
        idle.resume();
      }
    } catch (error) {
      if (tooLarge) throw error;
      // The client leaving aborts the upstream request too (an AbortError): only a break on the replica's side is a cut.
      cut = (error as { name?: string }).name !== 'AbortError';
      throw cut ? new UpstreamCutError(error) : error;
    }
    completed = true;
  } finally {
    idle.stop();
    if (completed) body = Buffer.concat(chunks);
    if (completed) routed.capture?.wholeBody(body);
    if (completed && (json || routed.upstream.status === 200)) {
      try {
        const value: unknown = JSON.parse(body.toString('utf8'));
        if (typeof value === 'object' && value !== null && !Array.isArray(value)) parsed = value as Record<string, unknown>;
      } catch {
        // recorded without usage (the text itself goes nowhere: JSON.parse's own message would quote it)
      }
    }
    // Read as JSON, an answer that is not is the replica's invalid answer: so its client is told, and so it counts.
    const unreadable = completed && json && parsed === undefined;
    const ok =
      routed.upstream.status === 200 ? (parsed as { usage?: Usage; choices?: { finish_reason?: string }[] } | undefined) : undefined;
    routed.finish({
      promptTokens: ok?.usage?.prompt_tokens ?? null,
      completionTokens: ok?.usage?.completion_tokens ?? null,
      ttftMs: completed ? performance.now() - routed.startedAt : null,
      finishReason: ok?.choices?.[0]?.finish_reason ?? null,
      cancelled: !completed && !tooLarge,
      errorCode: tooLarge ? UPSTREAM_TOO_LARGE.code : unreadable ? UPSTREAM_NOT_JSON.code : cut ? UPSTREAM_CUT.code : null,
      ...(tooLarge || unreadable ? { httpStatus: FAILED_ANSWER_STATUS } : {}),
    });
  }
  if (json && parsed === undefined) throw new UpstreamCutError(undefined, UPSTREAM_NOT_JSON);
  return parsed ? { body, parsed } : { body };
}
