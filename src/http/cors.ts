/**
 * CORS for every route (GraphQL over HTTP and SSE, REST, chat), from one
 * allowlist (CORS_ORIGINS). Callers authenticate with a bearer key, never a
 * cookie, so no answer ever allows credentials; `*` allows any origin on
 * those terms (the literal `*`, not the caller's origin echoed back). An
 * origin not on the list gets no CORS header at all, and a preflight from it
 * a 403.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from './body.js';

export const CORS_METHODS = 'GET, POST, PUT, DELETE, OPTIONS';
export const CORS_REQUEST_HEADERS = 'Authorization, Content-Type, Accept, X-Friendli-Team, X-Team-Id, X-Request-Id';
/** Response headers a browser script may read besides the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = 'Retry-After, WWW-Authenticate, X-Request-Id';
const PREFLIGHT_MAX_AGE_S = '600';

export class CorsPolicy {
  private readonly any: boolean;
  private readonly allowed: ReadonlySet<string>;

  /** `origins`: exact origins (`https://app.example.com`), or `*` for any; empty: CORS off. */
  constructor(origins: readonly string[]) {
    this.any = origins.includes('*');
    this.allowed = new Set(origins.filter((o) => o !== '*'));
  }

  /** The Access-Control-Allow-Origin for a request's Origin header, or undefined when it gets none. */
  allowOrigin(origin: string | undefined): string | undefined {
    if (origin === undefined) return undefined;
    if (this.any) return '*';
    return this.allowed.has(origin) ? origin : undefined;
  }

  /**
   * Sets the CORS headers of an actual request on `res` (they are kept by
   * whatever writes the head later), or answers a preflight. Returns true
   * when it answered.
   */
  apply(req: IncomingMessage, res: ServerResponse): boolean {
    const origin = typeof req.headers.origin === 'string' ? req.headers.origin : undefined;
    const allowOrigin = this.allowOrigin(origin);
    // With a list, the answer depends on the Origin: shared caches must keep one copy per origin.
    if (!this.any && this.allowed.size > 0) res.setHeader('vary', 'Origin');
    const preflight = req.method === 'OPTIONS' && origin !== undefined && req.headers['access-control-request-method'] !== undefined;
    if (preflight) {
      if (allowOrigin === undefined) {
        sendJson(res, 403, {
          error: { code: 'FORBIDDEN', message: `origin ${JSON.stringify(origin.slice(0, 200))} is not allowed (CORS_ORIGINS)` },
        });
        return true;
      }
      res.writeHead(204, {
        'access-control-allow-origin': allowOrigin,
        'access-control-allow-methods': CORS_METHODS,
        'access-control-allow-headers': CORS_REQUEST_HEADERS,
        'access-control-max-age': PREFLIGHT_MAX_AGE_S,
        'content-length': '0',
      });
      res.end();
      return true;
    }
    if (allowOrigin !== undefined) {
      res.setHeader('access-control-allow-origin', allowOrigin);
      res.setHeader('access-control-expose-headers', CORS_EXPOSED_HEADERS);
    }
    return false;
  }
}
