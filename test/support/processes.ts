/**
 * Gateway processes for tests: `src/main.ts` run as a child process, as `npm start` runs it, but from the run's
 * bundle of it (test/support/global-setup.ts) with plain Node.js: the same code, started with about a second less CPU
 * than through tsx's loader, which compiles and resolves each source file. TEST_ENGINE=tsx runs the source through
 * tsx, as `npm start` does; test/cli/admin.test.ts starts `npm start`'s own command.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, inject } from 'vitest';
import { testEnv } from './app.js';
import { onCleanup } from './cleanup.js';
import type { Sql } from '../../src/storage/database.js';
import { createTestDatabase, type TestDatabase } from './database.js';

/** The gateway's entry: the run's bundle, or (TEST_ENGINE=tsx) its source through tsx. */
const gatewayEntry = () => (process.env.TEST_ENGINE === 'tsx' ? ['--import', 'tsx', 'src/main.ts'] : [inject('gatewayBundle')]);

export interface GatewayProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** The gateways this test file started and has not stopped: stopped together (each drains) when it ends. */
const running = new Set<() => Promise<void>>();

async function stopAll(): Promise<void> {
  const stops = [...running];
  running.clear();
  await Promise.all(stops.map((stop) => stop()));
}

export function startGatewayProcess(env: Record<string, string>): Promise<GatewayProcess> {
  return new Promise((resolve, reject) => {
    // TEST_GATEWAY_EXEC_ARGV: Node.js flags for every gateway a test starts (e.g. `--cpu-prof --cpu-prof-dir=DIR`).
    const flags = (process.env.TEST_GATEWAY_EXEC_ARGV ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...flags, ...gatewayEntry()], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const stop = () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once('exit', () => done());
        child.kill('SIGTERM');
      });
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Serving on (http:\/\/[\d.:]+)/.exec(output);
      if (match) {
        child.stdout!.off('data', onData);
        child.stdout!.on('data', (more: Buffer) => (output += more.toString()));
        const handle: GatewayProcess = { url: match[1]!, child, output: () => output, stop };
        if (running.size === 0) onCleanup(stopAll);
        running.add(stop);
        resolve(handle);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code}:\n${output}`)));
  });
}

/** The gateway process's exit code once it has exited (at once when it has already). */
export function gatewayExited(gateway: GatewayProcess): Promise<number | null> {
  const { child } = gateway;
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** SIGKILL to every engine whose pid the database's replicas record: spawned detached, engines outlive their gateway. */
export async function killRecordedEngines(sql: Sql): Promise<void> {
  for (const row of await sql<{ pid: number }[]>`SELECT locator::int AS pid FROM replicas WHERE locator IS NOT NULL`) {
    try {
      process.kill(row.pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

/** Whether a process runs (a zombie, dead but not yet reaped by whoever inherited it, does not). */
export async function isRunning(pid: number): Promise<boolean> {
  try {
    return !/^\d+ \(.*\) [ZX]/s.test(await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * For a file whose tests start gateway processes that need no hub: a database and a data directory of the file's own
 * (made before its tests, removed after), and the environment that starts a gateway on them. Read `db` and `env` in
 * the tests, not at the module's top level.
 */
export function gatewayProcessSetting(
  prefix: string,
  adminKey: string,
): { readonly db: TestDatabase; readonly env: Record<string, string> } {
  const setting = {} as { db: TestDatabase; env: Record<string, string>; dir?: string };
  beforeAll(async () => {
    setting.db = await createTestDatabase();
    setting.dir = await mkdtemp(path.join(os.tmpdir(), `${prefix}-`));
    setting.env = testEnv(setting.dir, 'http://127.0.0.1:9', { DATABASE_URL: setting.db.dbUrl, ADMIN_API_KEY: adminKey });
  }, 120_000);
  afterAll(async () => {
    await setting.db?.close();
    if (setting.dir) await rm(setting.dir, { recursive: true, force: true });
  });
  return setting;
}
