/**
 * Relays a routed answer to a client as it arrives, measuring it on the way:
 * time to the first token, token usage and finish reason. REST passes the
 * upstream bytes through as they are, one write per upstream chunk, looking
 * into an event only as far as byte searches need; GraphQL reads the events
 * as an async stream and parses them.
 */
import type { Writable } from 'node:stream';
import { DEFAULTS } from '../defaults.js';
import { stallGuard } from '../util/stall-guard.js';
import type { RoutedRequest } from './dispatch.js';
import { eventData, eventEnd, sseData } from './sse.js';

/** The first text of an answer: a chat delta's content or reasoning, a text completion's text, or the first tool call. */
const FIRST_TOKEN = /"(?:(?:reasoning_)?content|text)":"[^"]|"tool_calls":\[\{/;
const FINISH_KEY = '"finish_reason":"';
const FINISH_KEY_BYTES = Buffer.from(FINISH_KEY);
/** A usage object, not the `"usage":null` that OpenAI-style engines put in every chunk. */
const USAGE = /"usage":\s*\{/;
const USAGE_KEY_BYTES = Buffer.from('"usage":');
/** Shorter events are looked at as text: `data: [DONE]`, comments. */
const SHORT_EVENT_BYTES = 32;

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

/** Thrown by the readers below when the replica's answer broke off. */
export class UpstreamCutError extends Error {
  readonly code = UPSTREAM_CUT.code;
  constructor(cause?: unknown) {
    super(UPSTREAM_CUT.message, { cause });
    this.name = 'UpstreamCutError';
  }
}

/** Watches the events of one streamed answer and records the outcome once. */
class StreamMeter {
  private ttftMs: number | null = null;
  private usage: Usage | null = null;
  private finishReason: string | null = null;
  completed = false;
  /** The replica's side ended first, without `[DONE]`. */
  cut = false;

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
    if (this.ttftMs === null || event.length < SHORT_EVENT_BYTES || hasUsageObject(event))
      return this.observe(eventData(event.toString('utf8')));
    const finish = event.indexOf(FINISH_KEY_BYTES);
    if (finish >= 0) {
      const start = finish + FINISH_KEY_BYTES.length;
      this.finishReason = event.toString('utf8', start, event.indexOf(0x22, start));
    }
    return true;
  }

  finish(): void {
    if (!this.completed) this.routed.upstream.body.destroy();
    this.routed.finish({
      promptTokens: this.usage?.prompt_tokens ?? null,
      completionTokens: this.usage?.completion_tokens ?? null,
      ttftMs: this.ttftMs,
      finishReason: this.finishReason,
      cancelled: !this.completed,
      errorCode: this.cut ? UPSTREAM_CUT.code : null,
    });
  }
}

/**
 * The `data:` payloads of a streamed answer, `[DONE]` included, for consumers
 * that parse them. The slot is released when the stream ends or the consumer
 * stops.
 */
export async function* relayStream(routed: RoutedRequest): AsyncGenerator<string> {
  const meter = new StreamMeter(routed);
  try {
    try {
      for await (const data of sseData(routed.upstream.body)) {
        routed.capture?.event(data);
        if (meter.observe(data)) yield data;
      }
    } catch (error) {
      meter.cut = true;
      throw new UpstreamCutError(error);
    }
    if (!meter.completed) {
      meter.cut = true;
      throw new UpstreamCutError();
    }
  } finally {
    meter.finish();
  }
}

/**
 * Passes a streamed answer's events through to `out` as they arrive, byte for
 * byte: each upstream chunk's complete events are written at once (less the
 * usage event a client did not ask for), with backpressure, and a partial
 * event waits for the rest (at the end of the answer, it goes as it is).
 * An answer the replica's side ends without `[DONE]` (the engine died, its
 * connection broke) ends with `cutEvents`, never silently: the surface's
 * events for an `UpstreamCutError` (the OpenAI-compatible route's:
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
  let partial: Buffer | null = null;
  return new Promise<void>((resolve) => {
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      stall.stop();
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
      const bytes: Buffer = partial ? Buffer.concat([partial, chunk]) : chunk;
      // [from, start): whole events to pass on; an event the meter drops is cut out.
      let from = 0;
      let start = 0;
      const kept: Buffer[] = [];
      for (let found = eventEnd(bytes); found; found = eventEnd(bytes, start)) {
        if (!meter.observeEvent(bytes.subarray(start, found.end))) {
          if (start > from) kept.push(bytes.subarray(from, start));
          from = found.next;
        }
        start = found.next;
      }
      partial = start < bytes.length ? bytes.subarray(start) : null;
      if (start > from) kept.push(bytes.subarray(from, start));
      if (kept.length === 0) return;
      const accepted = out.write(kept.length === 1 ? kept[0]! : Buffer.concat(kept));
      stall.wrote(accepted);
      if (!accepted) {
        upstream.pause();
        out.once('drain', () => upstream.resume());
      }
    });
    upstream.once('end', () => {
      // A last event without its blank line (some servers end on `data: [DONE]\n`): it goes with one,
      // since SSE clients drop an event the stream ends inside.
      const last = partial?.toString('utf8').replace(/\s+$/, '');
      partial = null;
      if (last) routed.capture?.event(eventData(last));
      if (last && meter.observe(eventData(last)) && !out.destroyed) out.write(`${last}${last.includes('\r') ? '\r\n\r\n' : '\n\n'}`);
      upstreamEnded();
    });
    upstream.once('error', upstreamEnded);
    upstream.once('close', upstreamEnded);
    out.once('close', done);
  });
}

/** The whole body of a non-streamed answer (one JSON document), measured. */
export async function collectBody(routed: RoutedRequest): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let completed = false;
  let cut = false;
  try {
    try {
      for await (const chunk of routed.upstream.body) chunks.push(chunk as Buffer);
    } catch (error) {
      // The client leaving aborts the upstream request too (an AbortError): only a break on the replica's side is a cut.
      cut = (error as { name?: string }).name !== 'AbortError';
      throw cut ? new UpstreamCutError(error) : error;
    }
    completed = true;
  } finally {
    const body = Buffer.concat(chunks);
    if (completed) routed.capture?.wholeBody(body);
    let usage: Usage | undefined;
    let finishReason: string | null = null;
    if (completed && routed.upstream.status === 200) {
      try {
        const parsed = JSON.parse(body.toString('utf8')) as { usage?: Usage; choices?: { finish_reason?: string }[] };
        usage = parsed.usage;
        finishReason = parsed.choices?.[0]?.finish_reason ?? null;
      } catch {
        // recorded without usage
      }
    }
    routed.finish({
      promptTokens: usage?.prompt_tokens ?? null,
      completionTokens: usage?.completion_tokens ?? null,
      ttftMs: completed ? performance.now() - routed.startedAt : null,
      finishReason,
      cancelled: !completed,
      errorCode: cut ? UPSTREAM_CUT.code : null,
    });
  }
  return Buffer.concat(chunks);
}
