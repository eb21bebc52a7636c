/**
 * The gateway's one body reader and one JSON writer, for every HTTP surface
 * (REST, chat, the SSE transport). The engine keeps its own (src/engine/http.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FailureError, invalidInputError } from '../domain/errors.js';
import { findNul, TEXT_RULES } from '../domain/field-checker.js';

export const MAX_BODY_BYTES = 1 << 20;

/**
 * How much of an oversized body is still read (and dropped), so that the 413
 * reaches the client: a connection closed while a client is still sending
 * shows it a reset, not the answer. Past this the connection is cut.
 */
const OVERSIZED_DRAIN_BYTES = 16 * MAX_BODY_BYTES;

export const BODY_TOO_LARGE_MESSAGE = `request body exceeds ${MAX_BODY_BYTES} bytes`;

/**
 * A request's body as text, or null when it is larger than MAX_BODY_BYTES.
 * Listeners, not `for await`: leaving an async iterator early destroys the
 * request, and with it the answer; and an iterator kept attached would stay
 * for a long-lived stream's life.
 */
export function readBodyText(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else if (size > OVERSIZED_DRAIN_BYTES) {
        resolve(null);
        req.destroy();
      }
    });
    req.once('end', () => resolve(size > MAX_BODY_BYTES ? null : Buffer.concat(chunks).toString('utf8')));
    req.once('error', reject);
  });
}

/** `application/json`, or a `+json` type, with any parameters (`; charset=utf-8`). */
const JSON_CONTENT_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;

/**
 * The JSON body; an empty body reads as `undefined`. Throws a `FailureError`:
 * too large past MAX_BODY_BYTES (413); sent as another content type (415; a
 * request without the header is read as JSON); text that is not JSON, or a
 * string anywhere inside it that holds NUL, which no field may (TEXT_RULES) (400).
 */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const text = await readBodyText(req);
  if (text === null) throw new FailureError({ kind: 'invalid', message: BODY_TOO_LARGE_MESSAGE, fields: [], reason: 'too_large' });
  if (text.trim() === '') return undefined;
  const type = req.headers['content-type'];
  if (type !== undefined && !JSON_CONTENT_TYPE.test(type)) {
    throw invalidInputError(
      [{ field: 'Content-Type', message: `must be application/json (got ${JSON.stringify(type.slice(0, 100))})` }],
      'unsupported_media_type',
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalidInputError([{ field: 'body', message: 'must be valid JSON' }], 'invalid_json');
  }
  const nul = findNul(body, '');
  if (nul !== undefined) throw invalidInputError([{ field: nul || 'body', message: TEXT_RULES.nul }]);
  return body;
}

/** Writes a whole JSON response. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}
