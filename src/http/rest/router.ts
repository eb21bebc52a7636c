/**
 * A small router for the REST routes: method and path patterns with `:param`
 * segments, JSON bodies (read by ../body.ts), and one place that turns errors
 * into the documented error body (./errors.ts). A known path asked with a
 * method it does not take is a 405 with `Allow`; HEAD is answered as GET, the
 * body left out (Node's HTTP server drops it for HEAD).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FailureError, failureOfDomainError, invalidInputError, isServerFailure } from '../../domain/errors.js';
import type { Result } from '../../domain/result.js';
import { findNul, TEXT_RULES, textViolation } from '../../domain/field-checker.js';
import { readJsonBody, sendJson } from '../body.js';
import { failureOf } from '../failures.js';
import { logFailure, requestIdOf, type Log } from '../request-id.js';
import { restErrorOfFailure, sendRestError } from './errors.js';

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
  /** Instead of a JSON body: the handler writes the whole response itself (a stream, headers included). */
  stream?: (res: ServerResponse) => Promise<void>;
}

export type RouteHandler = (request: RouteRequest) => Promise<RouteResponse>;

interface Route {
  method: string;
  path: string;
  pattern: RegExp;
  names: string[];
  handler: RouteHandler;
}

/** A path parameter, decoded; a 400 naming it when it does not decode or holds NUL. */
function decodeParam(name: string, raw: string): string {
  let value: string;
  try {
    value = decodeURIComponent(raw);
  } catch {
    throw invalidInputError([{ field: name, message: 'must be percent-encoded UTF-8' }]);
  }
  const broken = textViolation(value);
  if (broken) throw invalidInputError([{ field: name, message: broken }]);
  return value;
}

/** The query string's parameters; a 400 naming one that holds NUL. */
function checkQuery(query: URLSearchParams): void {
  for (const [name, value] of query) {
    if (findNul(name, '') !== undefined) throw invalidInputError([{ field: 'query', message: TEXT_RULES.nul }]);
    if (findNul(value, '') !== undefined) throw invalidInputError([{ field: name, message: TEXT_RULES.nul }]);
  }
}

/** Unwraps a service result, throwing the documented error for a failure. */
export function unwrap<T>(result: Result<T>): T {
  if (result.type === 'error') throw new FailureError(failureOfDomainError(result.error));
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
    this.routes.push({ method, path, pattern: new RegExp(`^${source}/?$`), names, handler });
    return this;
  }

  /** Every route's method and path template (`:param` segments), in the order they were added. */
  list(): { method: string; path: string }[] {
    return this.routes.map(({ method, path }) => ({ method, path }));
  }

  /**
   * The route for a method and path; for a path whose routes take other
   * methods, the methods they take (HEAD is served as GET without a body).
   */
  match(method: string, pathname: string): { handler: RouteHandler; params: Record<string, string> } | { allow: string[] } | undefined {
    const allow = new Set<string>();
    const wanted = method === 'HEAD' ? 'GET' : method;
    for (const route of this.routes) {
      const m = route.pattern.exec(pathname);
      if (!m) continue;
      allow.add(route.method);
      if (route.method === 'GET') allow.add('HEAD');
      if (route.method !== wanted) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => {
        params[name] = decodeParam(name, m[i + 1]!);
      });
      return { handler: route.handler, params };
    }
    return allow.size > 0 ? { allow: [...allow] } : undefined;
  }

  /** Answers the request; a failure gets its documented error, and a bug is logged once with the request id. */
  async handle(req: IncomingMessage, res: ServerResponse, url: URL, log: Log): Promise<void> {
    try {
      const method = req.method ?? 'GET';
      const found = this.match(method, url.pathname);
      if (found === undefined) throw new FailureError({ kind: 'not-found', message: `no route for ${method} ${url.pathname}` });
      if ('allow' in found) {
        const allow = found.allow.join(', ');
        const message = `${url.pathname} does not accept ${method}: it accepts ${allow}`;
        return sendRestError(res, { status: 405, code: 'METHOD_NOT_ALLOWED', message, headers: { allow } });
      }
      checkQuery(url.searchParams);
      const response = await found.handler({
        req,
        params: found.params,
        query: url.searchParams,
        body: () => readJsonBody(req, res),
      });
      if (response.stream) {
        await response.stream(res);
      } else if (response.body === undefined) {
        res.writeHead(response.status);
        res.end();
      } else {
        sendJson(res, response.status, response.body);
      }
    } catch (error) {
      const failure = failureOf(error);
      if (isServerFailure(failure)) logFailure(log, requestIdOf(req), `${req.method} ${url.pathname}`, error);
      sendRestError(res, restErrorOfFailure(failure));
    }
  }
}
