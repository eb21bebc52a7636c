/**
 * A throw-away gateway for working on the web console: an ephemeral embedded
 * PostgreSQL, the stand-in hub serving the tests' tiny models, and the real
 * gateway, controller and engines. Prints the console's URL and an API key.
 *
 *   npx tsx scripts/console-sandbox.ts            # then open the URL
 *   PORT=8080 npx tsx scripts/console-sandbox.ts  # a fixed port (for `npm run console:dev`)
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { connectDatabase, migrate } from '../src/storage/database.js';
import { ensureDatabase, startEmbeddedPostgres } from '../src/storage/embedded-postgres.js';
import { FAKE_HUB_TOKEN, startFakeHub } from '../test/support/fake-hub.js';
import { buildTinyGguf } from '../test/support/tiny-gguf.js';

const TINY_REPO = 'test-org/tiny-llama-GGUF';

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
    { id: 'test-org/short-context-GGUF', files: { 'short-Q8_0.gguf': buildTinyGguf({ contextLength: 256, seed: 3 }) } },
  ],
});
const config = loadConfig({
  DATA_DIR: path.join(dir, 'data'),
  PORT: process.env.PORT ?? '0',
  HOST: '127.0.0.1',
  HF_ENDPOINT: hub.url,
  HF_TOKEN: FAKE_HUB_TOKEN,
  CPU_SLOTS: '2',
  ENGINE_THREADS: '1',
  CONTROLLER_INTERVAL_MS: '250',
});
const app = await startApp(config, sql, { log: () => undefined });
const created = await app.services.identity.createUser('system', { email: 'dev@example.com', name: 'Dev', isAdmin: true });
if (created.type === 'error') throw new Error(created.error.message);
const key = await app.services.identity.createApiKey('system', { name: 'sandbox', user: created.value.id });
if (key.type === 'error') throw new Error(key.error.message);
console.log(
  `console   ${app.gateway.url}/\nAPI key   ${key.value.secret}\nhub repos ${TINY_REPO}, test-org/short-context-GGUF (256-token context)\nCtrl-C stops everything.`,
);

const stop = async () => {
  await app.close();
  const rows = await sql<{ id: string; address: string; pid: number; node: string }[]>`
    SELECT id, address, pid, node FROM replicas WHERE state IN ('STARTING', 'READY', 'DRAINING') AND pid IS NOT NULL`;
  await Promise.all(rows.map((r) => app.runtime.stop({ replicaId: r.id, address: r.address, pid: r.pid, node: r.node }, 1000)));
  await sql.end({ timeout: 2 });
  await hub.close();
  await pg.stop();
  await rm(dir, { recursive: true, force: true });
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
