/**
 * One access line per HTTP request, written when its response ends: method,
 * route (the path with ids replaced, no query), status, duration, the request
 * id the client got, and the API key's id when the key was valid. Never the
 * key itself, a query string or any content.
 *
 * A WebSocket connection (an upgrade, which never reaches the request
 * handler) gets one line too, written when it closes: `ws: true`, status 101,
 * the close code, how long it was open, and the key's id once `connection_init`
 * authenticated it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Services } from '../services/index.js';
import { header } from './authenticate.js';

/** Ids in paths (`ep_…`, `prj_…`), numbers (version indexes) and UUIDs become `:id`. */
const ID_SEGMENT = /^(?:[a-z]{2,5}_[0-9a-z]{6,}|\d+|[0-9a-f-]{32,36})$/;

/** The route of a path: ids replaced, so that lines group by route; long paths cut. */
export function routeOf(pathname: string): string {
  return pathname
    .slice(0, 200)
    .split('/')
    .map((segment) => (ID_SEGMENT.test(segment) ? ':id' : segment))
    .join('/');
}

function pathnameOf(req: IncomingMessage): string {
  try {
    return new URL(req.url ?? '/', 'http://gateway').pathname;
  } catch {
    return '(unparsable)';
  }
}

/** Starts timing `req`; its line is written once the response is finished or abandoned. */
export function logAccess(logger: Logger, services: Services, req: IncomingMessage, res: ServerResponse, requestId: string): void {
  const started = performance.now();
  res.once('close', () => {
    const pathname = pathnameOf(req);
    const keyId = services.auth.keyIdOf(header(req, 'authorization'));
    logger.info(
      {
        reqId: requestId,
        method: req.method,
        route: routeOf(pathname),
        status: res.statusCode,
        durationMs: Math.round((performance.now() - started) * 10) / 10,
        ...(keyId ? { keyId } : {}),
        ...(res.writableFinished ? {} : { aborted: true }),
      },
      'request',
    );
  });
}

/** The access line of one WebSocket connection: started when it opens, written once when it closes. */
export interface SocketAccess {
  /** The connection authenticated with this key (its id only is logged). */
  authenticated(keyId: string | undefined): void;
  /** Writes the line; later calls do nothing. */
  closed(code: number): void;
}

/** Starts timing the WebSocket connection opened by `req` (the upgrade request, which it does not keep). */
export function logSocketAccess(logger: Logger, req: IncomingMessage, requestId: string): SocketAccess {
  const started = performance.now();
  const { method } = req;
  const route = routeOf(pathnameOf(req));
  let keyId: string | undefined;
  let written = false;
  return {
    authenticated(id) {
      keyId = id;
    },
    closed(code) {
      if (written) return;
      written = true;
      logger.info(
        {
          reqId: requestId,
          method,
          route,
          ws: true,
          status: 101,
          closeCode: code,
          durationMs: Math.round((performance.now() - started) * 10) / 10,
          ...(keyId ? { keyId } : {}),
        },
        'request',
      );
    },
  };
}
