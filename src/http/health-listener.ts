/**
 * The probes, /healthz (the process answers) and /readyz (not draining, and the database answers within a second):
 * answered here for the main server (./server.ts) and, when HEALTH_PORT is set, for a listener of their own
 * (docs/operations.md#health-checks).
 *
 * The main server holds at most HTTP_MAX_CONNECTIONS connections (./connection-cap.ts), whoever opened them: a flood
 * of idle sockets fills it, and a liveness probe on that port then fails and has the kubelet restart a gateway that
 * was fine, cutting every stream it served. The probes' own listener is outside that count, with a small cap and short
 * timeouts of its own, so that filling it takes a steady stream of new connections rather than a few idle ones; it
 * serves nothing but the probes, and it is not behind the Service.
 *
 * src/main.ts opens that listener first thing, before the database and its migrations, which may take minutes: a
 * liveness probe that found no listener meanwhile would have the kubelet restart the gateway mid-migration, over and
 * over. Until the gateway serves, it answers `startingProbes` (alive, not ready, and what the start is doing); the
 * gateway's server then takes it over (`serve`) on the same bound port, with no moment where it is closed.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { sendJson } from './body.js';
import { baseSecurityHeaders } from './console-route.js';
import { DATABASE_RETRY_AFTER_S } from './failures.js';
import { listen } from './listen.js';
import { parseRequestTarget } from './request-target.js';

/** How long /readyz waits for the database before it answers 503. */
const READY_TIMEOUT_MS = 800;

/** The listener's own cap: a kubelet probes one connection at a time, a few probes per period. */
export const HEALTH_MAX_CONNECTIONS = 64;
/** How long a connection to the listener may take to send its request (then 408 and the connection closes). */
export const HEALTH_TIMEOUT_MS = 2000;

/** What the probes read: the gateway's drain, and its database. */
export interface ProbeState {
  /** Whether the gateway drains (./drain.ts): /readyz answers 503. */
  draining(): boolean;
  /** Whether the database answers within `timeoutMs`. */
  databaseReady(timeoutMs: number): Promise<boolean>;
}

/** Answers a probe's path; the caller routes only those that `isProbePath` accepts. */
export type Probes = (pathname: string, res: http.ServerResponse) => Promise<void>;

export function isProbePath(pathname: string): boolean {
  return pathname === '/healthz' || pathname === '/readyz';
}

/** The probes' answers, the same on both listeners. */
export function probes(state: ProbeState): Probes {
  return async (pathname, res) => {
    if (pathname === '/healthz') {
      sendJson(res, 200, { status: 'ok' });
    } else if (pathname === '/readyz') {
      // A draining gateway is not ready, whatever its database: what still routes here (a health checker over a kept-alive
      // connection) stops. /healthz stays 200: the process is alive, and a liveness probe must not kill its drain.
      if (state.draining()) sendJson(res, 503, { status: 'draining' });
      // Within a second either way: a database that does not answer in time is as good as down.
      else if (await state.databaseReady(READY_TIMEOUT_MS)) sendJson(res, 200, { status: 'ready' });
      else sendJson(res, 503, { status: 'database unavailable' }, { 'retry-after': String(DATABASE_RETRY_AFTER_S) });
    }
  };
}

/**
 * The probes' answers while the process starts, before the gateway serves: /healthz 200 (the process is alive, so a
 * liveness probe lets a long migration finish) and /readyz 503 `starting`, with the step the start is at (`step()`).
 */
export function startingProbes(step: () => string): Probes {
  return async (pathname, res) => {
    if (pathname === '/healthz') sendJson(res, 200, { status: 'ok' });
    else if (pathname === '/readyz') sendJson(res, 503, { status: 'starting', step: step() });
  };
}

export interface HealthListenerOptions {
  port: number;
  host: string;
  /** @default HEALTH_MAX_CONNECTIONS */
  maxConnections?: number;
  /** @default HEALTH_TIMEOUT_MS */
  timeoutMs?: number;
}

export interface HealthListener {
  /** e.g. `http://127.0.0.1:8081` */
  url: string;
  /** Answers the probes with `answer` from now on (the gateway's, once it serves); a request already answering ends as it began. */
  serve(answer: Probes): void;
  /** Stops listening and cuts the connections it holds; resolves once it closed. */
  close(): Promise<void>;
}

/** Listens for the probes alone on `options.port`: anything else there is a 404. */
export async function listenForProbes(first: Probes, options: HealthListenerOptions): Promise<HealthListener> {
  let answer = first;
  const timeoutMs = options.timeoutMs ?? HEALTH_TIMEOUT_MS;
  // A connection that sends no request, or trickles one, is answered 408 and closed after `timeoutMs`: Node checks
  // the connections every `connectionsCheckingInterval`, so the check is kept well under the timeout.
  const server = http.createServer(
    { requestTimeout: timeoutMs, headersTimeout: timeoutMs, connectionsCheckingInterval: Math.max(100, Math.floor(timeoutMs / 4)) },
    (req, res) => {
      baseSecurityHeaders(res);
      // One request per connection (a kubelet's probe opens one for each anyway): no kept-alive connection holds a place.
      res.shouldKeepAlive = false;
      const target = parseRequestTarget(req.url, req.headers.host);
      const pathname = target.type === 'error' ? (req.url ?? '').slice(0, 200) : target.value.pathname;
      if (target.type === 'error' || !isProbePath(pathname)) {
        return sendJson(res, 404, { error: { code: 'NOT_FOUND', message: `no route for ${req.method} ${pathname}` } });
      }
      answer(pathname, res).catch(() => res.destroy());
    },
  );
  server.keepAliveTimeout = timeoutMs;
  // Its own count, apart from the main server's: a flood of the main port leaves the probes their places.
  server.maxConnections = options.maxConnections ?? HEALTH_MAX_CONNECTIONS;
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // A malformed request, or one that timed out: Node's own 400 or 408, then the connection closes (its default).
  const url = await listen(server, options.port, options.host);
  return {
    url,
    serve: (next) => {
      answer = next;
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
