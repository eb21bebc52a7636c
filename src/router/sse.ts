/**
 * Server-sent events as OpenAI-style engines send them: events end with a
 * blank line, `\n\n` or `\r\n\r\n` (servers built on sse-starlette, such as
 * llama-cpp-python's, use CRLF), and a payload is the event's `data:` lines.
 */
import type { Readable } from 'node:stream';

const LF_END = Buffer.from('\n\n');
const CRLF_END = Buffer.from('\r\n\r\n');

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

/**
 * The payloads of a `text/event-stream` body as its events arrive (a last
 * event without its blank line included), for the surfaces that read the
 * events (GraphQL); the REST relay passes the bytes through instead, split
 * by the same eventEnd.
 */
export async function* sseData(body: Readable): AsyncGenerator<string> {
  let partial: Buffer | null = null;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    const bytes: Buffer = partial ? Buffer.concat([partial, chunk]) : chunk;
    let start = 0;
    for (let found = eventEnd(bytes); found; found = eventEnd(bytes, start)) {
      const data = eventData(bytes.toString('utf8', start, found.end));
      if (data) yield data;
      start = found.next;
    }
    partial = start < bytes.length ? bytes.subarray(start) : null;
  }
  const last = partial && eventData(partial.toString('utf8').replace(/\s+$/, ''));
  if (last) yield last;
}
