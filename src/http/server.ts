/**
 * The one HTTP server: GraphQL (HTTP, SSE and WebSocket) at /graphql, the REST
 * routes under /dedicated, the web console at /, and unauthenticated health
 * checks (also on a listener of their own when HEALTH_PORT is set: ./health-listener.ts).
 */
import { DEFAULTS } from '../defaults.js';
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Services } from '../services/index.js';
import type { Logger } from 'pino';
import type { GraphQLSecurityOptions } from './graphql/limits.js';
import { createGraphQLHttp } from './graphql/http-entry.js';
import { createGraphQL, createWebSocket, GRAPHQL_PATH } from './graphql/yoga.js';
import { routeUpgrades } from './upgrade.js';
import type { AccessWatch } from '../live/access-watch.js';
import type { EventHub } from '../live/event-hub.js';
import type { ChatRouter } from '../router/chat-router.js';
import type { GatewayPrometheus } from '../router/prometheus.js';
import { METRICS_PATH, metricsRoute } from './rest/metrics-route.js';
import { CHAT_PATH, COMPLETIONS_PATH, handleChatCompletion } from './rest/chat-routes.js';
import { handleOpenAIRoute, OPENAI_PREFIX } from './rest/models-routes.js';
import { DETOKENIZE_PATH, handleTokenRoute, TOKENIZE_PATH } from './rest/token-routes.js';
import { logAccess } from './access-log.js';
import { endpointRoutes } from './rest/endpoint-routes.js';
import { isServerFailure } from '../domain/errors.js';
import { sendJson } from './body.js';
import { deferContinue } from '../util/http-body.js';
import { failureOf } from './failures.js';
import { sendGraphQLFailure } from './graphql/errors.js';
import { restErrorOfFailure, sendRestError } from './rest/errors.js';
import { assignRequestId, logFailure, type Log } from './request-id.js';
import { CorsPolicy } from './cors.js';
import { SubscriptionQuota } from '../live/subscription-quota.js';
import { answerClientError, answerConnect, parseRequestTarget } from './request-target.js';
import { baseSecurityHeaders, consoleRoute, isConsolePath } from './console-route.js';
import { HttpDrain } from './drain.js';
import { defaultMaxConnections } from './connection-cap.js';
import { listen } from './listen.js';
import { isProbePath, listenForProbes, probes, type HealthListener } from './health-listener.js';

/**
 * How long before the drain's bound the requests still queued or held for a wake are answered 503 (a tenth of the
 * drain when it is shorter than 10 s): their answers are written, and read, before the bound cuts what is left.
 */
function refusalLeadMs(graceMs: number): number {
  return Math.min(1000, Math.floor(graceMs / 10));
}

/** Resolves with `work`, or after `ms`, whichever comes first. */
async function within(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))))]);
  clearTimeout(timer);
}

/** What the HTTP surfaces serve from: the services and the serving components the gateway made (src/gateway.ts). */
export interface HttpDeps {
  services: Services;
  chat: ChatRouter;
  hub: EventHub;
  access: AccessWatch;
  prometheus: GatewayPrometheus;
  /** Whether the database answers within `timeoutMs` (/readyz). */
  databaseReady(timeoutMs: number): Promise<boolean>;
}

export interface HttpServer {
  server: http.Server;
  /** e.g. `http://127.0.0.1:8080` */
  url: string;
  /** The probes' own listener (HEALTH_PORT), e.g. `http://127.0.0.1:8081`; unset without one. */
  healthUrl?: string | undefined;
  /**
   * Stops accepting and drains (./drain.ts): requests in flight get up to `graceMs` to finish, GraphQL chat
   * completions included (a WebSocket is closed with 1001 once those on it have ended); streams that never end by
   * themselves are ended at once; requests still queued or held for a wake shortly before the bound are answered
   * 503; then every connection left (streams, sockets, bodies half sent) is cut, and it resolves once the server
   * closed, and the probes' listener after it (its /readyz answers 503 while the drain lasts). @default graceMs 0: cut
   * at once
   */
  close(graceMs?: number): Promise<void>;
}

/** How the HTTP surfaces listen and what they allow; src/gateway.ts's options add the components' own. */
export interface HttpOptions {
  port: number;
  host: string;
  /** When set, one access line per request, and per WebSocket connection, goes here (src/http/access-log.ts). */
  logger?: Logger;
  /** Live-status signals buffered per subscriber. @default DEFAULTS.subscriptionBuffer */
  subscriptionBuffer?: number;
  /** How long a subscriber may stay behind a full buffer before it is cut off. @default DEFAULTS.subscriptionMaxLagMs */
  subscriptionMaxLagMs?: number;
  /** Operations in flight on one WebSocket at once; one more is answered with an `error` message. @default DEFAULTS.wsMaxSubscriptions */
  wsMaxSubscriptions?: number;
  /** Subscriptions one user holds open in this process at once, over all their keys (SSE streams and WebSocket operations). */
  userMaxSubscriptions?: number;
  /** Authenticated WebSockets one user holds open in this process at once, idle ones too. @default DEFAULTS.userMaxWebSockets */
  userMaxWebSockets?: number;
  /** How long a streamed answer or SSE subscription waits for a client that takes nothing of it. @default DEFAULTS.streamStallTimeoutMs */
  streamStallTimeoutMs?: number;
  /** How long a client may take to send a whole request, and its headers; then 408 and the connection closes. */
  requestTimeoutMs?: number;
  headersTimeoutMs?: number;
  /** GraphQL operation limits and introspection. @default DEFAULT_GRAPHQL_LIMITS, introspection on */
  graphql?: GraphQLSecurityOptions;
  /** Origins whose browser scripts may call (CORS); `*` for any, never with credentials. @default none */
  corsOrigins?: readonly string[];
  /** Where the built web console is. @default dist/console */
  consoleDir?: string;
  /**
   * Connections held open at once (HTTP, WebSocket, any state); one more is closed as it is accepted (Node's
   * `server.maxConnections`). @default defaultMaxConnections(): the open-file limit less a reserve (./connection-cap.ts)
   */
  maxConnections?: number;
  /**
   * HEALTH_PORT: /healthz and /readyz on a listener of their own as well, on `host`, outside `maxConnections` (with a
   * small cap and short timeouts of its own: ./health-listener.ts); `0` picks a free port. @default none
   */
  healthPort?: number | undefined;
  /** That listener's cap and timeout. @default HEALTH_MAX_CONNECTIONS, HEALTH_TIMEOUT_MS */
  healthListener?: { maxConnections?: number; timeoutMs?: number };
  /**
   * The probes' listener already open (src/main.ts opens it before the database, so that the probes are answered
   * through the migrations), in place of `healthPort`: it answers this server's probes once this server listens, and
   * closes with it. @default none
   */
  probesListener?: HealthListener | undefined;
}

/** Serves every HTTP surface over `deps`; the components themselves are made and closed by src/gateway.ts. */
export async function serveHttp(
  deps: HttpDeps,
  options: HttpOptions & { log: Log; metricsToken?: string | undefined },
): Promise<HttpServer> {
  const { services, chat, hub, access, prometheus } = deps;
  const { log } = options;
  const metricsEndpoint = metricsRoute(services, prometheus, options.metricsToken);
  const yoga = createGraphQL(
    services,
    chat,
    {
      hub,
      bufferSize: options.subscriptionBuffer ?? DEFAULTS.subscriptionBuffer,
      maxLagMs: options.subscriptionMaxLagMs ?? DEFAULTS.subscriptionMaxLagMs,
    },
    options.graphql,
    log,
  );
  const cors = new CorsPolicy(options.corsOrigins ?? []);
  const quota = new SubscriptionQuota(options.userMaxSubscriptions ?? DEFAULTS.userMaxSubscriptions);
  const stallMs = options.streamStallTimeoutMs ?? DEFAULTS.streamStallTimeoutMs;
  const rest = endpointRoutes(services, access, quota, stallMs);
  const graphqlHttp = createGraphQLHttp(yoga, services, log, {
    access,
    quota,
    graphiql: options.graphql?.introspection ?? true,
    stallMs,
    finite: (res) => drain.finite(res),
  });
  const webConsole = consoleRoute(options.consoleDir);
  // One answer for the probes, wherever they are asked.
  const probe = probes({ draining: () => drain.active, databaseReady: (timeoutMs) => deps.databaseReady(timeoutMs) });

  const dispatch = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    baseSecurityHeaders(res);
    // The target is checked before anything parses it: a target that is not a path is a 400, never a throw.
    const target = parseRequestTarget(req.url, req.headers.host);
    if (target.type === 'error') {
      const { message, rule } = target.error;
      return sendRestError(res, restErrorOfFailure({ kind: 'invalid', message, fields: [], reason: 'invalid_value', rule }));
    }
    const url = target.value;
    if (cors.apply(req, res)) return;
    if (url.pathname === GRAPHQL_PATH) {
      await graphqlHttp(req, res, url);
    } else if (url.pathname === CHAT_PATH || url.pathname === COMPLETIONS_PATH) {
      await handleChatCompletion(req, res, services, chat, log, url.pathname, stallMs);
    } else if (url.pathname === TOKENIZE_PATH || url.pathname === DETOKENIZE_PATH) {
      await handleTokenRoute(req, res, url.pathname, services, chat, log);
    } else if (url.pathname.startsWith(OPENAI_PREFIX)) {
      await handleOpenAIRoute(req, res, url, services, log);
    } else if (url.pathname.startsWith('/dedicated/')) {
      await rest.handle(req, res, url, log);
    } else if (url.pathname === METRICS_PATH) {
      await metricsEndpoint(req, res);
    } else if (isConsolePath(url.pathname)) {
      webConsole(req, res, url.pathname);
    } else if (isProbePath(url.pathname)) {
      await probe(url.pathname, res);
    } else {
      sendJson(res, 404, { error: { code: 'NOT_FOUND', message: `no route for ${req.method} ${url.pathname}` } });
    }
  };
  // A slow client (a header or a body trickling in) holds its connection only so long; Node checks every 2 s.
  const requestTimeout = options.requestTimeoutMs ?? DEFAULTS.requestTimeoutMs;
  const timeouts = {
    requestTimeout,
    headersTimeout: Math.min(options.headersTimeoutMs ?? DEFAULTS.headersTimeoutMs, requestTimeout),
    connectionsCheckingInterval: 2000,
  };
  // The waits of this gateway's chat requests (for a slot, for a wake), which its drain answers before its bound.
  const waits = deps.chat.drainWaits;
  const server = http.createServer(timeouts, (req, res) => {
    drain.track(req, res);
    // Every answer carries the request's id; every log line about it names the id.
    const requestId = assignRequestId(req, res);
    if (options.logger) logAccess(options.logger, services, req, res, requestId);
    // Whatever a handler throws or rejects with is logged and answered 500 (masked), or ends the response: never the process.
    dispatch(req, res).catch((error: unknown) => {
      // A client error or a database outage gets its 4xx or 503 (src/http/failures.ts); only the rest is a bug worth a log.
      const failure = failureOf(error);
      if (isServerFailure(failure)) logFailure(log, requestId, `${req.method} ${JSON.stringify((req.url ?? '').slice(0, 200))}`, error);
      if (res.headersSent || res.destroyed) return void res.destroy();
      const graphql = req.url === GRAPHQL_PATH || req.url?.startsWith(`${GRAPHQL_PATH}?`);
      try {
        if (graphql) sendGraphQLFailure(res, failure, requestId);
        else sendRestError(res, restErrorOfFailure(failure));
      } catch {
        res.destroy();
      }
    });
  });
  // `Expect: 100-continue`: the client uploads only once a handler reads the body (after the key check).
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    deferContinue(req, res);
    server.emit('request', req, res);
  });
  server.keepAliveTimeout = 65_000;
  // One count over every connection, whoever opened it (an unauthenticated keep-alive is one as much as a stream is):
  // file descriptors are shared by every user, the engines' and the database's included. Past it, Node closes a new
  // connection as it is accepted, and those open go on.
  server.maxConnections = options.maxConnections ?? defaultMaxConnections();
  const drain = new HttpDrain(server, GRAPHQL_PATH);
  // Every connection, whoever holds it now (HTTP, WebSocket, an upgraded socket), so that close can end it.
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // What Node's parser refuses (a target that is neither a path nor a URL, a malformed header) is a JSON 400 too.
  server.on('clientError', answerClientError);
  server.on('connect', answerConnect);
  const ws = createWebSocket(yoga, services, {
    access,
    log,
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.wsMaxSubscriptions ? { maxSubscriptions: options.wsMaxSubscriptions } : {}),
    quota,
    sockets: new SubscriptionQuota(options.userMaxWebSockets ?? DEFAULTS.userMaxWebSockets, 'WebSockets'),
    stallMs,
  });
  routeUpgrades(server, GRAPHQL_PATH, ws.handleUpgrade);

  const url = await listen(server, options.port, options.host, (error) => log('the HTTP server failed to accept a connection', error));
  let health = options.probesListener;
  if (health) {
    // The same listener, on the port it has held since the process started: from now on it answers as this server does.
    health.serve(probe);
  } else if (options.healthPort !== undefined) {
    try {
      health = await listenForProbes(probe, { port: options.healthPort, host: options.host, ...options.healthListener });
    } catch (error) {
      // Its port taken: the start fails, and the main server it leaves must not hold its own port.
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw error;
    }
  }
  return {
    server,
    url,
    healthUrl: health?.url,
    close: async (graceMs = 0) => {
      const bound = performance.now() + graceMs;
      // Refuses new connections from now on; those it holds are drained, then what is left is cut.
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      // Requests queued or held for a wake are served as the bound allows (admission.ts answers 503 at once one that
      // cannot be); those still waiting shortly before it are answered 503, and retried elsewhere.
      waits.start(bound);
      const refusal = setTimeout(() => waits.refuse(), graceMs - refusalLeadMs(graceMs));
      // WebSockets: their subscriptions without end are completed now, and each socket is closed with 1001 (clients
      // reconnect elsewhere) once the chat completions on it have ended; an upgrade asked meanwhile is refused (503).
      const socketsDrained = ws.drain();
      const left = await drain.drain(graceMs);
      await within(socketsDrained, bound - performance.now());
      clearTimeout(refusal);
      waits.refuse();
      if (left > 0 && graceMs > 0) log(`shutdown: ${left} request(s) still in flight after the drain's ${graceMs} ms were cut`);
      // What still runs on a socket at the bound is cut with it (1001).
      await ws.close();
      server.closeAllConnections();
      // Node's own list has only the connections it still parses HTTP on: sockets handed to the upgrade listener
      // (an h2c request served as plain HTTP, a CONNECT, a handshake) would keep `server.close` waiting forever.
      for (const socket of sockets) socket.destroy();
      await stopped;
      // The probes' listener last: a kubelet reads /readyz 503 (and /healthz 200) there for as long as the drain lasts,
      // where the main port refuses connections from its start.
      await health?.close();
    },
  };
}
