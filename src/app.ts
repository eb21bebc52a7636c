/**
 * Assembles one gateway process: services over the database, the local
 * runtime, the model store, the controller, and the HTTP server. `npm start`
 * and the tests build the same thing.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import os from 'node:os';
import path from 'node:path';
import type { Config } from './config.js';
import { Controller } from './controller/controller.js';
import { isKnownStartError } from './controller/start-errors.js';
import type { CrashPolicy } from './controller/crash-policy.js';
import { startGateway, type Gateway } from './gateway.js';
import type { HealthListener } from './http/health-listener.js';
import { EngineClient } from './engine-client/engine-client.js';
import { ModelCache } from './models/model-cache.js';
import { ModelStore } from './models/model-store.js';
import { WandbArtifactSource } from './models/wandb/artifact-source.js';
import { builtInEngineEntry } from './runtime/engine-bundle.js';
import { detectInventory, type DetectedInventory } from './runtime/gpu-inventory.js';
import type { KubernetesRuntime } from './runtime/kubernetes/kubernetes-runtime.js';
import { LocalRuntime } from './runtime/local-runtime.js';
import { EngineLogKeeper, engineLogRetention, localEngineRuns } from './runtime/engine-log-files.js';
import type { Runtime } from './runtime/runtime.js';
import { isClientFailure, logFunction, type Logger } from './log.js';
import { createServices, type Services } from './services/index.js';
import type { Sql } from './storage/database.js';

export interface App {
  gateway: Gateway;
  services: Services;
  controller: Controller;
  runtime: Runtime;
  /** The local runtime, when replicas run on this machine (RUNTIME=local): its engines are this machine's processes. */
  local: LocalRuntime | undefined;
  inventory: DetectedInventory;
  /**
   * Stops serving (requests in flight get up to `graceMs` to finish: src/http/drain.ts), then the controller;
   * replicas keep running for the next start to adopt. @default graceMs 0: requests in flight are cut
   */
  close(graceMs?: number): Promise<void>;
}

export interface AppOptions {
  /** The components' failure callback; without it, failures go to `logger` (src/log.ts). */
  log?: (message: string, error?: unknown) => void;
  /** The structured logger: access lines, and the components' failures when `log` is not given. */
  logger?: Logger;
  /** Replicas' environment additions (tests point engines at test settings). */
  engineEnv?: Record<string, string>;
  /** How the local runtime runs the built-in engine: the program and its first arguments. @default a bundle built at start (engine-bundle.ts) */
  engineEntry?: readonly string[];
  /** Controller overrides for tests (crash-loop window, stop grace, a drain's silence). */
  controller?: { crashLoop?: Partial<CrashPolicy>; stopGraceMs?: number; drainSilenceMs?: number; orphanReapIntervalMs?: number };
  /** Where the built web console is (tests build their own). @default dist/console */
  consoleDir?: string;
  /** The Kubernetes runtime's client configuration (tests point it at a stand-in API server). @default KUBECONFIG or in-cluster */
  kubeConfig?: KubeConfig;
  /** The probes' listener (HEALTH_PORT) src/main.ts opened before the database: the gateway takes it over. @default one opened on `config.healthPort` */
  probesListener?: HealthListener;
}

export async function startApp(config: Config, sql: Sql, options: AppOptions = {}): Promise<App> {
  const { logger } = options;
  const controllerLog =
    options.log ??
    (logger ? logFunction(logger.child({ component: 'controller' }), (e) => isKnownStartError(e) || isClientFailure(e)) : undefined);
  const gatewayLog = options.log ?? (logger ? logFunction(logger.child({ component: 'gateway' })) : undefined);
  // One client of the engines for the whole process: the router's requests, health checks and warm-ups share its pools.
  const engines = new EngineClient({ idleTimeoutMs: config.engineIdleTimeoutMs });
  const inventory = detectInventory({ ...(config.gpuInventory ? { configured: config.gpuInventory } : {}), cpuSlots: config.cpuSlots });
  // The built-in engine from a bundle built now (engine-bundle.ts), unless the caller says how to run it.
  const engineEntry =
    options.engineEntry ??
    (config.runtime === 'local' && !config.engineCommand
      ? await builtInEngineEntry(controllerLog ? { log: controllerLog } : {})
      : undefined);
  const local =
    config.runtime === 'local'
      ? new LocalRuntime({
          dir: path.join(config.dataDir, 'replicas'),
          inventory: inventory.inventory,
          cpuOnly: inventory.source === 'cpu',
          ...(config.engineCommand ? { engineTemplate: config.engineCommand } : {}),
          threads: config.engineThreads,
          ...(engineEntry ? { engineEntry } : {}),
          engineIdleExitMs: config.engineIdleExitMs,
          startTimeoutMs: config.replicaStartTimeoutMs,
          engines,
          env: {
            ...(config.hfToken ? { HF_TOKEN: config.hfToken } : {}),
            HF_ENDPOINT: config.hfEndpoint,
            ...(config.wandbApiKey ? { WANDB_API_KEY: config.wandbApiKey } : {}),
            WANDB_BASE_URL: config.wandbBaseUrl,
            ...options.engineEnv,
          },
        })
      : undefined;
  const runtime: Runtime = local ?? (await openKubernetesRuntime(config, options, engines, controllerLog));
  const cache = new ModelCache({
    dir: config.modelCacheDir,
    ...(config.modelCacheMaxBytes ? { maxBytes: config.modelCacheMaxBytes } : {}),
  });
  const models = new ModelStore({
    cache,
    artifacts: new WandbArtifactSource(cache, {
      baseUrl: config.wandbBaseUrl,
      ...(config.wandbApiKey ? { apiKey: config.wandbApiKey } : {}),
      ...(config.quantPreference ? { quantPreference: config.quantPreference } : {}),
      retry: config.modelSourceRetry,
    }),
    hubEndpoint: config.hfEndpoint,
    retry: config.modelSourceRetry,
    ...(config.hfToken ? { hubToken: config.hfToken } : {}),
    ...(config.quantPreference ? { quantPreference: config.quantPreference } : {}),
    allowExternalFormats: config.engineCommand !== undefined,
  });
  const controller = new Controller({
    sql,
    runtime,
    models,
    builtInEngine: config.engineCommand === undefined,
    ...(local && inventory.source === 'cpu' ? { hostMemoryPerSlotBytes: os.totalmem() / Math.max(1, config.cpuSlots) } : {}),
    intervalMs: config.controllerIntervalMs,
    restIntervalMs: config.controllerRestIntervalMs,
    leaseTtlMs: config.leaseTtlMs,
    placementBackoffBaseMs: config.placementBackoffBaseMs,
    drainTimeoutMs: config.drainTimeoutMs,
    engines,
    ...options.controller,
    ...(controllerLog ? { log: controllerLog } : {}),
  });
  const services = createServices(sql, {
    onEndpointChange: (endpointId) => controller.poke(endpointId),
    runtime,
    externalEngine: config.engineCommand !== undefined,
  });
  // The local engines' logs stay bounded in size and age (each replica's log file; engine-log-files.ts).
  const logKeeper = local && new EngineLogKeeper(path.join(config.dataDir, 'replicas'), engineLogRetention(config), localEngineRuns(local));
  logKeeper?.start();
  const gateway = await startGateway(sql, services, {
    port: config.port,
    host: config.host,
    router: {
      wakeTimeoutMs: config.wakeTimeoutMs,
      queueTimeoutMs: config.queueTimeoutMs,
      maxQueuePerEndpoint: config.queueMaxPerEndpoint,
      maxQueuePerKey: config.queueMaxPerKey,
      processId: controller.owner,
    },
    engines,
    subscriptionBuffer: config.subscriptionBuffer,
    subscriptionMaxLagMs: config.subscriptionMaxLagMs,
    wsMaxSubscriptions: config.wsMaxSubscriptions,
    userMaxSubscriptions: config.userMaxSubscriptions,
    userMaxWebSockets: config.userMaxWebSockets,
    streamStallTimeoutMs: config.streamStallTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    headersTimeoutMs: config.headersTimeoutMs,
    maxConnections: config.httpMaxConnections,
    ...(options.probesListener ? { probesListener: options.probesListener } : { healthPort: config.healthPort }),
    graphql: { limits: config.graphqlLimits, introspection: config.graphqlIntrospection },
    corsOrigins: config.corsOrigins,
    metrics: config.metrics,
    pool: runtime,
    ...(gatewayLog ? { log: gatewayLog } : {}),
    ...(logger ? { logger } : {}),
    ...(options.consoleDir ? { consoleDir: options.consoleDir } : {}),
  });
  await controller.start();
  return {
    gateway,
    services,
    controller,
    runtime,
    local,
    inventory,
    close: async (graceMs = 0) => {
      logKeeper?.close();
      // The controller keeps its leases while the gateway drains: a request held for a wake, or queued for a replica,
      // needs its passes to finish (a replica started, a drained one replaced). It stops once nothing is in flight here,
      // and hands its endpoints back then, as before.
      await gateway.close(graceMs);
      await controller.stop();
      await runtime.close?.();
      await engines.close();
    },
  };
}

/** The Kubernetes runtime, its pod and node caches filled (or given up on after 30 s: until then it acts on nothing). */
async function openKubernetesRuntime(
  config: Config,
  options: AppOptions,
  engines: EngineClient,
  log: ((message: string, error?: unknown) => void) | undefined,
): Promise<KubernetesRuntime> {
  // Imported here, when used: @kubernetes/client-node takes about half a second to load, which a gateway on the local
  // runtime (and every test file that starts one) would otherwise pay for nothing.
  const { KubernetesRuntime } = await import('./runtime/kubernetes/kubernetes-runtime.js');
  const runtime = new KubernetesRuntime({
    settings: config.kubernetes!,
    ...(options.kubeConfig ? { kubeConfig: options.kubeConfig } : {}),
    hubEndpoint: config.hfEndpoint,
    ...(config.hfToken ? { hubToken: config.hfToken } : {}),
    wandbBaseUrl: config.wandbBaseUrl,
    ...(config.wandbApiKey ? { wandbApiKey: config.wandbApiKey } : {}),
    ...(config.engineCommand ? { engineTemplate: config.engineCommand } : {}),
    threads: config.engineThreads,
    startTimeoutMs: config.replicaStartTimeoutMs,
    engines,
    log: log ?? ((message, error) => console.error(`[kubernetes] ${message}`, error ?? '')),
  });
  await runtime.open();
  return runtime;
}
