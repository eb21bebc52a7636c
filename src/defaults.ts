/**
 * Every tunable's default, declared once: config.ts reads the environment
 * over these, and a component built without a value (a test, a tool, the
 * benchmarks) falls back to the same number. No component declares its own.
 */
export const DEFAULTS = {
  /** CONTROLLER_INTERVAL_MS */
  controllerIntervalMs: 500,
  /** CONTROLLER_REST_INTERVAL_MS, in controller intervals: how often an endpoint at rest (idle, unchanged) is passed over. */
  restIntervals: 10,
  /** LEASE_TTL_MS */
  leaseTtlMs: 10_000,
  /** REPLICA_START_TIMEOUT_MS: how long a starting engine may take to become ready. */
  replicaStartTimeoutMs: 300_000,
  /** SECOND_SIGNAL_WINDOW_MS: how long after the list of engines left running a second Ctrl-C still stops them. */
  secondSignalWindowMs: 5000,
  /** DRAIN_TIMEOUT_MS: how long a sleeping or scaled-down replica may take to finish its requests. */
  drainTimeoutMs: 30_000,
  /** PLACEMENT_BACKOFF_BASE_MS: the first wait of an endpoint's placements after an outage (doubling, up to a minute). */
  placementBackoffBaseMs: 1000,
  /** How often a gateway looks for the replicas no endpoint owns (orphans) and stops them. */
  orphanReapIntervalMs: 60_000,
  /** SIGTERM to SIGKILL of a stopped engine. */
  stopGraceMs: 10_000,
  /** A draining engine that has answered no health check for this long is stopped (hung, it serves nothing). */
  drainSilenceMs: 10_000,
  /**
   * How long the built-in engine keeps an idle connection (its Keep-Alive hint): longer than an endpoint at rest
   * waits between health checks (CONTROLLER_REST_INTERVAL_MS), so that the gateway's checks and requests reuse it.
   */
  engineKeepAliveMs: 65_000,
  /** The longest an engine's Keep-Alive hint is followed by the gateway (an engine that gives none: 4 s). */
  engineClientKeepAliveMaxMs: 60_000,
  /** WAKE_TIMEOUT_MS: how long a request may wait for a sleeping or starting endpoint to serve. */
  wakeTimeoutMs: 120_000,
  /** QUEUE_TIMEOUT_MS: how long a request may wait for a free slot. */
  queueTimeoutMs: 30_000,
  /** QUEUE_MAX_PER_ENDPOINT */
  queueMaxPerEndpoint: 256,
  /** QUEUE_MAX_PER_KEY */
  queueMaxPerKey: 64,
  /** How long the router reuses an endpoint's ready replicas as read. */
  replicaCacheMs: 500,
  /** SUBSCRIPTION_BUFFER: live-status signals buffered per subscriber. */
  subscriptionBuffer: 1000,
  /** SUBSCRIPTION_MAX_LAG_MS */
  subscriptionMaxLagMs: 5000,
  /** WS_MAX_SUBSCRIPTIONS: operations in flight on one WebSocket. */
  wsMaxSubscriptions: 100,
  /**
   * ENGINE_IDLE_TIMEOUT_MS: how long a generation's answer may go without a byte from its replica once its first
   * token came (a wedged engine); then it is cut and its slot goes back.
   */
  engineIdleTimeoutMs: 300_000,
  /** STREAM_STALL_TIMEOUT_MS: how long a streamed answer or subscription may wait for its client to take what was sent. */
  streamStallTimeoutMs: 30_000,
  /** USER_MAX_SUBSCRIPTIONS */
  userMaxSubscriptions: 500,
  /** USER_MAX_WEBSOCKETS */
  userMaxWebSockets: 100,
  /** REQUEST_TIMEOUT_MS, HEADERS_TIMEOUT_MS */
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 15_000,
  /** REQUEST_LOG_BUFFER: request outcomes buffered before they are dropped (and counted). */
  requestLogBuffer: 10_000,
  /** REQUEST_LOG_RETENTION_DAYS, METRICS_RETENTION_DAYS, METRICS_SAMPLE_INTERVAL_MS */
  requestLogRetentionDays: 30,
  metricsRetentionDays: 90,
  metricsSampleMs: 10_000,
} as const;
