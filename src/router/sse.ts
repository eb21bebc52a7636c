/** Splits a `text/event-stream` body into the `data:` payloads of its events, as they arrive. */
import type { Readable } from 'node:stream';

/** The `data:` payload of one event's text (its `data:` lines, joined); '' for an event without one (a comment). */
export function eventData(event: string): string {
  if (event.startsWith('data: ') && !event.includes('\n')) return event.slice(6);
  return event
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(line[5] === ' ' ? 6 : 5))
    .join('\n');
}

export async function* sseData(body: Readable): AsyncGenerator<string> {
  let buffer = '';
  body.setEncoding('utf8');
  for await (const chunk of body as AsyncIterable<string>) {
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const data = eventData(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (data) yield data;
    }
  }
}
