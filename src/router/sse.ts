/**
 * Server-sent events as OpenAI-style engines send them: events end with a
 * blank line, `\n\n` or `\r\n\r\n` (servers built on sse-starlette, such as
 * llama-cpp-python's, use CRLF), and a payload is the event's `data:` lines.
 * `SseParser` is the one splitter of an answer into events, for both
 * relays (REST's byte pass-through and GraphQL's parsed events).
 */

const LF_END = Buffer.from('\n\n');
const CRLF_END = Buffer.from('\r\n\r\n');
/** A blank line split between two chunks begins at most this many bytes before the new one. */
const SPLIT_END_BYTES = CRLF_END.length - 1;

/**
 * Where the first event in `body` (text or bytes) from `from` ends, and where
 * the next begins; null when none is complete. Bytes are searched with
 * ready-made needles: this runs for every relayed token.
 */
export function eventEnd(body: string | Buffer, from = 0): { end: number; next: number } | null {
  const text = typeof body === 'string';
  const lf = text ? body.indexOf('\n\n', from) : body.indexOf(LF_END, from);
  const crlf = text ? body.indexOf('\r\n\r\n', from) : body.indexOf(CRLF_END, from);
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { end: crlf, next: crlf + 4 };
  return lf >= 0 ? { end: lf, next: lf + 2 } : null;
}

/** The `data:` payload of one event's text (its `data:` lines, joined); '' for an event without one (a comment). */
export function eventData(event: string): string {
  if (event.startsWith('data: ') && !event.includes('\n')) return event.slice(6);
  return event
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(line[5] === ' ' ? 6 : 5))
    .join('\n');
}

/** An event, complete or still arriving, over the parser's bound: the replica's answer is not the stream it should be. */
export class EventTooLargeError extends Error {
  constructor(readonly maxEventBytes: number) {
    super(`the replica sent an event over ${maxEventBytes} bytes`);
    this.name = 'EventTooLargeError';
  }
}

/** One chunk's complete events: each spans [start, end) of `bytes` (its blank line left out), and the next begins at `next`. */
export interface ParsedEvents {
  bytes: Buffer;
  events: { start: number; end: number; next: number }[];
}

/**
 * Splits a stream's chunks into events. An event still arriving is kept as
 * its chunks, and each new chunk is searched alone (with the last bytes
 * before it, for a blank line split between them), so an event that takes
 * many chunks costs its length once, not once per chunk; the chunks are
 * joined once, when it ends. An event longer than `maxEventBytes`, complete
 * or not, throws EventTooLargeError: its bytes are never held past that
 * (one chunk aside), however long the replica goes on without a blank line.
 */
export class SseParser {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(readonly maxEventBytes: number) {}

  /** The events `chunk` completes, with what came before it; null when it completes none. */
  push(chunk: Buffer): ParsedEvents | null {
    let bytes: Buffer;
    let first: { end: number; next: number } | null;
    if (this.pendingBytes === 0) {
      bytes = chunk;
      first = eventEnd(chunk);
    } else {
      const last = this.pending[this.pending.length - 1]!;
      // The bytes before the chunk, in case its blank line began in them (the last chunk held may be shorter than that).
      const before = last.length >= SPLIT_END_BYTES ? last.subarray(last.length - SPLIT_END_BYTES) : this.tail(SPLIT_END_BYTES);
      const found = eventEnd(Buffer.concat([before, chunk]));
      if (!found) {
        this.hold(chunk);
        return null;
      }
      const shift = this.pendingBytes - before.length;
      first = { end: found.end + shift, next: found.next + shift };
      bytes = Buffer.concat([...this.pending, chunk]);
      this.pending = [];
      this.pendingBytes = 0;
    }
    const events: ParsedEvents['events'] = [];
    let start = 0;
    for (let found = first; found; found = eventEnd(bytes, start)) {
      if (found.end - start > this.maxEventBytes) throw new EventTooLargeError(this.maxEventBytes);
      events.push({ start, end: found.end, next: found.next });
      start = found.next;
    }
    if (start < bytes.length) this.hold(bytes.subarray(start));
    return events.length > 0 ? { bytes, events } : null;
  }

  /** What is left at the end of the stream (a last event without its blank line), or null; the parser is empty after. */
  end(): Buffer | null {
    const rest = this.pendingBytes > 0 ? Buffer.concat(this.pending) : null;
    this.pending = [];
    this.pendingBytes = 0;
    return rest;
  }

  /** The payloads of the events `chunk` completes (comments, without one, left out). */
  *payloads(chunk: Buffer): Generator<string> {
    const parsed = this.push(chunk);
    if (!parsed) return;
    for (const { start, end } of parsed.events) {
      const data = eventData(parsed.bytes.toString('utf8', start, end));
      if (data) yield data;
    }
  }

  private hold(bytes: Buffer): void {
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    if (this.pendingBytes > this.maxEventBytes) throw new EventTooLargeError(this.maxEventBytes);
  }

  /** The last `n` bytes held (or all of them, when fewer). */
  private tail(n: number): Buffer {
    const parts: Buffer[] = [];
    let size = 0;
    for (let i = this.pending.length - 1; i >= 0 && size < n; i--) {
      parts.unshift(this.pending[i]!);
      size += this.pending[i]!.length;
    }
    const joined = Buffer.concat(parts);
    return joined.subarray(Math.max(0, joined.length - n));
  }
}
