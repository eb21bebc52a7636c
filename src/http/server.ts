/**
 * The one HTTP server: GraphQL (HTTP, SSE and WebSocket) at /graphql, the REST
 * routes under /dedicated, and unauthenticated health checks.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Services } from '../services/index.js';
import { acceptsEventStream, createSseSubscriptions } from './graphql/sse.js';
import { attachWebSocket, createGraphQL, GRAPHQL_PATH } from './graphql/yoga.js';
import { EventHub } from '../live/event-hub.js';
import { ChatRouter, type RouterOptions } from '../router/chat-router.js';
import { RequestRecorder } from '../router/request-recorder.js';
import { CHAT_PATH, handleChatCompletion } from './rest/chat-routes.js';
import { endpointRoutes } from './rest/endpoint-routes.js';
import { sendJson } from './rest/responses.js';

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
  log?: (message: string, error?: unknown) => void;
  /** Chat routing: how long requests wait for a waking endpoint and for a free slot. */
  router?: RouterOptions;
  /** Live-status signals buffered per subscriber. @default 1000 */
  subscriptionBuffer?: number;
  /** How long a subscriber may stay behind a full buffer before it is cut off. @default 5000 */
  subscriptionMaxLagMs?: number;
}

export async function startGateway(services: Services, options: GatewayOptions): Promise<Gateway> {
  const log = options.log ?? ((message, error) => console.error(message, error));
  const recorder = new RequestRecorder(services.db, 250, log);
  const chat = new ChatRouter(services.db, services, recorder, options.router);
  const hub = new EventHub(services.db, log);
  await hub.start();
  const yoga = createGraphQL(services, chat, { hub, bufferSize: options.subscriptionBuffer ?? 1000, maxLagMs: options.subscriptionMaxLagMs ?? 5000 });
  const rest = endpointRoutes(services);
  const sseSubscriptions = createSseSubscriptions(yoga, services, log);

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://gateway');
    if (url.pathname === GRAPHQL_PATH && acceptsEventStream(req)) {
      void sseSubscriptions(req, res, url).catch((error) => {
        log('an SSE request failed', error);
        if (!res.headersSent) sendJson(res, 500, { errors: [{ message: 'Unexpected error.' }] });
        else res.destroy();
      });
    } else if (url.pathname === GRAPHQL_PATH || url.pathname.startsWith(`${GRAPHQL_PATH}/`)) {
      void yoga(req, res);
    } else if (url.pathname === CHAT_PATH) {
      void handleChatCompletion(req, res, services, chat, log);
    } else if (url.pathname.startsWith('/dedicated/')) {
      void rest.handle(req, res, url, (error) => log(`${req.method} ${url.pathname} failed`, error));
    } else if (url.pathname === '/healthz') {
      sendJson(res, 200, { status: 'ok' });
    } else if (url.pathname === '/readyz') {
      services.db`SELECT 1`.then(
        () => sendJson(res, 200, { status: 'ready' }),
        () => sendJson(res, 503, { status: 'database unavailable' }),
      );
    } else {
      sendJson(res, 404, { error: { code: 'NOT_FOUND', message: `no route for ${req.method} ${url.pathname}` } });
    }
  });
  server.keepAliveTimeout = 65_000;
  const ws = attachWebSocket(server, yoga, services);

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
      await ws.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      chat.close();
      await recorder.close();
      await hub.close();
    },
  };
}
