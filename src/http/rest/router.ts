/**
 * A small router for the REST routes: method and path patterns with `:param`
 * segments, JSON bodies with a size limit, and one place that turns errors
 * into the documented error body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Result } from '../../domain/result.js';
import { findNul, TEXT_RULES, textViolation } from '../../domain/field-checker.js';
import { ClientInputError, restErrorOf } from '../failures.js';
import { HttpError, httpErrorOf, sendError, sendJson } from './responses.js';

export interface RouteRequest {
  req: IncomingMessage;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Reads the JSON body; an empty body reads as `undefined`. */
  body(): Promise<unknown>;
}

/** What a handler answers: a status and a JSON body, or nothing for 204. */
export interface RouteResponse {
  status: number;
  body?: unknown;
}

export type RouteHandler = (request: RouteRequest) => Promise<RouteResponse>;

interface Route {
  method: string;
  pattern: RegExp;
  names: string[];
  handler: RouteHandler;
}

export const MAX_BODY_BYTES = 1 << 20;

/**
 * How much of an oversized body is still read (and dropped), so that the 413
 * reaches the client: a connection closed while a client is still sending
 * shows it a reset, not the answer. Past this the connection is cut.
 */
const OVERSIZED_DRAIN_BYTES = 16 * MAX_BODY_BYTES;

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
 * The JSON body; an empty body reads as `undefined`. 413 past MAX_BODY_BYTES;
 * 415 for a body sent as another content type (a request without the header
 * is read as JSON); 400 for text that is not JSON, or for a string anywhere
 * inside it that holds NUL, which no field may (see TEXT_RULES).
 */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const text = await readBodyText(req);
  if (text === null) throw new HttpError(413, 'INVALID_ARGUMENT', `request body exceeds ${MAX_BODY_BYTES} bytes`);
  if (text.trim() === '') return undefined;
  const type = req.headers['content-type'];
  if (type !== undefined && !JSON_CONTENT_TYPE.test(type)) {
    throw new ClientInputError(
      [{ field: 'Content-Type', message: `must be application/json (got ${JSON.stringify(type.slice(0, 100))})` }],
      415,
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ClientInputError([{ field: 'body', message: 'must be valid JSON' }], 400, 'invalid_json');
  }
  const nul = findNul(body, '');
  if (nul !== undefined) throw new ClientInputError([{ field: nul || 'body', message: TEXT_RULES.nul }]);
  return body;
}

/** A path parameter, decoded; a 400 naming it when it does not decode or holds NUL. */
function decodeParam(name: string, raw: string): string {
  let value: string;
  try {
    value = decodeURIComponent(raw);
  } catch {
    throw new ClientInputError([{ field: name, message: 'must be percent-encoded UTF-8' }]);
  }
  const broken = textViolation(value);
  if (broken) throw new ClientInputError([{ field: name, message: broken }]);
  return value;
}

/** The query string's parameters; a 400 naming one that holds NUL. */
function checkQuery(query: URLSearchParams): void {
  for (const [name, value] of query) {
    if (findNul(name, '') !== undefined) throw new ClientInputError([{ field: 'query', message: TEXT_RULES.nul }]);
    if (findNul(value, '') !== undefined) throw new ClientInputError([{ field: name, message: TEXT_RULES.nul }]);
  }
}

/** Unwraps a service result, throwing the documented error for a failure. */
export function unwrap<T>(result: Result<T>): T {
  if (result.type === 'error') throw httpErrorOf(result.error);
  return result.value;
}

export class Router {
  private readonly routes: Route[] = [];

  add(method: string, path: string, handler: RouteHandler): this {
    const names: string[] = [];
    const source = path.replace(/:(\w+)/g, (_, name: string) => {
      names.push(name);
      return '([^/]+)';
    });
    this.routes.push({ method, pattern: new RegExp(`^${source}/?$`), names, handler });
    return this;
  }

  /** Whether some route has this path, whatever its method. */
  match(method: string, pathname: string): { handler: RouteHandler; params: Record<string, string> } | 'wrong-method' | undefined {
    let pathMatched = false;
    for (const route of this.routes) {
      const m = route.pattern.exec(pathname);
      if (!m) continue;
      pathMatched = true;
      if (route.method !== method) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => {
        params[name] = decodeParam(name, m[i + 1]!);
      });
      return { handler: route.handler, params };
    }
    return pathMatched ? 'wrong-method' : undefined;
  }

  async handle(req: IncomingMessage, res: ServerResponse, url: URL, log: (error: unknown) => void): Promise<void> {
    try {
      const method = req.method ?? 'GET';
      const found = this.match(method, url.pathname);
      if (found === undefined) throw new HttpError(404, 'NOT_FOUND', `no route for ${method} ${url.pathname}`);
      if (found === 'wrong-method') throw new HttpError(404, 'NOT_FOUND', `${url.pathname} does not accept ${method}`);
      checkQuery(url.searchParams);
      const response = await found.handler({
        req,
        params: found.params,
        query: url.searchParams,
        body: () => readJsonBody(req),
      });
      if (response.body === undefined) {
        res.writeHead(response.status);
        res.end();
      } else {
        sendJson(res, response.status, response.body);
      }
    } catch (error) {
      if (error instanceof HttpError) return sendError(res, error);
      const mapped = restErrorOf(error);
      if (mapped.status === 500) log(error);
      sendError(res, mapped);
    }
  }
}
