/**
 * Relays a routed answer to a client as it arrives, measuring it on the way
 * (a stream's events: stream-meter.ts): time to the first token, token usage,
 * finish reason, and how it ended. REST passes the
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
import { FAILED_ANSWER_STATUS, UPSTREAM_CUT, UPSTREAM_NOT_JSON, UPSTREAM_TOO_LARGE, UpstreamCutError } from './answer-errors.js';
import type { RoutedRequest } from './dispatch.js';
import { eventData, EventTooLargeError, SseParser } from './sse.js';
import { StreamMeter, type Usage } from './stream-meter.js';

// The answer's errors, defined in answer-errors.ts, are the relay's to its callers.
export { UPSTREAM_CUT, UPSTREAM_NOT_JSON, UPSTREAM_TOO_LARGE, UpstreamCutError } from './answer-errors.js';

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
 * src/http/rest/chat-errors.ts). An event that is not JSON is passed on as it
 * is, and the answer goes on, but it is recorded as `upstream_invalid` (502),
 * as GraphQL's relay records it (stream-meter.ts). Resolves when the answer
 * ended or either side went away.
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
