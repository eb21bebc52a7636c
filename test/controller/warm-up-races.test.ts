/**
 * A user's action while an endpoint's first replica warms up (the endpoint shows READY): an update, a sleep then a
 * wake. The engine is an OpenAI-compatible server run through ENGINE_COMMAND (a few lines below): its /health answers
 * at once; its chat answers (the warm-up) wait, when the file `hold-<mbs>` exists, until `go-<mbs>` exists, then
 * answer the status written in it. With `sigterm-<mbs>`, SIGTERM answers a held request 500 and the engine keeps
 * running (the gateway's stop then kills it), as engines that abort their requests on SIGTERM do. Each test's
 * endpoint has its own max_batch_size, so its engine reads its own files; an update that changes it starts engines
 * that read others'.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { liveReplicaRows, startTestApp, statusOf, statusTrail, TINY_REPO, waitFor, waitForStatus, type TestApp } from '../support/app.js';
import type { SeededProject, SeededUser } from '../support/gateway.js';
import { ANSWER_WHOLE_JS } from '../support/scripted-engine.js';

const ENGINE = `
import http from 'node:http';
import { existsSync, readFileSync } from 'node:fs';
const [port, dir, mbs] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const held = new Set();
${ANSWER_WHOLE_JS}
http.createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ status: 'ok', active: 0, queued: 0 }));
  }
  req.resume();
  req.on('end', () => {
    if (!existsSync(dir + '/hold-' + mbs)) return answerWhole(res, 200);
    held.add(res);
    const t = setInterval(() => {
      if (!held.has(res)) return clearInterval(t);
      if (existsSync(dir + '/go-' + mbs)) {
        clearInterval(t);
        held.delete(res);
        answerWhole(res, Number(readFileSync(dir + '/go-' + mbs, 'utf8')));
      }
    }, 50);
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => {
  if (existsSync(dir + '/sigterm-' + mbs)) {
    for (const res of held) answerWhole(res, 500);
    held.clear();
    return; // keeps running
  }
  process.exit(0);
});
`;

let dir: string;
let app: TestApp;
let user: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'warm-up-races-'));
  const script = path.join(dir, 'engine.mjs');
  await writeFile(script, ENGINE);
  app = await startTestApp({ env: { ENGINE_COMMAND: `"${process.execPath}" "${script}" {port} "${dir}" {maxBatchSize}` } });
  user = await app.seed.user();
  project = await user.project('warm-up-races');
}, 120_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const create = (mbs: number) =>
  project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 }, advanced: { max_batch_size: mbs } });

test('an update while the first replica warms up, whose warm-up then fails: the endpoint starts the new version, it does not fail', async () => {
  await writeFile(path.join(dir, 'hold-4'), '');
  const id = await create(4);
  await waitForStatus(app.sql, id, 'READY', 60_000);
  const res = await user.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 5 } });
  expect(res.status).toBe(200);
  expect((await statusOf(app.sql, id)).status).toBe('UPDATING');
  await new Promise((r) => setTimeout(r, 1000));
  await writeFile(path.join(dir, 'go-4'), '500');
  await waitFor(
    'settled',
    async () => {
      const s = await statusOf(app.sql, id);
      return s.status === 'FAILED' || (s.status === 'RUNNING' && (await liveReplicaRows(app.sql, id)).some((r) => r.version_index === 1));
    },
    60_000,
  );
  const s = await statusOf(app.sql, id);
  expect(s.status, JSON.stringify(await statusTrail(app.sql, id))).toBe('RUNNING');
  expect(s.errorCode).toBeNull();
  const [row] = await app.sql<{ desired_state: string }[]>`SELECT desired_state FROM endpoints WHERE id = ${id}`;
  expect(row!.desired_state).toBe('RUNNING');
  const versions = await app.sql`SELECT version_index, rollout_state FROM endpoint_versions WHERE endpoint_id = ${id} ORDER BY 1`;
  expect(versions.at(-1)).toMatchObject({ version_index: 1, rollout_state: 'ROLLED_OUT' });
});

test('an update while the first replica warms up, whose warm-up then succeeds: UPDATING until the new version serves, no RUNNING between', async () => {
  await writeFile(path.join(dir, 'hold-6'), '');
  const id = await create(6);
  await waitForStatus(app.sql, id, 'READY', 60_000);
  await user.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 7 } });
  await new Promise((r) => setTimeout(r, 1000));
  await writeFile(path.join(dir, 'go-6'), '200');
  await waitFor(
    'v1 serving',
    async () => {
      const s = await statusOf(app.sql, id);
      const rows = await liveReplicaRows(app.sql, id);
      return s.status === 'RUNNING' && rows.length === 1 && rows[0]!.version_index === 1 && rows[0]!.state === 'READY';
    },
    60_000,
  );
  expect((await statusTrail(app.sql, id)).slice(-3)).toEqual(['READY', 'UPDATING', 'RUNNING']);
});

test("a sleep while the first replica warms up, whose stop fails the warm-up; then a wake: it wakes, the stopped start's failure is not told", async () => {
  await writeFile(path.join(dir, 'hold-8'), '');
  await writeFile(path.join(dir, 'sigterm-8'), '');
  const id = await create(8);
  await waitForStatus(app.sql, id, 'READY', 60_000);
  expect((await user.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`)).status).toBe(200);
  await waitFor('no live replica', async () => (await liveReplicaRows(app.sql, id)).length === 0, 30_000);
  await waitForStatus(app.sql, id, 'SLEEPING', 30_000);
  await rm(path.join(dir, 'hold-8'));
  await new Promise((r) => setTimeout(r, 1500));
  expect((await user.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`)).status).toBe(200);
  await waitFor('settled', async () => ['FAILED', 'RUNNING'].includes((await statusOf(app.sql, id)).status), 60_000);
  expect((await statusOf(app.sql, id)).status, JSON.stringify(await statusTrail(app.sql, id))).toBe('RUNNING');
});

test('an update of the name alone while the first replica warms up, whose warm-up then fails: the endpoint fails (the new version would start the same)', async () => {
  await writeFile(path.join(dir, 'hold-10'), '');
  const id = await create(10);
  await waitForStatus(app.sql, id, 'READY', 60_000);
  expect((await user.rest('PUT', `/dedicated/beta/endpoint/${id}`, { name: 'renamed' })).status).toBe(200);
  await new Promise((r) => setTimeout(r, 1000));
  await writeFile(path.join(dir, 'go-10'), '500');
  await waitForStatus(app.sql, id, 'FAILED', 60_000);
  expect((await statusOf(app.sql, id)).errorCode).toBe('INFERENCE_ENGINE_UNKNOWN_ERROR');
});
