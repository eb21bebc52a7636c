/**
 * Process configuration, read once from the environment. Every variable has a
 * default, so `npm start` works with none set; a malformed value stops start-up
 * with a message naming the variable and the rule it breaks.
 */
import { DEFAULTS } from './defaults.js';
import path from 'node:path';
import { cpuBudget } from './runtime/cpu-budget.js';
import { EngineCommandError, validateTemplate } from './runtime/engine-command.js';
import { InventoryError, parseInventory } from './runtime/gpu-inventory.js';
import { readKubernetesSettings, type KubernetesSettings } from './runtime/kubernetes/settings.js';
import { DEFAULT_GRAPHQL_LIMITS, type GraphQLLimits } from './http/graphql/limits.js';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from './models/retry.js';
import { connectionsWithin, defaultMaxConnections, openFileLimit } from './http/connection-cap.js';
import { ConfigError, optional, readBoolean, readChoice, readInteger, readPort, readSize, readUrl, type Env } from './config-env.js';

export { ConfigError } from './config-env.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The gateway's own secrets, and libpq's (PG…): never passed on to an engine process, which may be any server
 * (ENGINE_COMMAND) and whose output is copied into the logs. HF_TOKEN and WANDB_API_KEY go to engines on purpose.
 */
export function withoutGatewaySecrets(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const kept: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (name === 'DATABASE_URL' || name === 'ADMIN_API_KEY' || name === 'METRICS_TOKEN' || name.startsWith('PG')) continue;
    kept[name] = value;
  }
  return kept;
}

export interface Config {
  /** TCP port of the HTTP server. @default 8080 */
  port: number;
  /** Interface to listen on. @default '0.0.0.0' */
  host: string;
  /**
   * HEALTH_PORT: a listener of its own for /healthz and /readyz on `host`, outside httpMaxConnections, so that a flood
   * of the main port does not fail the probes (src/http/health-listener.ts); `0` picks a free port. Unset: the probes
   * are on `port` only.
   */
  healthPort: number | undefined;
  /** External PostgreSQL; when unset, an embedded PostgreSQL runs with its data under `dataDir/pg`. */
  databaseUrl: string | undefined;
  /** Where the embedded database (and later the model cache) live. @default '.data' */
  dataDir: string;
  /** On the first start, the admin's API key is this value instead of a generated one. */
  adminApiKey: string | undefined;
  /** Hugging Face-compatible hub. @default 'https://huggingface.co' */
  hfEndpoint: string;
  hfToken: string | undefined;
  /** The W&B API, for registry artifacts. @default 'https://api.wandb.ai' */
  wandbBaseUrl: string;
  wandbApiKey: string | undefined;
  /** Content-addressed model cache. @default DATA_DIR/models */
  modelCacheDir: string;
  /** Most bytes the cache may hold; a download that would exceed it fails with INSUFFICIENT_DISK. */
  modelCacheMaxBytes: number | undefined;
  /** GGUF quantizations to prefer when a repository has several, most preferred first. */
  quantPreference: string[] | undefined;
  /**
   * How hub and registry calls and downloads are retried on 429, 5xx and failed connections: MODEL_SOURCE_RETRIES
   * (@default 5), MODEL_SOURCE_RETRY_BASE_MS (@default 1000), MODEL_SOURCE_RETRY_MAX_DELAY_MS (@default 8000),
   * MODEL_SOURCE_RETRY_MAX_TIME_MS (@default 60000). See src/models/retry.ts.
   */
  modelSourceRetry: RetryPolicy;
  /** Where replicas run (RUNTIME): `local` child processes on this machine, or `kubernetes` pods. @default 'local' */
  runtime: 'local' | 'kubernetes';
  /** The Kubernetes runtime's settings, when RUNTIME=kubernetes (src/runtime/kubernetes/settings.ts). */
  kubernetes: KubernetesSettings | undefined;
  /** An OpenAI-compatible engine command with {model} {port} {numGpu} … placeholders, instead of the built-in engine. */
  engineCommand: string | undefined;
  /** GPUs per kind, e.g. "H100=8,A100=2"; unset: detected, or CPU slots. */
  gpuInventory: string | undefined;
  /** CPU-backed slots offered for every kind when the machine has no GPU. @default cores left to replicas, at most 4 (see cpu-budget.ts) */
  cpuSlots: number;
  /** Threads per built-in engine. @default the replicas' cores shared among the slots, at least 1 */
  engineThreads: number;
  /** A built-in engine no gateway contacted for this long (its gateway gone, none adopting it) exits. @default 600000 */
  engineIdleExitMs: number;
  /** The local runtime's engine logs: a log past `maxBytes` is rotated, one of a replica that no longer runs goes after `retentionDays`. @default 10 MiB, 7 days */
  engineLog: { maxBytes: number; retentionDays: number };
  /** On SIGINT or SIGTERM, stop this machine's engines too instead of leaving them for the next start to adopt. @default false */
  stopEnginesOnExit: boolean;
  /** How long after the list of engines a Ctrl-C leaves running a second Ctrl-C still stops them (SECOND_SIGNAL_WINDOW_MS). @default 5000 */
  secondSignalWindowMs: number;
  /** Set when CPU_SLOTS x ENGINE_THREADS oversubscribe the cores; start-up prints it. */
  cpuWarning: string | undefined;
  /** Controller pass interval. @default 500 */
  controllerIntervalMs: number;
  /** How often an endpoint at rest (idle, unchanged) is passed over. @default 10 x controllerIntervalMs */
  controllerRestIntervalMs: number;
  /** How long an endpoint's lease outlives its holder. @default 10000 */
  leaseTtlMs: number;
  /** The first wait of an endpoint's placements after an outage (doubling, up to a minute). @default 1000 */
  placementBackoffBaseMs: number;
  /** How long a starting engine may take to answer its health check. @default 300000 */
  replicaStartTimeoutMs: number;
  /** How long a stopping replica may take to finish requests in flight. @default 30000 */
  drainTimeoutMs: number;
  /** How long a chat request waits for a sleeping or starting endpoint before 503. @default 120000 */
  wakeTimeoutMs: number;
  /** How long a chat request waits for a free slot before 429. @default 30000 */
  queueTimeoutMs: number;
  /** Chat requests queued at most per endpoint in one gateway process; past it, 429 `queue_full` at once. @default 256 */
  queueMaxPerEndpoint: number;
  /** Chat requests queued at most per API key and endpoint in one gateway process; past it, 429 `rate_limit_exceeded` at once. @default 64 */
  queueMaxPerKey: number;
  /** Live-status signals buffered per subscriber. @default 1000 */
  subscriptionBuffer: number;
  /** How long a subscriber may stay behind its full buffer before it is cut off. @default 5000 */
  subscriptionMaxLagMs: number;
  /** NODE_ENV; `production` changes the defaults of graphqlIntrospection and corsOrigins. @default 'development' */
  nodeEnv: string;
  /** What one GraphQL operation may ask (GRAPHQL_MAX_DEPTH, _ALIASES, _DIRECTIVES, _TOKENS, _COST). @default DEFAULT_GRAPHQL_LIMITS */
  graphqlLimits: GraphQLLimits;
  /** GraphQL introspection and GraphiQL (GRAPHQL_INTROSPECTION). @default false in production, true otherwise */
  graphqlIntrospection: boolean;
  /** Origins whose browser scripts may call (CORS_ORIGINS); `*` any, never with credentials. @default none in production, `*` otherwise */
  corsOrigins: string[];
  /** Operations (subscriptions included) in flight on one WebSocket at once; one more gets an `error` message. @default 100 */
  wsMaxSubscriptions: number;
  /** Subscriptions (SSE streams and WebSocket operations) one user holds open in this process at once, over all their keys (USER_MAX_SUBSCRIPTIONS). @default 500 */
  userMaxSubscriptions: number;
  /** Authenticated WebSockets one user holds open in this process at once, over all their keys, idle ones too (USER_MAX_WEBSOCKETS). @default 100 */
  userMaxWebSockets: number;
  /** How long a stream (a chat answer, a subscription over SSE) waits for a client that takes nothing of it before it is cut (STREAM_STALL_TIMEOUT_MS). @default 30000 */
  streamStallTimeoutMs: number;
  /** How long a chat answer may go without a byte from its replica once its first token came, then it is cut (ENGINE_IDLE_TIMEOUT_MS; 0: never). @default 300000 */
  engineIdleTimeoutMs: number;
  /** How long a client may take to send a whole request, and its headers (REQUEST_TIMEOUT_MS, HEADERS_TIMEOUT_MS); then 408. @default 30000, 15000 */
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  /**
   * Connections the HTTP server holds open at once, of every kind (HTTP_MAX_CONNECTIONS); past it, a new one is closed
   * as it is accepted. @default the open-file limit less 1024 kept for engines, PostgreSQL and downloads, at most 16384
   */
  httpMaxConnections: number;
  /** LOG_LEVEL and LOG_FORMAT: what the gateway logs, as JSON lines or (pretty) for a terminal. */
  log: { level: LogLevel; format: 'json' | 'pretty' };
  /** Metrics and request logs: METRICS_TOKEN, REQUEST_LOG_RETENTION_DAYS, METRICS_RETENTION_DAYS, REQUEST_LOG_BUFFER. */
  metrics: MetricsConfig;
}

export interface MetricsConfig {
  /** A bearer token that may scrape /metrics (besides admins' API keys). */
  token: string | undefined;
  /** Days the request log and content logs are kept. @default 30 */
  requestLogRetentionDays: number;
  /** Days the per-minute roll-ups are kept. @default 90 */
  metricsRetentionDays: number;
  /** Request outcomes buffered at most while writes are behind; past it they are dropped and counted. @default 10000 */
  maxBuffered: number;
  /** How often each gateway samples the endpoints' replica counts into the roll-ups. @default 10000 */
  sampleMs: number;
}

function readDatabaseUrl(env: Env): string | undefined {
  const raw = env.DATABASE_URL;
  if (raw === undefined || raw === '') return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('DATABASE_URL', 'must be a URL such as postgres://user:password@host:5432/db', '<unparseable>');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError('DATABASE_URL', 'must use the postgres:// or postgresql:// scheme', url.protocol);
  }
  return raw;
}

function readOrigins(env: Env, name: string, fallback: string[]): string[] {
  const raw = env[name];
  if (raw === undefined) return fallback;
  const origins = raw
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  for (const origin of origins) {
    if (origin === '*') continue;
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.origin !== origin) {
      throw new ConfigError(
        name,
        'must be "*" or comma-separated origins such as https://app.example.com (scheme, lower-case host and port, no path)',
        origin,
      );
    }
  }
  return origins;
}

function readGraphQLLimits(env: Env): GraphQLLimits {
  const d = DEFAULT_GRAPHQL_LIMITS;
  return {
    maxDepth: readInteger(env, 'GRAPHQL_MAX_DEPTH', d.maxDepth, 1, 1000),
    maxAliases: readInteger(env, 'GRAPHQL_MAX_ALIASES', d.maxAliases, 0, 10_000),
    maxDirectives: readInteger(env, 'GRAPHQL_MAX_DIRECTIVES', d.maxDirectives, 0, 10_000),
    maxTokens: readInteger(env, 'GRAPHQL_MAX_TOKENS', d.maxTokens, 10, 1_000_000),
    maxCost: readInteger(env, 'GRAPHQL_MAX_COST', d.maxCost, 1, 1_000_000_000),
  };
}

export const API_KEY_PATTERN = /^[A-Za-z0-9_\-.]{20,200}$/;

function readAdminKey(env: Env): string | undefined {
  const raw = env.ADMIN_API_KEY;
  if (raw === undefined || raw === '') return undefined;
  if (!API_KEY_PATTERN.test(raw)) {
    throw new ConfigError('ADMIN_API_KEY', 'must be 20 to 200 characters of letters, digits, "_", "-" or "."', `${raw.slice(0, 4)}…`);
  }
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const host = env.HOST === undefined || env.HOST === '' ? '0.0.0.0' : env.HOST;
  if (/\s/.test(host)) throw new ConfigError('HOST', 'must be a host name or IP address', host);
  const engineCommand = optional(env, 'ENGINE_COMMAND');
  const gpuInventory = optional(env, 'GPU_INVENTORY');
  try {
    if (engineCommand) validateTemplate(engineCommand);
    if (gpuInventory) parseInventory(gpuInventory);
  } catch (error) {
    if (error instanceof EngineCommandError) throw new ConfigError('ENGINE_COMMAND', `is invalid: ${error.message}`, engineCommand ?? '');
    if (error instanceof InventoryError) throw new ConfigError('GPU_INVENTORY', `is invalid: ${error.message}`, gpuInventory ?? '');
    throw error;
  }
  const runtime = readChoice(env, 'RUNTIME', ['local', 'kubernetes'] as const, 'local');
  const dataDir = path.resolve(env.DATA_DIR === undefined || env.DATA_DIR === '' ? '.data' : env.DATA_DIR);
  const quant = optional(env, 'GGUF_QUANT_PREFERENCE');
  const nodeEnv = optional(env, 'NODE_ENV')?.trim() ?? 'development';
  const production = nodeEnv === 'production';
  const cpu = cpuBudget({
    slots: readInteger(env, 'CPU_SLOTS', undefined, 0, 1024),
    threads: readInteger(env, 'ENGINE_THREADS', undefined, 1, 1024),
  });
  const controllerIntervalMs = readInteger(env, 'CONTROLLER_INTERVAL_MS', DEFAULTS.controllerIntervalMs, 10, 3_600_000);
  const port = readPort(env, 'PORT', 8080);
  return {
    port,
    host,
    healthPort: readHealthPort(env, port),
    databaseUrl: readDatabaseUrl(env),
    dataDir,
    adminApiKey: readAdminKey(env),
    hfEndpoint: readUrl(env, 'HF_ENDPOINT', 'https://huggingface.co'),
    hfToken: optional(env, 'HF_TOKEN'),
    wandbBaseUrl: readUrl(env, 'WANDB_BASE_URL', 'https://api.wandb.ai'),
    wandbApiKey: optional(env, 'WANDB_API_KEY'),
    modelCacheDir: path.resolve(optional(env, 'MODEL_CACHE_DIR') ?? path.join(dataDir, 'models')),
    modelCacheMaxBytes: readSize(env, 'MODEL_CACHE_MAX_BYTES'),
    quantPreference: quant
      ? quant
          .split(',')
          .map((q) => q.trim())
          .filter(Boolean)
      : undefined,
    modelSourceRetry: {
      retries: readInteger(env, 'MODEL_SOURCE_RETRIES', DEFAULT_RETRY_POLICY.retries, 0, 100),
      baseDelayMs: readInteger(env, 'MODEL_SOURCE_RETRY_BASE_MS', DEFAULT_RETRY_POLICY.baseDelayMs, 0, 3_600_000),
      maxDelayMs: readInteger(env, 'MODEL_SOURCE_RETRY_MAX_DELAY_MS', DEFAULT_RETRY_POLICY.maxDelayMs, 0, 3_600_000),
      maxTimeMs: readInteger(env, 'MODEL_SOURCE_RETRY_MAX_TIME_MS', DEFAULT_RETRY_POLICY.maxTimeMs, 0, 86_400_000),
    },
    runtime,
    kubernetes: runtime === 'kubernetes' ? readKubernetesSettings(env) : undefined,
    engineCommand,
    gpuInventory,
    cpuSlots: cpu.slots,
    engineThreads: cpu.threads,
    engineIdleExitMs: readInteger(env, 'ENGINE_IDLE_EXIT_MS', 600_000, 1000, 7 * 86_400_000),
    engineLog: {
      maxBytes: readSize(env, 'ENGINE_LOG_MAX_BYTES') ?? 10 * 1024 * 1024,
      retentionDays: readInteger(env, 'ENGINE_LOG_RETENTION_DAYS', 7, 1, 36_500),
    },
    stopEnginesOnExit: readBoolean(env, 'STOP_ENGINES_ON_EXIT', false),
    secondSignalWindowMs: readInteger(env, 'SECOND_SIGNAL_WINDOW_MS', DEFAULTS.secondSignalWindowMs, 1000, 600_000),
    cpuWarning: cpu.warning,
    controllerIntervalMs,
    controllerRestIntervalMs: readInteger(
      env,
      'CONTROLLER_REST_INTERVAL_MS',
      DEFAULTS.restIntervals * controllerIntervalMs,
      controllerIntervalMs,
      86_400_000,
    ),
    leaseTtlMs: readInteger(env, 'LEASE_TTL_MS', DEFAULTS.leaseTtlMs, 100, 3_600_000),
    placementBackoffBaseMs: readInteger(env, 'PLACEMENT_BACKOFF_BASE_MS', DEFAULTS.placementBackoffBaseMs, 10, 60_000),
    replicaStartTimeoutMs: readInteger(env, 'REPLICA_START_TIMEOUT_MS', DEFAULTS.replicaStartTimeoutMs, 1000, 86_400_000),
    drainTimeoutMs: readInteger(env, 'DRAIN_TIMEOUT_MS', DEFAULTS.drainTimeoutMs, 0, 86_400_000),
    wakeTimeoutMs: readInteger(env, 'WAKE_TIMEOUT_MS', DEFAULTS.wakeTimeoutMs, 0, 86_400_000),
    queueTimeoutMs: readInteger(env, 'QUEUE_TIMEOUT_MS', DEFAULTS.queueTimeoutMs, 0, 86_400_000),
    queueMaxPerEndpoint: readInteger(env, 'QUEUE_MAX_PER_ENDPOINT', DEFAULTS.queueMaxPerEndpoint, 1, 1_000_000),
    queueMaxPerKey: readInteger(env, 'QUEUE_MAX_PER_KEY', DEFAULTS.queueMaxPerKey, 1, 1_000_000),
    subscriptionBuffer: readInteger(env, 'SUBSCRIPTION_BUFFER', DEFAULTS.subscriptionBuffer, 1, 1_000_000),
    subscriptionMaxLagMs: readInteger(env, 'SUBSCRIPTION_MAX_LAG_MS', DEFAULTS.subscriptionMaxLagMs, 0, 3_600_000),
    nodeEnv,
    graphqlLimits: readGraphQLLimits(env),
    graphqlIntrospection: readBoolean(env, 'GRAPHQL_INTROSPECTION', !production),
    corsOrigins: readOrigins(env, 'CORS_ORIGINS', production ? [] : ['*']),
    wsMaxSubscriptions: readInteger(env, 'WS_MAX_SUBSCRIPTIONS', DEFAULTS.wsMaxSubscriptions, 1, 100_000),
    userMaxSubscriptions: readInteger(env, 'USER_MAX_SUBSCRIPTIONS', DEFAULTS.userMaxSubscriptions, 1, 1_000_000),
    userMaxWebSockets: readInteger(env, 'USER_MAX_WEBSOCKETS', DEFAULTS.userMaxWebSockets, 1, 1_000_000),
    streamStallTimeoutMs: readInteger(env, 'STREAM_STALL_TIMEOUT_MS', DEFAULTS.streamStallTimeoutMs, 100, 86_400_000),
    engineIdleTimeoutMs: readInteger(env, 'ENGINE_IDLE_TIMEOUT_MS', DEFAULTS.engineIdleTimeoutMs, 0, 86_400_000),
    requestTimeoutMs: readInteger(env, 'REQUEST_TIMEOUT_MS', DEFAULTS.requestTimeoutMs, 1000, 3_600_000),
    headersTimeoutMs: readInteger(env, 'HEADERS_TIMEOUT_MS', DEFAULTS.headersTimeoutMs, 1000, 3_600_000),
    httpMaxConnections: readMaxConnections(env),
    log: {
      level: readChoice(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
      format: readChoice(env, 'LOG_FORMAT', ['json', 'pretty'] as const, 'json'),
    },
    metrics: {
      token: optional(env, 'METRICS_TOKEN'),
      requestLogRetentionDays: readInteger(env, 'REQUEST_LOG_RETENTION_DAYS', DEFAULTS.requestLogRetentionDays, 1, 36_500),
      metricsRetentionDays: readInteger(env, 'METRICS_RETENTION_DAYS', DEFAULTS.metricsRetentionDays, 1, 36_500),
      maxBuffered: readInteger(env, 'REQUEST_LOG_BUFFER', DEFAULTS.requestLogBuffer, 1, 10_000_000),
      sampleMs: readInteger(env, 'METRICS_SAMPLE_INTERVAL_MS', DEFAULTS.metricsSampleMs, 100, 3_600_000),
    },
  };
}

/** HEALTH_PORT: a port as PORT is, other than PORT's own (both listen on HOST); `0` picks a free one, whatever PORT is. */
function readHealthPort(env: Env, port: number): number | undefined {
  const raw = env.HEALTH_PORT;
  if (raw === undefined || raw === '') return undefined;
  const healthPort = readPort(env, 'HEALTH_PORT', 0);
  if (healthPort !== 0 && healthPort === port) {
    throw new ConfigError('HEALTH_PORT', `must differ from PORT (${port}): the probes listen apart from the API`, raw);
  }
  return healthPort;
}

/** HTTP_MAX_CONNECTIONS: at most what the open-file limit leaves to connections, where it is known (src/http/connection-cap.ts). */
function readMaxConnections(env: Env): number {
  const limit = openFileLimit();
  if (limit === undefined) return readInteger(env, 'HTTP_MAX_CONNECTIONS', defaultMaxConnections(limit), 1, 10_000_000);
  const max = connectionsWithin(limit);
  const why = `the open-file limit, ${limit}, less ${limit - max} kept for engines, PostgreSQL and downloads`;
  return readInteger(env, 'HTTP_MAX_CONNECTIONS', defaultMaxConnections(limit), 1, max, why);
}
