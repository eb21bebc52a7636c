/**
 * The pieces every benchmark stands up: a throw-away embedded PostgreSQL, the
 * stand-in hub serving the tiny GGUF, gateway processes run exactly as
 * `npm start` runs them, and child processes (load generators) spoken to over
 * IPC. Everything started is registered for clean-up, also on Ctrl-C.
 */
import { buildSync } from 'esbuild';
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { NODE_BUNDLE } from '../../src/runtime/engine-bundle.js';
import { signalGroup } from '../../src/runtime/local-processes.js';
import { connectDatabase, migrate, type ConnectOptions, type Sql } from '../../src/storage/database.js';
import { ensureDatabase, startEmbeddedPostgres } from '../../src/storage/embedded-postgres.js';
import { startFakeHub, FAKE_HUB_TOKEN, type FakeHub } from '../../test/support/fake-hub.js';
import { buildTinyGguf } from '../../test/support/tiny-gguf.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BENCH_DIR = path.join(REPO_ROOT, 'bench');
export const RESULTS_DIR = path.join(BENCH_DIR, 'results');
export const PROFILES_DIR = path.join(RESULTS_DIR, 'profiles');
export const TINY_REPO = 'bench-org/tiny-llama-GGUF';
export const ADMIN_KEY = 'dek_bench_admin_key_0123456789abcdefABCDEF';
export const HUB_TOKEN = FAKE_HUB_TOKEN;

// ------------------------------------------------------------------ clean-up

const cleanups: { name: string; fn: () => Promise<void> | void }[] = [];

/** Registers a clean-up; returns a function that runs it now (once) and unregisters it. */
export function onCleanup(name: string, fn: () => Promise<void> | void): () => Promise<void> {
  const entry = { name, fn };
  cleanups.push(entry);
  let done = false;
  return async () => {
    if (done) return;
    done = true;
    const index = cleanups.indexOf(entry);
    if (index >= 0) cleanups.splice(index, 1);
    await fn();
  };
}

/** Runs every registered clean-up, newest first. */
export async function cleanupAll(): Promise<void> {
  while (cleanups.length > 0) {
    const entry = cleanups.pop()!;
    try {
      await Promise.race([entry.fn(), sleep(20_000)]);
    } catch (error) {
      console.error(`clean-up ${entry.name} failed:`, error);
    }
  }
}

let signalsHooked = false;
export function hookSignals(): void {
  if (signalsHooked) return;
  signalsHooked = true;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`\n${signal}: cleaning up`);
      void cleanupAll().finally(() => process.exit(130));
    });
  }
}

// ------------------------------------------------------------------ machine

export interface Machine {
  cpuModel: string;
  cpuCount: number;
  cpuMHz: number;
  memoryGiB: number;
  freeMemoryGiB: number;
  node: string;
  os: string;
  loadAverage: number[];
}

export function machine(): Machine {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cpuCount: cpus.length,
    cpuMHz: cpus[0]?.speed ?? 0,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    freeMemoryGiB: Math.round((os.freemem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

export function describeMachine(m: Machine): string {
  return `${m.cpuCount} × ${m.cpuModel} (${m.cpuMHz} MHz), ${m.memoryGiB} GiB RAM, Node ${m.node}, ${m.os}`;
}

// ------------------------------------------------------------------ directories

/** A private temporary directory that the `postgres` user can pass through (mode 0755). */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `bench-${prefix}-`));
  await chmod(dir, 0o755);
  onCleanup(`rm ${dir}`, () => rm(dir, { recursive: true, force: true }));
  return dir;
}

// ------------------------------------------------------------------ database

export interface BenchDatabase {
  url: string;
  /** A connection for the benchmark itself (reads, checks). */
  sql: Sql;
  /** Opens another connection pool (e.g. with a statement counter). */
  connect(options?: ConnectOptions): Sql;
  stop(): Promise<void>;
}

export async function startDatabase(options: { migrate?: boolean } = {}): Promise<BenchDatabase> {
  const dir = await tempDir('pg');
  const pg = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), ephemeral: true });
  const stopPg = onCleanup('embedded postgres', () => pg.stop());
  await ensureDatabase(pg.adminUrl, 'bench');
  const url = pg.urlFor('bench');
  const pools: Sql[] = [];
  const connect = (o: ConnectOptions = {}) => {
    const sql = connectDatabase(url, o);
    pools.push(sql);
    return sql;
  };
  const sql = connect({ max: 4 });
  if (options.migrate) await migrate(sql);
  const stop = onCleanup('database pools', async () => {
    await Promise.all(pools.map((p) => p.end({ timeout: 2 }).catch(() => {})));
    await stopPg();
  });
  return { url, sql, connect, stop };
}

// ------------------------------------------------------------------ hub

export async function startHub(): Promise<FakeHub> {
  const hub = await startFakeHub({
    repos: [{ id: TINY_REPO, files: { 'tiny-llama-Q8_0.gguf': buildTinyGguf(), 'README.md': '# tiny llama\n' } }],
  });
  onCleanup('fake hub', () => hub.close());
  return hub;
}

// ------------------------------------------------------------------ gateway process

export interface GatewayProcess {
  url: string;
  pid: number;
  child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/**
 * `node --import tsx src/main.ts`, as `npm start` runs it. With `cpuProf`, the
 * process writes a V8 CPU profile into bench/results/profiles when it exits.
 */
export async function startGatewayProcess(
  env: Record<string, string>,
  options: { cpuProf?: string; nodeArgs?: string[] } = {},
): Promise<GatewayProcess> {
  const args = ['--import', 'tsx', ...(options.nodeArgs ?? [])];
  if (options.cpuProf) args.push(...(await cpuProfArgs(options.cpuProf)));
  args.push('src/main.ts');
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = onCleanup('gateway process', () => stopChild(child, 15_000));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start within 60 s:\n${output}`)), 60_000);
    const check = () => {
      const match = /Serving on (http:\/\/[\d.:]+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        child.stdout!.off('data', check);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}:\n${output}`));
    });
  });
  return { url, pid: child.pid!, child, output: () => output, stop };
}

/**
 * Node flags writing V8 CPU profiles into bench/results/profiles/<name>/ (one
 * file per thread: tsx's loader runs in a worker; the main thread's profile
 * is the largest).
 */
export async function cpuProfArgs(name: string): Promise<string[]> {
  const dir = path.join(PROFILES_DIR, name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  // BENCH_CPU_PROF_INTERVAL_US: a finer sampling interval than V8's 1000 µs, to see a short burst.
  const interval = process.env.BENCH_CPU_PROF_INTERVAL_US;
  return ['--cpu-prof', '--cpu-prof-dir', dir, ...(interval ? ['--cpu-prof-interval', interval] : [])];
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone. */
export function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Stops a process group we started (engines are spawned detached, leading their group). */
export async function killGroup(pid: number, graceMs = 3000): Promise<void> {
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (alive() && Date.now() < deadline) await sleep(50);
  if (alive()) signalGroup(pid, 'SIGKILL');
}

/** The usual environment of a benchmark gateway process. */
export function gatewayEnv(
  dataDir: string,
  databaseUrl: string,
  hubUrl: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    ADMIN_API_KEY: ADMIN_KEY,
    HF_ENDPOINT: hubUrl,
    HF_TOKEN: HUB_TOKEN,
    CPU_SLOTS: '4',
    CONTROLLER_INTERVAL_MS: '100',
    QUEUE_TIMEOUT_MS: '600000',
    WAKE_TIMEOUT_MS: '120000',
    REPLICA_START_TIMEOUT_MS: '120000',
    DRAIN_TIMEOUT_MS: '5000',
    ...extra,
  };
}

// ------------------------------------------------------------------ child processes

export interface ChildHandle<R> {
  child: ChildProcess;
  /** Resolves with the child's `{ type: 'result' }` message. */
  result: Promise<R>;
  send(message: unknown): void;
  /** Messages other than the result. */
  on(handler: (message: Record<string, unknown>) => void): void;
  stop(): Promise<void>;
}

/**
 * Forks `bench/<file>` under tsx with an IPC channel (advanced serialization:
 * typed arrays travel as such), sends it `{ type: 'run', config }`, and waits
 * for `{ type: 'result', ... }`. A child that exits first, or outlives
 * `timeoutMs`, rejects. `bundled`: the file is bundled with esbuild first and
 * run with plain Node.js, as the gateway runs its engines
 * (src/runtime/engine-bundle.ts): a baseline's start then pays no more than
 * the gateway's engines do.
 */
export function runChild<R>(
  file: string,
  config: unknown,
  options: { timeoutMs: number; nodeArgs?: string[]; env?: Record<string, string>; bundled?: boolean },
): ChildHandle<R> {
  const child = fork(options.bundled ? bundle(file) : path.join(BENCH_DIR, file), [], {
    cwd: REPO_ROOT,
    execArgv: [...(options.bundled ? ['--enable-source-maps'] : ['--import', 'tsx']), ...(options.nodeArgs ?? [])],
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, ...options.env },
  });
  const handlers: ((message: Record<string, unknown>) => void)[] = [];
  const stop = onCleanup(`child ${file}`, () => stopChild(child, 3000));
  const result = new Promise<R>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${file} did not finish within ${options.timeoutMs} ms`));
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.on('message', (message: Record<string, unknown>) => {
      if (message.type === 'result') {
        clearTimeout(timer);
        resolve(message as R);
      } else if (message.type === 'error') {
        clearTimeout(timer);
        reject(new Error(`${file}: ${String(message.message)}`));
      } else {
        for (const h of handlers) h(message);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${file} exited (${code ?? signal}) before reporting`));
    });
  });
  result.catch(() => {});
  child.once('spawn', () => child.send({ type: 'run', config }));
  return {
    child,
    result,
    send: (message) => {
      if (child.connected) child.send(message as never);
    },
    on: (handler) => handlers.push(handler),
    stop,
  };
}

/** The child's next message of `type` (a long-running child announcing itself, a reply). */
export function nextMessage<T>(handle: ChildHandle<unknown>, type: string, timeoutMs = 60_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${type} message within ${timeoutMs} ms`)), timeoutMs);
    let done = false;
    handle.on((message) => {
      if (done || message.type !== type) return;
      done = true;
      clearTimeout(timer);
      resolve(message as T);
    });
    handle.result.catch((error: unknown) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      reject(error instanceof Error ? error : new Error(String(error)));
    });
  });
}

/** In a child: receives the config, runs, reports the result (or the error), exits. */
export function childMain<C, R extends object>(
  run: (
    config: C,
    send: (message: Record<string, unknown>) => void,
    receive: (handler: (message: Record<string, unknown>) => void) => void,
  ) => Promise<R>,
): void {
  const handlers: ((message: Record<string, unknown>) => void)[] = [];
  const send = (message: Record<string, unknown>) => process.send?.(message);
  process.on('message', (message: Record<string, unknown>) => {
    if (message.type === 'run') {
      run(message.config as C, send, (h) => handlers.push(h)).then(
        (result) => {
          process.send!({ type: 'result', ...result }, () => process.exit(0));
        },
        (error: unknown) => {
          process.send!({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) }, () =>
            process.exit(1),
          );
        },
      );
    } else {
      for (const h of handlers) h(message);
    }
  });
  process.on('disconnect', () => process.exit(0));
}

// ------------------------------------------------------------------ HTTP helpers

export async function api<T = any>(
  baseUrl: string,
  method: string,
  route: string,
  body?: unknown,
  key = ADMIN_KEY,
): Promise<{ status: number; body: T }> {
  const response = await fetch(new URL(route, baseUrl), {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
}

export async function graphql<T = any>(
  baseUrl: string,
  query: string,
  variables: Record<string, unknown> = {},
  key = ADMIN_KEY,
): Promise<T> {
  const { status, body } = await api<{ data?: T; errors?: unknown[] }>(baseUrl, 'POST', '/graphql', { query, variables }, key);
  if (status !== 200 || body.errors) throw new Error(`GraphQL failed (${status}): ${JSON.stringify(body.errors ?? body)}`);
  return body.data!;
}

/** The bootstrap admin's default project. */
export async function defaultProject(baseUrl: string): Promise<{ projectId: string; teamId: string }> {
  const data = await graphql<{ me: { defaultTeam: { id: string; projects: { id: string }[] } } }>(
    baseUrl,
    '{ me { defaultTeam { id projects { id } } } }',
  );
  return { projectId: data.me.defaultTeam.projects[0]!.id, teamId: data.me.defaultTeam.id };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 60_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes on one machine. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * For a child process that serves (a floor server): listens on a free
 * loopback port, tells the parent `{ type: 'ready', url, pid }`, and closes
 * the server when the parent sends `{ type: 'stop' }`.
 */
export async function serveUntilStopped(
  server: http.Server,
  send: (message: Record<string, unknown>) => void,
  receive: (handler: (message: Record<string, unknown>) => void) => void,
): Promise<void> {
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  send({ type: 'ready', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, pid: process.pid });
  await new Promise<void>((resolve) => receive((message) => message.type === 'stop' && resolve()));
  server.closeAllConnections();
  server.close();
}

/** `bench/<file>` bundled (its packages left as imports) under node_modules/.cache, where its imports resolve. */
function bundle(file: string): string {
  const outfile = path.join(REPO_ROOT, 'node_modules/.cache/dedicated-endpoints/bench', file.replace(/\.ts$/, '.mjs'));
  buildSync({
    ...NODE_BUNDLE,
    entryPoints: [path.join(BENCH_DIR, file)],
    sourcemap: 'inline',
    logLevel: 'warning',
    outfile,
  });
  return outfile;
}
