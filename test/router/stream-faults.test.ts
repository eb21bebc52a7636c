/**
 * A replica's answers gone wrong, end to end through a real gateway whose engine is a small OpenAI-compatible server
 * run through ENGINE_COMMAND (one max_batch_size 1 replica per endpoint, so that a slot not given back shows at once):
 * a 503 met while the database is away (the slot goes back), an engine's error event then [DONE] (recorded as its
 * error), an event that never ends (cut, upstream_invalid), a whole answer larger than the request can produce (502
 * upstream_invalid), and an engine that stops sending mid-answer (cut after ENGINE_IDLE_TIMEOUT_MS, its slot freed).
 *
 * The engine: `UNAVAIL` is answered 503 (a stopping engine) once the test writes `release-503` in its directory;
 * `ERRAFTER` streams a token, the engine's error event, then [DONE]; `NOBLANK` streams 4 MiB of a data line without
 * its blank line; `HUGE` answers 8 MiB of JSON, `HUGEERR` an 8 MiB error body; `STALL` streams a token and then
 * nothing. It appends what it does to `engine.log`.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import { waitFor, type SeededUser, type TestApp } from '../support/app.js';
import { engineScript, singleSlotEndpoints, startScriptedApp } from '../support/scripted-engine.js';

const ENGINE = engineScript(`
const onRequest = (req, res, request, text) => {
  if (text.includes('UNAVAIL')) {
    note('unavail received');
    const answer = () => existsSync(dir + '/release-503')
      ? res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'stopping', type: 'server_error', param: null, code: 'engine_shutting_down' } }))
      : setTimeout(answer, 20);
    return answer();
  }
  if (request.stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: ' + chunk('hi') + '\\n\\n');
    if (text.includes('ERRAFTER')) {
      res.write('data: {"error":{"message":"The generation failed","type":"server_error","param":null,"code":"generation_failed"}}\\n\\n');
      return res.end('data: [DONE]\\n\\n');
    }
    if (text.includes('NOBLANK')) {
      res.write('data: {"id":"c","choices":[{"delta":{"content":"');
      return pump(res, 'y'.repeat(64 * 1024), 64, () => res.end());
    }
    if (text.includes('STALL')) {
      note('stalling');
      return res.on('close', () => note('stall closed'));
    }
    return res.end('data: [DONE]\\n\\n');
  }
  if (text.includes('HUGE')) {
    res.writeHead(text.includes('HUGEERR') ? 500 : 200, { 'content-type': 'application/json' });
    res.write('{"error":{"message":"');
    return pump(res, 'z'.repeat(64 * 1024), 128, () => res.end('"}}'));
  }
  answerWhole(res);
};
`);

const IDLE_MS = 1000;
let t: TestApp;
let dir: string;
let engineLog: () => Promise<string>;
let alice: SeededUser;
let endpoints: string[] = [];

beforeAll(async () => {
  ({ t, dir, engineLog } = await startScriptedApp('stream-faults', ENGINE, {
    QUEUE_TIMEOUT_MS: '3000',
    ENGINE_IDLE_TIMEOUT_MS: String(IDLE_MS),
  }));
  alice = await t.seed.user();
  endpoints = await singleSlotEndpoints(t, alice, 'faults', 3);
}, 120_000);

const chat = (id: string, content: string, extra: Record<string, unknown> = {}) =>
  fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: id, messages: [{ role: 'user', content }], ...extra }),
  });

/** The request log's row of the latest request to `id` that reached a replica, once written. */
async function lastRow(id: string, count: number) {
  return waitFor(`request ${count} of ${id} recorded`, async () => {
    const rows = await t.sql<{ http_status: number; error_code: string | null; cancelled: boolean }[]>`
      SELECT http_status, error_code, cancelled FROM request_log WHERE endpoint_id = ${id} ORDER BY started_at`;
    return rows.length >= count ? rows[count - 1] : undefined;
  });
}

test('a replica that answers 503 while the database is away: the slot goes back, and the endpoint serves once it returns', async () => {
  const id = endpoints[0]!;
  expect((await chat(id, 'hello')).status).toBe(200);
  const access = t.app.services.chatAccess as unknown as { db: unknown };
  const real = access.db;
  const answer = chat(id, 'UNAVAIL');
  await waitFor('the engine to hold the request', async () => (await engineLog()).includes('unavail received'), 10_000);
  // The database goes away; then the replica answers 503, and dispatch looks at the endpoint afresh (a read that throws).
  const closed = Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' });
  // Each query fails as a dropped connection's does (marked handled: some are fire-and-forget, and only awaited ones matter).
  const failing = () => {
    const query = Promise.reject(closed);
    query.catch(() => {});
    return query;
  };
  access.db = Object.assign(failing, { unsafe: failing });
  let first: Response;
  try {
    await writeFile(path.join(dir, 'release-503'), '');
    first = await answer;
  } finally {
    access.db = real;
  }
  expect(first.status).toBe(503);
  expect((await first.json()) as unknown).toMatchObject({ error: { code: 'database_unavailable' } });
  // The one slot is free again: the next request is served (not queued until QUEUE_TIMEOUT_MS, then 429).
  const next = await chat(id, 'hello');
  expect(next.status).toBe(200);
}, 60_000);

test("an engine's error event then [DONE]: relayed as it is, recorded as the engine's error (502), not a success", async () => {
  const id = endpoints[2]!;
  const res = await chat(id, 'ERRAFTER', { stream: true });
  expect(await res.text()).toContain('"code":"generation_failed"');
  expect(await lastRow(id, 1)).toEqual({ http_status: 502, error_code: 'generation_failed', cancelled: false });
}, 60_000);

test('an event that never ends is cut past the answer bound: the cut events, recorded as upstream_invalid', async () => {
  const id = endpoints[2]!;
  const res = await chat(id, 'NOBLANK', { stream: true });
  const text = await res.text();
  expect(text.length).toBeLessThan(2 * 1024 * 1024);
  expect(text).toMatch(/data: \{"error":\{[^\n]*"code":"upstream_disconnected"\}\}\n\ndata: \[DONE\]\n\n$/);
  expect(await lastRow(id, 2)).toEqual({ http_status: 502, error_code: 'upstream_invalid', cancelled: false });
}, 60_000);

test('a whole answer, or error body, larger than the request can produce: 502 upstream_invalid, recorded as such', async () => {
  const id = endpoints[2]!;
  for (const [n, prompt] of [
    [3, 'HUGE'],
    [4, 'HUGEERR'],
  ] as const) {
    const res = await chat(id, prompt);
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: { code: 'upstream_invalid', type: 'server_error' } });
    expect(await lastRow(id, n)).toEqual({ http_status: 502, error_code: 'upstream_invalid', cancelled: false });
  }
}, 60_000);

test('an engine that stops sending mid-answer is cut after ENGINE_IDLE_TIMEOUT_MS: the cut events, and its slot goes back', async () => {
  const id = endpoints[1]!;
  const res = await chat(id, 'STALL', { stream: true });
  // The stream ends by itself (the client waits as long as it takes), with the cut events.
  const text = await res.text();
  expect(text).toMatch(/"code":"upstream_disconnected"\}\}\n\ndata: \[DONE\]\n\n$/);
  await waitFor('the engine to see the request closed', async () => (await engineLog()).includes('stall closed'), 10_000);
  expect(await lastRow(id, 1)).toMatchObject({ error_code: 'upstream_disconnected' });
  expect((await chat(id, 'hello')).status).toBe(200);
}, 60_000);
