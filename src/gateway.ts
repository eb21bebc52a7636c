/**
 * The serving half of a process, composed: the request recorder and the
 * metrics it feeds, the chat router, the live-event hub and the access watch,
 * made over the database they need, then the HTTP surfaces served over them
 * (src/http/server.ts, which makes nothing of its own). src/app.ts adds the
 * controller and the runtime; tests and benchmarks that need no replicas
 * start this alone.
 */
import { sharedEngineClient, type EngineClient } from './engine-client/engine-client.js';
import type { Log } from './http/request-id.js';
import { serveHttp, type HttpOptions, type HttpServer } from './http/server.js';
import { AccessWatch } from './live/access-watch.js';
import { EventHub } from './live/event-hub.js';
import { ChatRouter, type RouterOptions } from './router/chat-router.js';
import { GatewayPrometheus } from './router/prometheus.js';
import { RequestRecorder } from './router/request-recorder.js';
import type { Services } from './services/index.js';
import { MetricsUpkeep } from './services/metrics-upkeep.js';
import type { Runtime } from './runtime/runtime.js';
import type { Sql } from './storage/database.js';
import { pingDatabase } from './storage/database-errors.js';
import { goneEndpoints } from './storage/endpoints-repository.js';

export interface Gateway extends HttpServer {
  /** Live-status fan-out of this process (its subscriber count shows in benchmarks). */
  hub: EventHub;
}

export interface GatewayOptions extends HttpOptions {
  /** Where failures are logged; each line names the request id the client was answered with (`x-request-id`). */
  log?: Log;
  /** Chat routing: how long requests wait for a waking endpoint and for a free slot. */
  router?: RouterOptions;
  /** The client of the replicas' engines. @default the process's (sharedEngineClient) */
  engines?: EngineClient;
  /** /metrics access, request recording's buffer, and retention. @default no scrape token, then src/defaults.ts */
  metrics?: {
    token?: string | undefined;
    maxBuffered?: number;
    requestLogRetentionDays?: number;
    metricsRetentionDays?: number;
    /** How often replica counts are sampled. */
    sampleMs?: number;
  };
  /** The runtime's pool, whose GPUs /metrics shows (`dedicated_runtime_gpus`). @default none shown */
  pool?: Pick<Runtime, 'node' | 'capacity'>;
}

/** Makes the serving components over `sql` and serves HTTP over them. */
export async function startGateway(sql: Sql, services: Services, options: GatewayOptions): Promise<Gateway> {
  const log: Log = options.log ?? ((message, error) => console.error(message, error));
  const metrics = options.metrics ?? {};
  // Recording stays off the request path: outcomes are buffered, then observed (Prometheus) and written in batches.
  const prometheus = new GatewayPrometheus(() => recorder.dropped);
  const recorder = new RequestRecorder(sql, 250, log, {
    maxBuffered: metrics.maxBuffered,
    observe: (batch) => prometheus.observe(batch),
    onWritten: (ids) => services.metrics.live.changed(ids),
  });
  const upkeep = new MetricsUpkeep(sql, {
    // Unset: each component's default (src/defaults.ts).
    requestLogRetentionDays: metrics.requestLogRetentionDays,
    metricsRetentionDays: metrics.metricsRetentionDays,
    sampleMs: metrics.sampleMs,
    onSample: (samples) => {
      prometheus.replicaCounts(samples);
      prometheus
        .forgetDeleted((ids) => goneEndpoints(sql, ids))
        .catch((error: unknown) => log('dropping deleted endpoints from /metrics failed', error));
    },
    ...(options.pool ? { pool: options.pool } : {}),
    onGpus: (gpus) => prometheus.runtimeGpus(gpus),
    log,
  });
  upkeep.start();
  const chat = new ChatRouter(sql, services, recorder, options.engines ?? sharedEngineClient(), options.router);
  const hub = new EventHub(sql, log);
  await hub.start();
  // Access changes (a revoked key, a removed member) reach this process's caches and open subscriptions at once.
  const access = new AccessWatch(sql, services.auth, log);
  await access.start();
  const { router: _router, engines: _engines, metrics: _metrics, pool: _pool, ...httpOptions } = options;
  const http = await serveHttp(
    { services, chat, hub, access, prometheus, databaseReady: (timeoutMs) => pingDatabase(sql, timeoutMs) },
    { ...httpOptions, log, metricsToken: metrics.token },
  );
  return {
    ...http,
    hub,
    // The HTTP side drains first: the requests it finishes still need the router, and are recorded by the flush below.
    close: async (graceMs = 0) => {
      await http.close(graceMs);
      chat.close();
      await recorder.close();
      await upkeep.close();
      services.metrics.live.close();
      await hub.close();
      await access.close();
    },
  };
}
