/**
 * Server-sent events as OpenAI-style engines send them: events end with a
 * blank line, `\n\n` or `\r\n\r\n` (servers built on sse-starlette, such as
 * llama-cpp-python's, use CRLF), and a payload is the event's `data:` lines.
 */
import type { Readable } from 'node:stream';
import { createParser } from 'eventsource-parser';

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
 * event without its blank line included), parsed by eventsource-parser: for
 * the surfaces that read the events (GraphQL). The REST relay passes bytes
 * through with eventEnd instead, which is cheaper per token.
 */
export async function* sseData(body: Readable): AsyncGenerator<string> {
  const pending: string[] = [];
  const parser = createParser({ onEvent: (event) => void (event.data && pending.push(event.data)) });
  body.setEncoding('utf8');
  for await (const chunk of body as AsyncIterable<string>) {
    parser.feed(chunk);
    for (const data of pending.splice(0)) yield data;
  }
  parser.feed('\n\n');
  for (const data of pending.splice(0)) yield data;
}
