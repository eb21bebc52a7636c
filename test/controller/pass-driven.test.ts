/**
 * No pass waits for a replica to start: the controller places a replica and
 * returns, and each pass reads how its start goes. An engine that loads for
 * as long as the test wants (its health answers 503 until a file exists)
 * shows it: a terminate, a sleep or an update given while the engine loads
 * takes effect at once, the loading engine stopped, instead of after the load
 * (an update of what only the gateway reads keeps it).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { liveReplicaRows, startTestApp, statusOf, TINY_REPO, waitFor, waitForStatus, type TestApp } from '../support/app.js';
import type { SeededProject, SeededUser } from '../support/gateway.js';

/** Listens at once; /health answers 503 (loading) until the file named by its second argument exists. */
const ENGINE = `
import http from 'node:http';
import { existsSync } from 'node:fs';
const [port, go] = [Number(process.argv[2]), process.argv[3]];
http.createServer((req, res) => {
  const ready = existsSync(go);
  if (req.method === 'GET') {
    res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ status: ready ? 'ok' : 'loading', active: 0, queued: 0 }));
  }
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

let dir: string;
let go: string;
let app: TestApp;
let user: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pass-driven-'));
  const script = path.join(dir, 'engine.mjs');
  go = path.join(dir, 'go');
  await writeFile(script, ENGINE);
  app = await startTestApp({ env: { ENGINE_COMMAND: `"${process.execPath}" "${script}" {port} "${go}"` } });
  user = await app.seed.user();
  project = await user.project('pass-driven');
}, 120_000);

// The app closes itself when the file ends (startTestApp's clean-up).
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Whether a replica's engine process still runs (its pid, from the row). */
function running(pid: number | null): boolean {
  if (!pid) return false;
  try {
    process.kill(Number(pid), 0);
    return true;
  } catch {
    return false;
  }
}

/** An endpoint whose first replica's engine is loading (placed, phase ENGINE_INITIALIZING), and that replica's row. */
async function loading() {
  const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
  await waitFor('the engine to load', async () => (await statusOf(app.sql, id)).phase === 'ENGINE_INITIALIZING', 60_000);
  const [replica] = await waitFor('the replica placed', async () => {
    const rows = await liveReplicaRows(app.sql, id);
    return rows.length === 1 && rows[0]!.pid ? rows : undefined;
  });
  expect(replica!.state).toBe('STARTING');
  expect(running(replica!.pid)).toBe(true);
  return { id, replica: replica! };
}

describe('while an engine loads', () => {
  test('a terminate takes effect at once: TERMINATED, the loading engine stopped', async () => {
    const { id, replica } = await loading();
    const asked = Date.now();
    expect((await user.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`)).status).toBe(200);
    await waitForStatus(app.sql, id, 'TERMINATED', 10_000);
    expect(Date.now() - asked).toBeLessThan(10_000);
    expect(await liveReplicaRows(app.sql, id)).toEqual([]);
    await waitFor('the engine to exit', async () => !running(replica.pid), 5_000);
  });

  test('an update of what only the gateway reads (the name, the autoscaling policy) keeps the loading engine: it serves as the new version', async () => {
    const { id, replica } = await loading();
    const update = { name: 'renamed-while-loading', autoscalingPolicy: { minReplica: 1, maxReplica: 2, cooldownPeriod: 60 } };
    expect((await user.rest('PUT', `/dedicated/beta/endpoint/${id}`, update)).status).toBe(200);
    await waitFor(
      'the loading replica handed to the new version',
      async () => (await liveReplicaRows(app.sql, id)).find((r) => r.id === replica.id && r.version_index === 1),
      10_000,
    );
    expect(running(replica.pid)).toBe(true);
    await writeFile(go, '');
    await waitForStatus(app.sql, id, 'RUNNING', 30_000);
    expect(await liveReplicaRows(app.sql, id)).toMatchObject([{ id: replica.id, state: 'READY', version_index: 1 }]);
    // The version it serves records the model that replica's start resolved.
    const [version] = await app.sql`SELECT rollout_state, model FROM endpoint_versions WHERE endpoint_id = ${id} AND version_index = 1`;
    expect(version).toMatchObject({ rollout_state: 'ROLLED_OUT', model: expect.objectContaining({ source: 'hf' }) });
    const [stopped] = await app.sql`SELECT count(*)::int AS n FROM replicas WHERE endpoint_id = ${id} AND state = 'STOPPED'`;
    expect(stopped!.n).toBe(0);
    await rm(go);
  });

  test('an update starts the new version at once: the old version’s loading engine is stopped, not waited for', async () => {
    const { id, replica } = await loading();
    expect((await user.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 2 } })).status).toBe(200);
    const fresh = await waitFor(
      'a replica of the new version',
      async () => (await liveReplicaRows(app.sql, id)).find((r) => r.version_index === 1 && r.pid),
      10_000,
    );
    expect((await liveReplicaRows(app.sql, id)).map((r) => r.id)).toEqual([fresh.id]);
    await waitFor('the old engine to exit', async () => !running(replica.pid), 5_000);
    // Once the engine answers, the new version serves.
    await writeFile(go, '');
    await waitForStatus(app.sql, id, 'RUNNING', 30_000);
    expect(await liveReplicaRows(app.sql, id)).toMatchObject([{ id: fresh.id, state: 'READY', version_index: 1 }]);
    await rm(go);
  });
});
