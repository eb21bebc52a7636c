/**
 * The one HTTP server: GraphQL (HTTP, SSE and WebSocket) at /graphql, the REST
 * routes under /dedicated, the web console at /, and unauthenticated health
 * checks.
 */
import { DEFAULTS } from '../defaults.js';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { databaseOf, type Services } from '../services/index.js';
import { createGraphQLHttp } from './graphql/http-entry.js';
import { createGraphQL, createWebSocket, GRAPHQL_PATH } from './graphql/yoga.js';
import { routeUpgrades } from './upgrade.js';
import { AccessWatch } from '../live/access-watch.js';
import { EventHub } from '../live/event-hub.js';
import { sharedEngineClient, type EngineClient } from '../engine-client/engine-client.js';
import { ChatRouter, type RouterOptions } from '../router/chat-router.js';
import { RequestRecorder } from '../router/request-recorder.js';
import { GatewayPrometheus } from '../router/prometheus.js';
import { MetricsUpkeep } from '../services/metrics-upkeep.js';
import { METRICS_PATH, metricsRoute } from './rest/metrics-route.js';
import { CHAT_PATH, COMPLETIONS_PATH, handleChatCompletion } from './rest/chat-routes.js';
import { handleOpenAIRoute, OPENAI_PREFIX } from './rest/models-routes.js';
import { DETOKENIZE_PATH, handleTokenRoute, TOKENIZE_PATH } from './rest/token-routes.js';
import type { Logger } from 'pino';
import { logAccess } from './access-log.js';
import { endpointRoutes } from './rest/endpoint-routes.js';
import { isServerFailure } from '../domain/errors.js';
import { sendJson } from './body.js';
import { deferContinue } from '../util/http-body.js';
import { DATABASE_RETRY_AFTER_S, failureOf } from './failures.js';
import { sendGraphQLFailure } from './graphql/errors.js';
import { restErrorOfFailure, sendRestError } from './rest/errors.js';
import { assignRequestId, logFailure, type Log } from './request-id.js';
import { pingDatabase } from '../storage/database-errors.js';
import { goneEndpoints } from '../storage/endpoints-repository.js';
import { CorsPolicy } from './cors.js';
import { SubscriptionQuota } from '../live/subscription-quota.js';
import type { GraphQLSecurityOptions } from './graphql/limits.js';
import { answerClientError, answerConnect, parseRequestTarget } from './request-target.js';
import { consoleRoute, isConsolePath } from './console-route.js';

/** How long /readyz waits for the database before it answers 503. */
const READY_TIMEOUT_MS = 800;

export interface Gateway {
  server: http.Server;
  /** Live-status fan-out of this process (its subscriber count shows in benchmarks). */
  hub: EventHub;
  /** e.g. `http://127.0.0.1:8080` */
  url: string;
  close(): Promise<void>;
}

export interface GatewayOptions {
  port: number;
  host: string;
  /** Where failures are logged; each line names the request id the client was answered with (`x-request-id`). */
  log?: Log;
  /** When set, one access line per request, and per WebSocket connection, goes here (src/http/access-log.ts). */
  logger?: Logger;
  /** Chat routing: how long requests wait for a waking endpoint and for a free slot. */
  router?: RouterOptions;
  /** The client of the replicas' engines. @default the process's (sharedEngineClient) */
  engines?: EngineClient;
  /** Live-status signals buffered per subscriber. @default 1000 */
  subscriptionBuffer?: number;
  /** How long a subscriber may stay behind a full buffer before it is cut off. @default 5000 */
  subscriptionMaxLagMs?: number;
  /** Operations in flight on one WebSocket at once; one more is answered with an `error` message. @default 100 */
  wsMaxSubscriptions?: number;
  /** Subscriptions one user holds open in this process at once, over all their keys (SSE streams and WebSocket operations). @default 500 */
  userMaxSubscriptions?: number;
  /** How long a client may take to send a whole request, and its headers; then 408 and the connection closes. @default 30000, 15000 */
  requestTimeoutMs?: number;
  headersTimeoutMs?: number;
  /** GraphQL operation limits and introspection. @default DEFAULT_GRAPHQL_LIMITS, introspection on */
  graphql?: GraphQLSecurityOptions;
  /** Origins whose browser scripts may call (CORS); `*` for any, never with credentials. @default none */
  corsOrigins?: readonly string[];
  /** /metrics access, request recording's buffer, and retention. @default no scrape token, 10000 buffered, 30 and 90 days */
  /** Where the built web console is. @default dist/console */
  consoleDir?: string;
  metrics?: {
    token?: string | undefined;
    maxBuffered?: number;
    requestLogRetentionDays?: number;
    metricsRetentionDays?: number;
    /** How often replica counts are sampled. @default 10000 */
    sampleMs?: number;
  };
}

export async function startGateway(services: Services, options: GatewayOptions): Promise<Gateway> {
  const log: Log = options.log ?? ((message, error) => console.error(message, error));
  // The process's own wiring gets the database; the handlers get the services only.
  const db = databaseOf(services);
  const metricsOptions = options.metrics ?? {};
  // Recording stays off the request path: outcomes are buffered, then observed (Prometheus) and written in batches.
  const prometheus = new GatewayPrometheus(() => recorder.dropped);
  const recorder = new RequestRecorder(db, 250, log, {
    ...(metricsOptions.maxBuffered ? { maxBuffered: metricsOptions.maxBuffered } : {}),
    observe: (batch) => prometheus.observe(batch),
    onWritten: (ids) => services.metrics.live.changed(ids),
  });
  const upkeep = new MetricsUpkeep(db, {
    ...(metricsOptions.requestLogRetentionDays ? { requestLogRetentionDays: metricsOptions.requestLogRetentionDays } : {}),
    ...(metricsOptions.metricsRetentionDays ? { metricsRetentionDays: metricsOptions.metricsRetentionDays } : {}),
    ...(metricsOptions.sampleMs ? { sampleMs: metricsOptions.sampleMs } : {}),
    onSample: (samples) => {
      prometheus.replicaCounts(samples);
      prometheus
        .forgetDeleted((ids) => goneEndpoints(db, ids))
        .catch((error: unknown) => log('dropping deleted endpoints from /metrics failed', error));
    },
    log,
  });
  upkeep.start();
  const metricsEndpoint = metricsRoute(services, prometheus, metricsOptions.token);
  const chat = new ChatRouter(db, services, recorder, options.engines ?? sharedEngineClient(), options.router);
  const hub = new EventHub(db, log);
  await hub.start();
  // Access changes (a revoked key, a removed member) reach this process's caches and open subscriptions at once.
  const access = new AccessWatch(db, services.auth, log);
  await access.start();
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
  const rest = endpointRoutes(services);
  const quota = new SubscriptionQuota(options.userMaxSubscriptions ?? DEFAULTS.userMaxSubscriptions);
  const graphqlHttp = createGraphQLHttp(yoga, services, log, { access, quota, graphiql: options.graphql?.introspection ?? true });
  const webConsole = consoleRoute(options.consoleDir);

  const dispatch = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
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
      await handleChatCompletion(req, res, services, chat, log, url.pathname);
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
    } else if (url.pathname === '/healthz') {
      sendJson(res, 200, { status: 'ok' });
    } else if (url.pathname === '/readyz') {
      // Within a second either way: a database that does not answer in time is as good as down.
      if (await pingDatabase(db, READY_TIMEOUT_MS)) sendJson(res, 200, { status: 'ready' });
      else sendJson(res, 503, { status: 'database unavailable' }, { 'retry-after': String(DATABASE_RETRY_AFTER_S) });
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
  const server = http.createServer(timeouts, (req, res) => {
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
  });
  routeUpgrades(server, GRAPHQL_PATH, ws.handleUpgrade);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  return {
    server,
    hub,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: async () => {
      // A stopping gateway ends what its clients still hold open (streams, bodies half sent, queued requests) and returns.
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      await ws.close();
      server.closeAllConnections();
      // Node's own list has only the connections it still parses HTTP on: sockets handed to the upgrade listener
      // (an h2c request served as plain HTTP, a CONNECT, a handshake) would keep `server.close` waiting forever.
      for (const socket of sockets) socket.destroy();
      await stopped;
      chat.close();
      await recorder.close();
      await upkeep.close();
      services.metrics.live.close();
      await hub.close();
      await access.close();
    },
  };
}
