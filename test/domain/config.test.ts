import path from 'node:path';
import { expect, test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { defaultMaxConnections } from '../../src/http/connection-cap.js';
import { cpuBudget } from '../../src/runtime/cpu-budget.js';

test('defaults with no variables set', () => {
  expect(loadConfig({})).toEqual({
    port: 8080,
    host: '0.0.0.0',
    // From this process's open-file limit (src/http/connection-cap.ts; test/http/connection-cap.test.ts checks the rule).
    httpMaxConnections: defaultMaxConnections(),
    databaseUrl: undefined,
    dataDir: path.resolve('.data'),
    adminApiKey: undefined,
    hfEndpoint: 'https://huggingface.co',
    hfToken: undefined,
    wandbBaseUrl: 'https://api.wandb.ai',
    wandbApiKey: undefined,
    modelCacheDir: path.resolve('.data/models'),
    modelCacheMaxBytes: undefined,
    quantPreference: undefined,
    modelSourceRetry: { retries: 5, baseDelayMs: 1000, maxDelayMs: 8000, maxTimeMs: 60_000 },
    runtime: 'local',
    engineCommand: undefined,
    gpuInventory: undefined,
    // From the cores this machine gives (test/runtime/cpu-budget.test.ts checks the rule).
    cpuSlots: cpuBudget().slots,
    engineThreads: cpuBudget().threads,
    engineIdleExitMs: 600_000,
    engineLog: { maxBytes: 10 * 1024 * 1024, retentionDays: 7 },
    stopEnginesOnExit: false,
    secondSignalWindowMs: 5000,
    cpuWarning: undefined,
    controllerIntervalMs: 500,
    controllerRestIntervalMs: 5000,
    leaseTtlMs: 10_000,
    placementBackoffBaseMs: 1000,
    replicaStartTimeoutMs: 300_000,
    drainTimeoutMs: 30_000,
    wakeTimeoutMs: 120_000,
    queueTimeoutMs: 30_000,
    queueMaxPerEndpoint: 256,
    queueMaxPerKey: 64,
    subscriptionBuffer: 1000,
    subscriptionMaxLagMs: 5000,
    wsMaxSubscriptions: 100,
    userMaxSubscriptions: 500,
    userMaxWebSockets: 100,
    streamStallTimeoutMs: 30000,
    engineIdleTimeoutMs: 300_000,
    requestTimeoutMs: 30_000,
    headersTimeoutMs: 15_000,
    metrics: { token: undefined, requestLogRetentionDays: 30, metricsRetentionDays: 90, maxBuffered: 10_000, sampleMs: 10_000 },
    nodeEnv: 'development',
    graphqlLimits: { maxDepth: 10, maxAliases: 15, maxDirectives: 20, maxTokens: 1000, maxCost: 10_000 },
    graphqlIntrospection: true,
    corsOrigins: ['*'],
    log: { level: 'info', format: 'json' },
  });
});

test('security variables: production turns introspection and CORS off unless set', () => {
  expect(loadConfig({ NODE_ENV: 'production' })).toMatchObject({ nodeEnv: 'production', graphqlIntrospection: false, corsOrigins: [] });
  expect(
    loadConfig({ NODE_ENV: 'production', GRAPHQL_INTROSPECTION: 'true', CORS_ORIGINS: 'https://app.example.com, http://localhost:3000' }),
  ).toMatchObject({
    graphqlIntrospection: true,
    corsOrigins: ['https://app.example.com', 'http://localhost:3000'],
  });
  expect(loadConfig({ GRAPHQL_INTROSPECTION: 'off', CORS_ORIGINS: '' })).toMatchObject({ graphqlIntrospection: false, corsOrigins: [] });
  expect(loadConfig({ GRAPHQL_MAX_DEPTH: '4', GRAPHQL_MAX_COST: '500' }).graphqlLimits).toMatchObject({
    maxDepth: 4,
    maxCost: 500,
    maxTokens: 1000,
  });
  expect(() => loadConfig({ GRAPHQL_INTROSPECTION: 'maybe' })).toThrow('GRAPHQL_INTROSPECTION must be true or false');
  expect(() => loadConfig({ GRAPHQL_MAX_DEPTH: '0' })).toThrow('GRAPHQL_MAX_DEPTH must be an integer from 1 to 1000');
  expect(() => loadConfig({ SECOND_SIGNAL_WINDOW_MS: '500' })).toThrow('SECOND_SIGNAL_WINDOW_MS must be an integer from 1000 to 600000');
  expect(loadConfig({ SECOND_SIGNAL_WINDOW_MS: '2000' }).secondSignalWindowMs).toBe(2000);
  expect(loadConfig({}).secondSignalWindowMs).toBe(5000);
  expect(() => loadConfig({ CORS_ORIGINS: 'https://app.example.com/path' })).toThrow('CORS_ORIGINS must be "*" or comma-separated origins');
  expect(() => loadConfig({ CORS_ORIGINS: 'app.example.com' })).toThrow('CORS_ORIGINS must be "*"');
});

test('runtime variables', () => {
  expect(loadConfig({ MODEL_CACHE_MAX_BYTES: '20G', GGUF_QUANT_PREFERENCE: 'Q8_0, F16', GPU_INVENTORY: 'H100=8,a100=2' })).toMatchObject({
    modelCacheMaxBytes: 20 * 1024 ** 3,
    quantPreference: ['Q8_0', 'F16'],
    gpuInventory: 'H100=8,a100=2',
  });
  expect(() => loadConfig({ MODEL_CACHE_MAX_BYTES: 'lots' })).toThrow('MODEL_CACHE_MAX_BYTES must be a size in bytes');
  expect(() => loadConfig({ GPU_INVENTORY: 'V100=2' })).toThrow('GPU_INVENTORY is invalid');
  expect(() => loadConfig({ ENGINE_COMMAND: 'vllm serve {model}' })).toThrow(
    'ENGINE_COMMAND is invalid: ENGINE_COMMAND must contain {port}',
  );
  expect(() => loadConfig({ ENGINE_COMMAND: 'x --port {port} {gpus}' })).toThrow('unknown placeholder {gpus}');
  expect(() => loadConfig({ HF_ENDPOINT: 'ftp://hub' })).toThrow('HF_ENDPOINT must be an http(s) URL');
  expect(() => loadConfig({ CPU_SLOTS: '-1' })).toThrow('CPU_SLOTS must be an integer from 0 to 1024');
});

test('admission queue variables', () => {
  expect(loadConfig({ QUEUE_TIMEOUT_MS: '5000', QUEUE_MAX_PER_ENDPOINT: '32', QUEUE_MAX_PER_KEY: '4' })).toMatchObject({
    queueTimeoutMs: 5000,
    queueMaxPerEndpoint: 32,
    queueMaxPerKey: 4,
  });
  expect(() => loadConfig({ QUEUE_MAX_PER_ENDPOINT: '0' })).toThrow('QUEUE_MAX_PER_ENDPOINT must be an integer from 1 to 1000000');
  expect(() => loadConfig({ QUEUE_MAX_PER_KEY: 'many' })).toThrow('QUEUE_MAX_PER_KEY must be an integer from 1 to 1000000');
});

test('controller variables: the rest interval follows the interval unless set, and is no shorter', () => {
  expect(loadConfig({ CONTROLLER_INTERVAL_MS: '200' })).toMatchObject({ controllerIntervalMs: 200, controllerRestIntervalMs: 2000 });
  expect(loadConfig({ CONTROLLER_REST_INTERVAL_MS: '1500' })).toMatchObject({ controllerIntervalMs: 500, controllerRestIntervalMs: 1500 });
  expect(() => loadConfig({ CONTROLLER_REST_INTERVAL_MS: '100' })).toThrow(
    'CONTROLLER_REST_INTERVAL_MS must be an integer from 500 to 86400000',
  );
});

test('malformed variables name the variable and the rule', () => {
  expect(() => loadConfig({ PORT: '70000' })).toThrow('PORT must be an integer from 0 to 65535 (got "70000")');
  expect(() => loadConfig({ DATABASE_URL: 'mysql://x' })).toThrow('DATABASE_URL must use the postgres:// or postgresql:// scheme');
  expect(() => loadConfig({ DATABASE_URL: 'not a url' })).toThrow('DATABASE_URL must be a URL');
  expect(() => loadConfig({ ADMIN_API_KEY: 'short' })).toThrow('ADMIN_API_KEY must be 20 to 200 characters');
  expect(loadConfig({ DATABASE_URL: 'postgres://u:p@db:5432/x', PORT: '9000', DATA_DIR: '/var/lib/x' })).toMatchObject({
    port: 9000,
    databaseUrl: 'postgres://u:p@db:5432/x',
    dataDir: '/var/lib/x',
  });
});
