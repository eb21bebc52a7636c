/**
 * A prompt that makes the engine crash (here: an engine run through ENGINE_COMMAND that exits on `CRASH`) takes at
 * most two replicas: a request whose replica broke while it had it is tried on one more (the first may have been
 * killed by something else), then answered 502 replica_failed; sent again (a client's retry), it is refused with a
 * 422 for ten minutes without reaching a replica. Without this, each request took three replicas, and two of them
 * failed the endpoint (five deaths in ten minutes) for everyone.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { liveReplicaRows, startTestApp, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { ANSWER_WHOLE_JS } from '../support/scripted-engine.js';

const ENGINE = `
import http from 'node:http';
const port = Number(process.argv[2]);
${ANSWER_WHOLE_JS}
http.createServer((req, res) => {
  if (req.method === 'GET') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', active: 0, queued: 0 }));
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    if (body.includes('CRASH')) process.exit(1);
    answerWhole(res);
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

let dir: string;
let t: TestApp;
let alice: SeededUser;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'poison-prompt-'));
  const script = path.join(dir, 'engine.mjs');
  await writeFile(script, ENGINE);
  t = await startTestApp({ env: { ENGINE_COMMAND: `"${process.execPath}" "${script}" {port}`, CPU_SLOTS: '4' } });
  alice = await t.seed.user();
}, 120_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const chat = (id: string, content: string) =>
  fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: id, messages: [{ role: 'user', content }] }),
  });

test('a prompt that crashes the engine takes two replicas at most: 502 replica_failed, then 422 when sent again', async () => {
  const project = await alice.project('poison');
  const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 3, maxReplica: 3 } });
  await waitForStatus(t.sql, id, 'RUNNING', 60_000);
  const ready = async () => (await liveReplicaRows(t.sql, id)).filter((r) => r.state === 'READY').length;
  await waitFor('three replicas ready', async () => (await ready()) === 3, 60_000);
  const failed = async () =>
    (await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM replicas WHERE endpoint_id = ${id} AND state = 'FAILED'`)[0]!.n;

  const first = await chat(id, 'CRASH');
  expect(first.status).toBe(502);
  expect(((await first.json()) as { error: { code: string } }).error.code).toBe('replica_failed');
  await waitFor('the dead replicas marked', async () => (await failed()) >= 2);
  // Sent again, as a client retries a 5xx: refused, reaching no replica.
  const again = await chat(id, 'CRASH');
  expect(again.status).toBe(422);
  expect(((await again.json()) as { error: { code: string } }).error.code).toBe('request_failed_replicas');
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(await failed()).toBe(2);
  expect((await t.sql<{ status: string }[]>`SELECT status FROM endpoints WHERE id = ${id}`)[0]!.status).not.toBe('FAILED');
  expect((await chat(id, 'hello')).status).toBe(200);
}, 120_000);
