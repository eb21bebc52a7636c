/**
 * A throw-away gateway (an ephemeral embedded PostgreSQL, the stand-in hub
 * serving the tests' tiny models, and the real gateway, controller and
 * engines) with an admin user and key: for working on the console and for
 * its screenshots.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
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

export interface Sandbox {
  app: App;
  url: string;
  key: string;
  teamId: string;
  projectId: string;
  stop(): Promise<void>;
}

export async function startSandbox(options: { port?: string; consoleDir?: string } = {}): Promise<Sandbox> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'console-sandbox-'));
  await chmod(dir, 0o755);
  const pg = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), ephemeral: true });
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
    url: app.gateway.url,
    key: key.value.secret,
    teamId: created.value.defaultTeamId!,
    projectId: project.value.id,
    async stop() {
      await app.close();
      // From the runtime's own records, not the database: a terminal's Ctrl-C stops the embedded PostgreSQL too.
      if (app.local) await stopLocalEngines(app.local, { graceMs: 1000 });
      await sql.end({ timeout: 2 });
      await hub.close();
      await pg.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
