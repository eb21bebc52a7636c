/**
 * Processes starting one embedded PostgreSQL at once (two gateways, a gateway and `npm run admin`): they take turns on
 * the data directory's lock file, so the first initialises and starts the server and the others attach to it, rather
 * than a second initdb failing on the directory the first is filling. A lock left by a killed process is taken over.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { afterEach, expect, test } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/storage/embedded-postgres.js';
import { copyInitialisedDataDir } from '../support/cli-pg-template.js';
import { bundledForFile } from '../support/file-bundle.js';

/**
 * What the children import: src/storage/open-database.ts bundled for this file, so that each child starts with plain
 * Node.js (a second less CPU than tsx's loader); TEST_ENGINE=tsx imports the source through tsx.
 */
const openDatabaseModule = bundledForFile('src/storage/open-database.ts');

/** What a child runs: opens the embedded database as a gateway does, says so, and stays until its input ends. */
const CHILD = `
const { openDatabase } = await import(process.env.OPEN_DATABASE);
try {
  const db = await openDatabase({ databaseUrl: undefined, dataDir: process.env.DATA_DIR });
  const [row] = await db.sql\`SELECT count(*)::int AS n FROM schema_migrations\`;
  console.log(JSON.stringify({ migrations: row.n }));
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.on('end', resolve));
  await db.close();
} catch (error) {
  console.log(JSON.stringify({ failed: String(error).slice(0, 300) }));
  process.exitCode = 1;
}
`;

const dirs: string[] = [];
const children: ChildProcess[] = [];
const servers: EmbeddedDatabase[] = [];

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-embedded-race-'));
  // The server runs as the `postgres` user, which must be able to reach its data directory.
  await chmod(dir, 0o755);
  dirs.push(dir);
  return dir;
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** The postmaster still running on a data directory, if any. */
async function postmaster(pgDir: string): Promise<number | undefined> {
  const pid = Number((await readFile(path.join(pgDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

async function answers(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await sql`SELECT 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

afterEach(async () => {
  // Children close their database when their input ends (the one that started the server stops it).
  for (const child of children.splice(0)) {
    child.stdin?.end();
    if ((await Promise.race([exited(child), sleep(20_000, 'late' as const)])) === 'late') child.kill('SIGKILL');
  }
  for (const server of servers.splice(0)) await server.stop().catch(() => {});
  for (const dir of dirs.splice(0)) {
    // A server a killed child left behind.
    const pid = await postmaster(path.join(dir, 'pg'));
    if (pid !== undefined) {
      process.kill(pid, 'SIGINT');
      while ((await postmaster(path.join(dir, 'pg'))) !== undefined) await sleep(100);
    }
    await rm(dir, { recursive: true, force: true });
  }
}, 60_000);

test('two processes opening one new embedded database at once both open it', async () => {
  const dir = await dataDir();
  const start = () => {
    const loader = process.env.TEST_ENGINE === 'tsx' ? ['--import', 'tsx'] : [];
    const child = spawn(process.execPath, [...loader, '--input-type=module', '-e', CHILD], {
      env: { ...process.env, OPEN_DATABASE: openDatabaseModule.entry(), DATA_DIR: dir },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    return new Promise<unknown>((resolve, reject) => {
      let output = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const line = output.split('\n').find((l) => l.startsWith('{'));
        if (line) resolve(JSON.parse(line));
      });
      child.once('exit', (code) => reject(new Error(`exited with ${code}: ${output}`)));
    });
  };
  const said = await Promise.all([start(), start()]);
  expect(said).toEqual([{ migrations: expect.any(Number) }, { migrations: expect.any(Number) }]);
  expect((said[0] as { migrations: number }).migrations).toBeGreaterThan(0);
  // Both close: the one that started the server stops it, the other leaves it.
  const codes = await Promise.all(children.splice(0).map((child) => (child.stdin!.end(), exited(child))));
  expect(codes).toEqual([0, 0]);
  expect(await postmaster(path.join(dir, 'pg'))).toBeUndefined();
}, 60_000);

test('two starts at once in one process: one starts the server, the other attaches to it', async () => {
  const dir = await dataDir();
  // The lock between the two is the subject: an initialised cluster, copied (the test above races two initdbs on a new
  // one); the second start waits while the first starts the server, as it would through its initdb.
  await copyInitialisedDataDir(path.join(dir, 'pg'));
  const both = await Promise.all([0, 1].map(() => startEmbeddedPostgres({ dataDir: path.join(dir, 'pg') })));
  servers.push(...both);
  expect(both[1]!.adminUrl).toBe(both[0]!.adminUrl);
  expect(await answers(both[0]!.adminUrl)).toBe(true);
  expect(existsSync(path.join(dir, 'pg.lock'))).toBe(false);
}, 60_000);

test('a start waits while a live process holds the lock, and takes over a lock whose process is gone', async () => {
  const dir = await dataDir();
  const pgDir = path.join(dir, 'pg');
  const lockFile = `${pgDir}.lock`;
  // The lock is the subject, not initdb (the first test starts a new cluster): an initialised cluster, copied, starts
  // in a fraction of the time.
  await copyInitialisedDataDir(pgDir);
  // Held by a live process.
  const live = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)']);
  await writeFile(lockFile, `${live.pid} 0123456789abcdef\n`);
  let started = false;
  const starting = startEmbeddedPostgres({ dataDir: pgDir }).then((db) => ((started = true), db));
  await sleep(1_000);
  expect(started).toBe(false);
  await rm(lockFile);
  live.kill();
  const first = await starting;
  expect(await answers(first.adminUrl)).toBe(true);
  await first.stop();
  expect(await postmaster(pgDir)).toBeUndefined();

  // Left by a process that is gone (killed while starting the server).
  const gone = spawn(process.execPath, ['-e', '']);
  await exited(gone);
  await writeFile(lockFile, `${gone.pid}\n`);
  const second = await startEmbeddedPostgres({ dataDir: pgDir });
  expect(await answers(second.adminUrl)).toBe(true);
  expect(existsSync(lockFile)).toBe(false);
  await second.stop();

  // Left by a killed container's main process, whose pid this process has now (a container's first process is pid 1
  // in every container): another process by its token, so gone.
  await writeFile(lockFile, `${process.pid} fedcba9876543210\n`);
  const third = await startEmbeddedPostgres({ dataDir: pgDir });
  servers.push(third);
  expect(await answers(third.adminUrl)).toBe(true);
  expect(existsSync(lockFile)).toBe(false);
}, 90_000);
