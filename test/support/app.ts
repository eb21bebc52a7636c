/**
 * A whole gateway process for integration tests, in this test process: its
 * own database and data directory, the real controller and local runtime
 * starting real engine processes on the tiny model, served by the stand-in hub.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startApp, type App, type AppOptions } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { SOURCE_ENTRY } from '../../src/runtime/engine-bundle.js';
import type { EndpointStatus } from '../../src/domain/lifecycle.js';
import type { Sql } from '../../src/storage/database.js';
import { onCleanup } from './cleanup.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { FAKE_HUB_TOKEN, startFakeHub, type FakeHub, type FakeRepo } from './fake-hub.js';
import { createSeed, type SeededUser } from './gateway.js';
import { buildTinyGguf, REASONING_TEMPLATE, toolsChatTemplate } from './tiny-gguf.js';
import { engineAuthHeaders } from '../../src/engine-client/engine-client.js';

export { REASONING_TEMPLATE };

export const TINY_REPO = 'test-org/tiny-llama-GGUF';
/** The tiny model with a 64k context: answers long enough (tens of thousands of tokens) to be stopped while they stream. */
export const TINY_LONG_REPO = 'test-org/tiny-long-GGUF';
/** The tiny model with a chat template that knows tools (Qwen2.5's syntax). */
export const TINY_TOOLS_REPO = 'test-org/tiny-tools-GGUF';

/** The stand-in hub's standard repositories: the tiny model and the shapes that fail. */
export function standardRepos(): FakeRepo[] {
  const tiny = buildTinyGguf();
  return [
    { id: TINY_REPO, files: { 'tiny-llama-Q8_0.gguf': tiny, 'README.md': '# tiny llama\n' } },
    {
      id: 'test-org/tiny-thinking-GGUF',
      files: { 'tiny-thinking-Q8_0.gguf': buildTinyGguf({ chatTemplate: REASONING_TEMPLATE, seed: 2 }) },
    },
    { id: 'test-org/short-context-GGUF', files: { 'short-Q8_0.gguf': buildTinyGguf({ contextLength: 256, seed: 3 }) } },
    { id: TINY_TOOLS_REPO, files: { 'tools-Q8_0.gguf': buildTinyGguf({ chatTemplate: toolsChatTemplate(), seed: 7 }) } },
    { id: TINY_LONG_REPO, files: { 'long-Q8_0.gguf': buildTinyGguf({ contextLength: 65_536, seed: 6 }) } },
    { id: 'test-org/private-GGUF', private: true, allowedTokens: ['hf_someone_else'], files: { 'p-Q8_0.gguf': tiny } },
    { id: 'test-org/safetensors-only', files: { 'model.safetensors': Buffer.alloc(4096, 1), 'config.json': '{}' } },
    { id: 'test-org/no-weights', files: { 'README.md': 'nothing here\n' } },
    // Served with injected faults; its own model bytes, so that it is never already in the cache.
    { id: 'test-org/fault-GGUF', files: { 'fault-Q8_0.gguf': buildTinyGguf({ seed: 5 }) } },
    // A GGUF whose header reads but whose tensors are cut off: the engine fails to load it.
    { id: 'test-org/truncated-GGUF', files: { 'broken-Q8_0.gguf': tiny.subarray(0, Math.floor(tiny.length * 0.6)) } },
  ];
}

export interface TestApp extends TestDatabase {
  app: App;
  url: string;
  hub: FakeHub;
  dataDir: string;
  seed: ReturnType<typeof createSeed>;
  /** Restarts the gateway process on the same database and data directory; `env` changes its variables from then on. */
  restart(env?: Record<string, string>): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  hub?: FakeHub;
  controller?: AppOptions['controller'];
  /** The structured logger (access lines; the components' failures go there instead of DEBUG_CONTROLLER's callback). */
  logger?: AppOptions['logger'];
  /** The built web console to serve at `/` (test/console builds one per file). */
  consoleDir?: string;
  /** The components' failure callback (what they would log). */
  log?: (message: string, error?: unknown) => void;
  /** RUNTIME=kubernetes: the client configuration of the stand-in API server. */
  kubeConfig?: AppOptions['kubeConfig'];
  /** How engines are run. @default testEngineEntry() */
  engineEntry?: AppOptions['engineEntry'];
}

/**
 * How the tests' local runtimes run the built-in engine: as the gateway does (a bundle it builds at start,
 * src/runtime/engine-bundle.ts, run with plain Node.js), or, with TEST_ENGINE=tsx, from its source through tsx.
 */
export function testEngineEntry(): readonly string[] | undefined {
  return process.env.TEST_ENGINE === 'tsx' ? SOURCE_ENTRY : undefined;
}

/** The test environment: fast controller passes, short leases, one engine thread. */
export function testEnv(dataDir: string, hubUrl: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    HF_ENDPOINT: hubUrl,
    HF_TOKEN: FAKE_HUB_TOKEN,
    CPU_SLOTS: '4',
    ENGINE_THREADS: '1',
    CONTROLLER_INTERVAL_MS: '100',
    LEASE_TTL_MS: '3000',
    DRAIN_TIMEOUT_MS: '5000',
    REPLICA_START_TIMEOUT_MS: '60000',
    // Hub and registry retries as in production (5), with short backoff: a persistent fault fails in well under 1 s.
    MODEL_SOURCE_RETRY_BASE_MS: '20',
    MODEL_SOURCE_RETRY_MAX_DELAY_MS: '100',
    ...env,
  };
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const db = await createTestDatabase();
  const hub = options.hub ?? (await startFakeHub({ repos: standardRepos() }));
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-app-'));
  await chmod(dataDir, 0o755);
  let config = loadConfig(testEnv(dataDir, hub.url, options.env));
  const log =
    options.log ?? (process.env.DEBUG_CONTROLLER ? (m: string, e?: unknown) => console.error('[controller]', m, e ?? '') : () => {});
  const engineEntry = options.engineEntry ?? testEngineEntry();
  const start = () =>
    startApp(config, db.sql, {
      ...(options.logger ? { logger: options.logger } : { log }),
      ...(options.controller ? { controller: options.controller } : {}),
      ...(options.consoleDir ? { consoleDir: options.consoleDir } : {}),
      ...(options.kubeConfig ? { kubeConfig: options.kubeConfig } : {}),
      ...(engineEntry ? { engineEntry } : {}),
    });
  const testApp: TestApp = {
    ...db,
    app: await start(),
    url: '',
    hub,
    dataDir,
    seed: undefined as never,
    async restart(env) {
      await testApp.app.close();
      if (env) config = loadConfig(testEnv(dataDir, hub.url, { ...options.env, ...env }));
      testApp.app = await start();
      testApp.url = testApp.app.gateway.url;
      testApp.seed = createSeed(testApp.app.services, testApp.url);
    },
  };
  testApp.url = testApp.app.gateway.url;
  testApp.seed = createSeed(testApp.app.services, testApp.url);
  onCleanup(async () => {
    try {
      await testApp.app.close();
      await stopAllReplicas(db.sql, testApp.app);
      if (!options.hub) await hub.close();
      await db.close();
    } finally {
      // Removed whatever failed above (a test that closed the database itself): no data directory is left behind.
      await rm(dataDir, { recursive: true, force: true });
    }
  });
  return testApp;
}

/** Test clean-up: no engine process outlives its test file. */
export async function stopAllReplicas(sql: Sql, app: App): Promise<void> {
  const rows = await sql<{ id: string; address: string; locator: string; node: string }[]>`
    SELECT id, address, locator, node FROM replicas WHERE state IN ('STARTING', 'READY', 'DRAINING') AND locator IS NOT NULL`;
  // A runtime whose cluster is already gone (a stand-in API server closed first) has nothing left to stop.
  await Promise.all(
    rows.map((r) => app.runtime.stop({ replicaId: r.id, address: r.address, locator: r.locator, node: r.node }, 1000).catch(() => {})),
  );
  await app.runtime.reapOrphans(async () => new Set()).catch(() => {});
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

export async function statusOf(
  sql: Sql,
  id: string,
): Promise<{ status: EndpointStatus; phase: string | null; errorCode: string | null; curr: number; desired: number; updated: number }> {
  const [row] = await sql<
    {
      status: EndpointStatus;
      phase: string | null;
      error_code: string | null;
      curr_replica_cnt: number;
      desired_replica_cnt: number;
      updated_replica_cnt: number;
    }[]
  >`
    SELECT status, phase, error_code, curr_replica_cnt, desired_replica_cnt, updated_replica_cnt FROM endpoints WHERE id = ${id}`;
  return {
    status: row!.status,
    phase: row!.phase,
    errorCode: row!.error_code,
    curr: row!.curr_replica_cnt,
    desired: row!.desired_replica_cnt,
    updated: row!.updated_replica_cnt,
  };
}

export async function waitForStatus(sql: Sql, id: string, status: EndpointStatus, timeoutMs = 60_000) {
  let last: Awaited<ReturnType<typeof statusOf>> | undefined;
  try {
    return await waitFor(
      `${id} to be ${status}`,
      async () => {
        last = await statusOf(sql, id);
        return last.status === status ? last : undefined;
      },
      timeoutMs,
    );
  } catch (error) {
    // What the endpoint showed last, its replicas and its events: a timeout says where the endpoint stopped.
    const replicas = await sql`SELECT id, state, last_error FROM replicas WHERE endpoint_id = ${id} ORDER BY created_at`.catch(() => []);
    const trail = await statusTrail(sql, id).catch(() => []);
    throw new Error(
      `${(error as Error).message}; last seen ${JSON.stringify(last)}, replicas ${JSON.stringify(replicas)}, events ${JSON.stringify(trail)}`,
      { cause: error },
    );
  }
}

/** The statusTrail of an endpoint's first start, every step of it, as the controller walks it. */
export const FIRST_START_TRAIL: readonly string[] = [
  'INITIALIZING REQUESTING_VIRTUAL_MACHINE',
  'INITIALIZING DOWNLOADING_MODEL',
  'INITIALIZING ENGINE_INITIALIZING',
  'READY',
  'RUNNING',
];

/** The status/phase/error sequence of an endpoint's events, as compact strings. */
export async function statusTrail(sql: Sql, id: string): Promise<string[]> {
  const rows = await sql<{ status: string; phase: string | null; error_code: string | null }[]>`
    SELECT status, phase, error_code FROM endpoint_events
    WHERE endpoint_id = ${id} AND type IN ('CREATED', 'STATUS_CHANGED') ORDER BY id`;
  return rows.map((r) => [r.status, r.phase, r.error_code].filter(Boolean).join(' '));
}

export async function liveReplicaRows(sql: Sql, id: string) {
  return sql<{ id: string; state: string; address: string; pid: number; version_index: number; engine_token: string | null }[]>`
    SELECT id, state, address, CASE WHEN locator ~ '^[0-9]{1,9}$' THEN locator::int END AS pid, version_index, engine_token FROM replicas
    WHERE endpoint_id = ${id} AND state IN ('STARTING', 'READY', 'DRAINING') ORDER BY created_at`;
}

/** The engine's own account of its load (GET /health) on the endpoint's first live replica. */
export async function replicaHealth(sql: Sql, endpointId: string) {
  const [replica] = await liveReplicaRows(sql, endpointId);
  if (!replica) throw new Error(`endpoint ${endpointId} has no live replica`);
  return (await (await engineFetch(replica, '/health')).json()) as { active: number; queued: number; totalCompletionTokens: number };
}

/** A request straight to a replica's engine, with the token the engine requires (as the gateway sends it). */
export function engineFetch(replica: { address: string; engine_token: string | null }, route: string, init: RequestInit = {}) {
  return fetch(`${replica.address}${route}`, {
    ...init,
    headers: { ...(init.headers as Record<string, string> | undefined), ...engineAuthHeaders(replica.engine_token) },
  });
}

/**
 * A long generation straight to a replica (the gateway's router comes with chat completions): its body read whole;
 * aborting it cancels it. Never rejects.
 */
export function longRequest(replica: { address: string; engine_token: string | null }, maxTokens: number, signal: AbortSignal) {
  return engineFetch(replica, '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'go' }], max_tokens: maxTokens, temperature: 0 }),
    signal,
  })
    .then((r) => r.arrayBuffer())
    .catch(() => undefined);
}

export type { SeededUser };
