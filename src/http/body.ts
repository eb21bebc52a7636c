/**
 * The gateway's body rules, for every HTTP surface (REST, chat, the SSE
 * transport), over the one reader and JSON writer in src/util/http-body.ts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FailureError, invalidInputError } from '../domain/errors.js';
import { findNul, TEXT_RULES } from '../domain/field-checker.js';
import { readBodyText as readText, sendJson } from '../util/http-body.js';
import { describeJsonSyntaxError } from '../util/json-syntax.js';

export const MAX_BODY_BYTES = 1 << 20;

export const BODY_TOO_LARGE_MESSAGE = `request body exceeds ${MAX_BODY_BYTES} bytes`;

/**
 * A request's body as text, or null when it is larger than MAX_BODY_BYTES: the 413 sent on `res`
 * with sendJson goes out at once, and the connection closes once the rest is drained (see
 * util/http-body.ts).
 */
export function readBodyText(req: IncomingMessage, res: ServerResponse): Promise<string | null> {
  return readText(req, res, { maxBytes: MAX_BODY_BYTES });
}

/** `application/json`, or a `+json` type, with any parameters (`; charset=utf-8`). */
const JSON_CONTENT_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;

/**
 * A body sent compressed (`Content-Encoding` other than `identity`), which
 * this server does not decode: a 415 naming the header (RFC 9110 §15.5.16),
 * rather than a misleading "must be valid JSON".
 */
export function unsupportedEncoding(req: IncomingMessage): FailureError | undefined {
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  if (encoding === undefined || encoding === '' || encoding === 'identity') return undefined;
  return invalidInputError(
    [{ field: 'Content-Encoding', message: `is not supported (got ${JSON.stringify(encoding.slice(0, 40))}): send the body uncompressed` }],
    'unsupported_media_type',
  );
}

/**
 * The JSON body; an empty body reads as `undefined`. Throws a `FailureError`:
 * too large past MAX_BODY_BYTES (413); sent as another content type (415; a
 * request without the header is read as JSON); text that is not JSON, or a
 * string anywhere inside it that holds NUL, which no field may (TEXT_RULES) (400).
 */
export async function readJsonBody(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const encoded = unsupportedEncoding(req);
  if (encoded) throw encoded;
  const text = await readBodyText(req, res);
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
    throw invalidInputError([{ field: 'body', message: `must be valid JSON: ${describeJsonSyntaxError(text)}` }], 'invalid_json');
  }
  const nul = findNul(body, '');
  if (nul !== undefined) throw invalidInputError([{ field: nul || 'body', message: TEXT_RULES.nul }]);
  return body;
}

export { sendJson };
