/**
 * A gateway process stopping on SIGTERM (src/main.ts as `npm start` runs it): what its drain does with GraphQL chat
 * completions and with requests still waiting when its bound comes (src/http/drain.ts, src/router/drain-waits.ts).
 * Its engines run through ENGINE_COMMAND (below): with max_batch_size 3 one never starts listening (its endpoint
 * never serves: requests to it are held); otherwise it streams 5 tokens, the first at once, the rest once the test
 * writes a `release` file.
 *
 * - A chat completion streamed by the GraphQL subscription, over graphql-ws and over SSE, finishes like a REST one:
 *   an endless subscription on the same socket is completed at once, and the socket closed with 1001 only once the
 *   chat has ended. Before: the socket was closed with 1001, and the SSE stream ended, as the drain began.
 * - Requests still queued for a slot, or held for an endpoint that does not serve yet, when the drain's bound comes
 *   are answered 503 with Retry-After (REST: the OpenAI error body; GraphQL: the chat's error), to be retried on
 *   another gateway. Before: their connections were cut at the bound (and GraphQL's were ended at its start).
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, onTestFinished, test } from 'vitest';
import { liveReplicaRows, standardRepos, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';
import { openSocket, openSse } from '../support/live-clients.js';
import { startGatewayProcess, type GatewayProcess, gatewayExited as exited, killRecordedEngines } from '../support/processes.js';
import { ANSWER_WHOLE_JS, CHUNK_JS, STREAM_RELEASED_JS } from '../support/scripted-engine.js';

const ADMIN_KEY = 'test_drain_chat_queued_admin_key_0123';
const TOKENS = ['one', 'two', 'three', 'four', 'five'];

const ENGINE = `
import http from 'node:http';
import { existsSync } from 'node:fs';
const [port, dir, batch] = [Number(process.argv[2]), process.argv[3], Number(process.argv[4])];
${CHUNK_JS}
${ANSWER_WHOLE_JS}
${STREAM_RELEASED_JS}
const tokens = ${JSON.stringify(TOKENS)};
// The endpoint that never serves: its engine never answers its health check.
if (batch === 3) setInterval(() => {}, 1 << 30);
else http.createServer((req, res) => {
  if (req.method === 'GET') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', active: 0, queued: 0 }));
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    if (req.url === '/tokenize') {
      return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: 1, tokens: [1], max_model_len: 4096, max_input_length: 4096 }));
    }
    if (!JSON.parse(body).stream) return answerWhole(res);
    streamReleased(res, tokens);
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

const CHAT = `subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { choices { delta { content } } } }`;
const EVENTS = 'subscription($p: ID!) { endpointEvents(projectId: $p) { id } }';

let db: TestDatabase;
let hub: FakeHub;
let dir: string;
let env: Record<string, string>;
let projectId: string;
const endpoints = new Map<string, string>();

beforeAll(async () => {
  db = await createTestDatabase();
  hub = await startFakeHub({ repos: standardRepos() });
  dir = await mkdtemp(path.join(os.tmpdir(), 'drain-chat-'));
  await chmod(dir, 0o755);
  const script = path.join(dir, 'engine.mjs');
  await writeFile(script, ENGINE);
  env = testEnv(dir, hub.url, {
    DATABASE_URL: db.dbUrl,
    ADMIN_API_KEY: ADMIN_KEY,
    ENGINE_COMMAND: `"${process.execPath}" "${script}" {port} "${dir}" {maxBatchSize}`,
    STOP_ENGINES_ON_EXIT: '1',
    // The engine that never listens stays starting for the whole file; queued requests wait as long as the test needs.
    REPLICA_START_TIMEOUT_MS: '600000',
    QUEUE_TIMEOUT_MS: '600000',
    WAKE_TIMEOUT_MS: '600000',
  });
}, 120_000);

afterAll(async () => {
  if (!db) return;
  await killRecordedEngines(db.sql);
  await hub.close();
  await db.close();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

/** The endpoint named `name` (max_batch_size `batch`, one replica), created on first use. */
async function endpoint(gateway: GatewayProcess, name: string, batch: number): Promise<string> {
  const found = endpoints.get(name);
  if (found) return found;
  if (!projectId) projectId = (await db.sql<{ id: string }[]>`SELECT id FROM projects ORDER BY created_at LIMIT 1`)[0]!.id;
  const created = await restClient(gateway.url, ADMIN_KEY)(
    'POST',
    '/dedicated/beta/endpoint',
    createBody(projectId, {
      name,
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
      advanced: { max_batch_size: batch, max_token_count: 4096 },
    }),
  );
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  endpoints.set(name, created.body.endpointId as string);
  return created.body.endpointId as string;
}

async function ready(endpointId: string): Promise<void> {
  await waitFor('a READY replica', async () => (await liveReplicaRows(db.sql, endpointId)).find((r) => r.state === 'READY'), 60_000);
}

function chatInput(model: string) {
  return { input: { model, messages: [{ role: 'user', content: 'hi' }] } };
}

/** A REST chat completion: its status, Retry-After and body, or how it failed (a cut connection). */
async function restChat(url: string, model: string, stream: boolean) {
  try {
    const response = await fetch(`${url}/dedicated/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
    });
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
  } catch (error) {
    return { cut: String(error) };
  }
}

const contents = (messages: { payload?: any }[]) =>
  messages.flatMap((m) => (m.payload?.data?.chatCompletion?.choices ?? []).map((c: any) => c.delta.content as string));

test('SIGTERM: chat completions streamed over graphql-ws and SSE finish; other subscriptions end at once; the socket then closes with 1001', async () => {
  await rm(path.join(dir, 'release'), { force: true });
  const gateway = await startGatewayProcess({ ...env, DRAIN_TIMEOUT_MS: '600000' });
  const wide = await endpoint(gateway, 'wide', 4);
  await ready(wide);

  const ws = await openSocket(gateway.url, { authorization: `Bearer ${ADMIN_KEY}` });
  ws.subscribe('chat', CHAT, chatInput(wide));
  ws.subscribe('events', EVENTS, { p: projectId });
  const sse = await openSse(gateway.url, ADMIN_KEY, CHAT, chatInput(wide));
  expect(sse.status).toBe(200);
  await waitFor('the first token over the WebSocket', async () => contents(ws.of('chat')).includes('one'), 30_000);
  await waitFor('the first token over SSE', async () => contents(sse.events.map((e) => ({ payload: e.data }))).includes('one'), 30_000);

  gateway.child.kill('SIGTERM');
  onTestFinished(() => writeFile(path.join(dir, 'release'), ''));
  // The live-status subscription is completed (its client subscribes again, elsewhere); the socket stays open for the chat.
  await waitFor('the events subscription completed', async () => ws.of('events').some((m) => m.type === 'complete'), 10_000);
  expect(ws.closed).toBeUndefined();
  expect(ws.of('chat').some((m) => m.type === 'complete' || m.type === 'error')).toBe(false);
  expect(sse.ended).toBeUndefined();

  await writeFile(path.join(dir, 'release'), '');
  await waitFor('the chat over SSE to end', async () => sse.ended, 30_000);
  expect(contents(sse.events.map((e) => ({ payload: e.data })))).toEqual(TOKENS);
  expect(sse.events.at(-1)?.event).toBe('complete');
  const closed = await ws.waitClosed(30_000);
  expect(contents(ws.of('chat'))).toEqual(TOKENS);
  expect(ws.of('chat').at(-1)?.type).toBe('complete');
  expect(closed.code).toBe(1001);
  // Idle now: it exits without waiting for DRAIN_TIMEOUT_MS (10 min).
  expect(await exited(gateway)).toBe(0);
}, 180_000);

test('SIGTERM: requests still queued for a slot or held for an endpoint that does not serve get 503 with Retry-After at the bound, not a cut', async () => {
  await rm(path.join(dir, 'release'), { force: true });
  const gateway = await startGatewayProcess({ ...env, DRAIN_TIMEOUT_MS: '4000' });
  const narrow = await endpoint(gateway, 'narrow', 1);
  const never = await endpoint(gateway, 'never', 3);
  await ready(narrow);
  onTestFinished(() => writeFile(path.join(dir, 'release'), ''));

  // One request served whole first: the hold it measures lets the next ones queue (admission.ts).
  expect((await restChat(gateway.url, narrow, false)).status).toBe(200);
  // The endpoint's one slot, held by a stream the engine never finishes (its head comes once it streams).
  const held = await fetch(`${gateway.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: narrow, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
  expect(held.status).toBe(200);
  const heldEnd = held.text().then(
    () => 'clean',
    () => 'cut',
  );
  // Queued behind it: a REST request, a GraphQL chat over SSE, and one over graphql-ws.
  const queuedRest = restChat(gateway.url, narrow, false);
  const sse = await openSse(gateway.url, ADMIN_KEY, CHAT, chatInput(narrow));
  const ws = await openSocket(gateway.url, { authorization: `Bearer ${ADMIN_KEY}` });
  ws.subscribe('chat', CHAT, chatInput(narrow));
  await waitFor(
    'three requests queued',
    async () => (await db.sql<{ queued: number }[]>`SELECT queued FROM gateway_queue_depth WHERE endpoint_id = ${narrow}`)[0]?.queued === 3,
    30_000,
  );
  // Held for the endpoint that never serves (it reached the wait once its request is recorded as seen).
  const heldRest = restChat(gateway.url, never, false);
  await waitFor(
    'the request held',
    async () => (await db.sql`SELECT 1 FROM endpoints WHERE id = ${never} AND last_request_at IS NOT NULL`).length > 0,
    30_000,
  );

  gateway.child.kill('SIGTERM');
  for (const answer of [await queuedRest, await heldRest]) {
    expect(answer).toMatchObject({ status: 503, retryAfter: '1' });
    expect(JSON.parse((answer as { body: string }).body)).toMatchObject({ error: { type: 'server_error', code: 'gateway_draining' } });
  }
  const refusal = { extensions: { code: 'gateway_draining', status: 503, retryAfter: 1 } };
  await waitFor('the SSE chat to end', async () => sse.ended, 30_000);
  expect(sse.events.find((e) => e.data?.errors)?.data.errors[0]).toMatchObject(refusal);
  await waitFor('the WebSocket chat refused', async () => ws.of('chat').find((m) => m.payload?.errors || Array.isArray(m.payload)), 30_000);
  const message = ws.of('chat').find((m) => m.payload?.errors || Array.isArray(m.payload))!;
  expect((message.payload.errors ?? message.payload)[0]).toMatchObject(refusal);
  expect((await ws.waitClosed(30_000)).code).toBe(1001);
  // The stream holding the slot outlasts the bound: cut there, and the process exits.
  expect(await heldEnd).toBe('cut');
  expect(await exited(gateway)).toBe(0);
}, 180_000);
