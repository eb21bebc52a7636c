/**
 * What Ctrl-C leaves running (issue 19): the real gateway process (src/main.ts,
 * as `npm start` runs it) serving the tiny model. One Ctrl-C closes the
 * gateway, names the engine it leaves running (endpoint, replica, pid, port)
 * and says that the next start adopts it; the engine still answers, and the
 * next start does adopt it. Ctrl-C twice stops the engine too, and its replica
 * is marked STOPPED, so the start after that runs a fresh engine. `npm run
 * stop-engines` refuses while a gateway runs, and stops what a gateway left.
 * (engines-on-exit-embedded.test.ts: the same with the embedded database.)
 */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { engineFetch, liveReplicaRows, standardRepos, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';
import { bundledForFile } from '../support/file-bundle.js';
import { startGatewayProcess, isRunning, gatewayExited as exited } from '../support/processes.js';

const ADMIN_KEY = 'test_engines_on_exit_admin_key_0123';

let db: TestDatabase;
let hub: FakeHub;
let dataDir: string;
let env: Record<string, string>;
let endpointId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  hub = await startFakeHub({ repos: standardRepos() });
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-engines-on-exit-'));
  await chmod(dataDir, 0o755);
  env = testEnv(dataDir, hub.url, { DATABASE_URL: db.dbUrl, ADMIN_API_KEY: ADMIN_KEY, ENGINE_IDLE_EXIT_MS: '120000' });
}, 120_000);

/** No engine outlives the file, whatever failed: every pid the database ever recorded is killed with its group. */
afterAll(async () => {
  if (!db) return;
  for (const row of await db.sql<{ pid: number }[]>`SELECT locator::int AS pid FROM replicas WHERE locator IS NOT NULL`) {
    for (const target of [-row.pid, row.pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
  await hub.close();
  await db.close();
  await rm(dataDir, { recursive: true, force: true });
}, 60_000);

function readyReplica(id: string) {
  return waitFor(`a READY replica of ${id}`, async () => (await liveReplicaRows(db.sql, id)).find((r) => r.state === 'READY'), 60_000);
}

async function replicaRow(id: string) {
  const [row] = await db.sql<{ state: string; last_error: string | null }[]>`SELECT state, last_error FROM replicas WHERE id = ${id}`;
  return row!;
}

/** `npm run stop-engines`'s own command: the CLI's source through tsx. */
const STOP_ENGINES_SOURCE = ['--import', 'tsx', 'src/cli/stop-engines.ts'];

/** The same CLI bundled for this file (a second less CPU a call than tsx's loader; TEST_ENGINE=tsx runs the source). */
const stopEnginesBundle = bundledForFile('src/cli/stop-engines.ts');

/** Runs stop-engines: the first call by `npm run stop-engines`'s own command, the others from the file's bundle. */
function stopEngines(entry = stopEnginesBundle.node()): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, entry, { env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('stopping npm start', () => {
  test('Ctrl-C names the engine it leaves running, which keeps answering; the next start adopts it', async () => {
    // One Ctrl-C: the gateway waits out the second-Ctrl-C window before it exits; 1 s here (the least the setting
    // accepts), instead of 5.
    const first = await startGatewayProcess({ ...env, SECOND_SIGNAL_WINDOW_MS: '1000' });
    const rest = restClient(first.url, ADMIN_KEY);
    const [project] = await db.sql<{ id: string }[]>`SELECT id FROM projects ORDER BY created_at LIMIT 1`;
    const created = await rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(project!.id, { hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    endpointId = created.body.endpointId as string;
    const replica = await readyReplica(endpointId);

    // One keypress often arrives twice (the terminal signals the process group, and npm relays it): still one Ctrl-C.
    first.child.kill('SIGINT');
    await sleep(20);
    first.child.kill('SIGINT');
    expect(await exited(first)).toBe(0);
    const said = first.output();
    expect(said).not.toContain('SIGINT again');
    expect(said).toContain('SIGINT: shutting down; engines keep running for the next start (press Ctrl-C again to stop them too)');
    expect(said).toContain('Left running: 1 engine');
    expect(said).toContain(`${endpointId}  replica ${replica.id}  pid ${replica.pid}  port ${new URL(replica.address).port}`);
    expect(said).toContain('The next `npm start` on this database');
    expect(said).toContain('exits by itself after 2 min (ENGINE_IDLE_EXIT_MS=120000)');
    expect(said).toContain('npm run stop-engines');
    expect(said).toContain('Press Ctrl-C again within 1 s to stop them as well.');
    // Through the logger too: one JSON line with the engines as fields.
    const logged = said
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { enginesLeftRunning?: { replicaId: string; pid: number }[] })
      .find((l) => l.enginesLeftRunning);
    expect(logged?.enginesLeftRunning).toEqual([expect.objectContaining({ replicaId: replica.id, endpointId, pid: replica.pid })]);

    expect(await isRunning(replica.pid)).toBe(true);
    expect((await engineFetch(replica, '/health')).status).toBe(200);
    expect((await replicaRow(replica.id)).state).toBe('READY');

    // The next start adopts it: the same replica serves a chat request, and no other engine starts.
    const second = await startGatewayProcess(env);
    const chat = await restClient(second.url, ADMIN_KEY)('POST', '/dedicated/v1/chat/completions', {
      model: endpointId,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4,
    });
    expect(chat.status, JSON.stringify(chat.body)).toBe(200);
    const live = await liveReplicaRows(db.sql, endpointId);
    expect(live.map((r) => r.id)).toEqual([replica.id]);

    // Ctrl-C twice: the engine is stopped too, and its replica marked STOPPED.
    second.child.kill('SIGINT');
    await waitFor('the second-Ctrl-C hint', async () => second.output().includes('Press Ctrl-C again within'), 20_000);
    await sleep(200); // a person reads the hint first; a signal within 150 ms of the first would be the same keypress
    second.child.kill('SIGINT');
    expect(await exited(second)).toBe(0);
    expect(second.output()).toContain('SIGINT again: stopping the engines too');
    expect(second.output()).toContain(`Stopped 1 engine(s); their replicas are marked STOPPED`);
    expect(await isRunning(replica.pid)).toBe(false);
    expect(await replicaRow(replica.id)).toMatchObject({ state: 'STOPPED', last_error: expect.stringContaining('stopped on request') });
  }, 120_000);

  test('npm run stop-engines refuses while a gateway runs, and stops what a gateway left; the next start runs a fresh engine', async () => {
    const before = new Set((await db.sql<{ id: string }[]>`SELECT id FROM replicas`).map((r) => r.id));
    const third = await startGatewayProcess(env);
    // The STOPPED replica is not adopted: a fresh one starts.
    const fresh = await readyReplica(endpointId);
    expect(before.has(fresh.id)).toBe(false);

    const refused = await stopEngines(STOP_ENGINES_SOURCE);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`using the database: `);
    expect(refused.stderr).toContain('a gateway is running on this database');
    expect(await isRunning(fresh.pid)).toBe(true);

    // SIGTERM (a service manager): no second-signal window, the engine is left running and named.
    third.child.kill('SIGTERM');
    expect(await exited(third)).toBe(0);
    expect(third.output()).toContain(`${endpointId}  replica ${fresh.id}  pid ${fresh.pid}`);
    expect(third.output()).not.toContain('Press Ctrl-C again');
    expect(await isRunning(fresh.pid)).toBe(true);

    const stopped = await stopEngines();
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stdout).toContain('Stopped 1 engine(s); their replicas are marked STOPPED');
    expect(stopped.stdout).toContain(`${endpointId}  replica ${fresh.id}  pid ${fresh.pid}`);
    expect(await isRunning(fresh.pid)).toBe(false);
    expect((await replicaRow(fresh.id)).state).toBe('STOPPED');

    const again = await stopEngines();
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('No engines were running on this machine.');
  }, 120_000);

  test('STOP_ENGINES_ON_EXIT=1: SIGTERM stops the engines too', async () => {
    const fourth = await startGatewayProcess({ ...env, STOP_ENGINES_ON_EXIT: '1' });
    const replica = await readyReplica(endpointId);
    fourth.child.kill('SIGTERM');
    expect(await exited(fourth)).toBe(0);
    expect(fourth.output()).toContain('SIGTERM: shutting down; the engines are stopped too (STOP_ENGINES_ON_EXIT)');
    expect(fourth.output()).toContain(`${endpointId}  replica ${replica.id}  pid ${replica.pid}`);
    expect(await isRunning(replica.pid)).toBe(false);
    expect((await replicaRow(replica.id)).state).toBe('STOPPED');
  }, 60_000);
});
