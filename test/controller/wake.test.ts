/**
 * Wake on request: a request held for a sleeping endpoint goes on as soon as
 * the endpoint's events say it serves, not at a later poll; and the wake is
 * split the same way the cold-start benchmark splits it (the replica's log
 * says when its engine was spawned and when it was ready).
 *
 * Each test has an endpoint of its own: they run concurrently, so that their engines' starts and wakes overlap.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { sharedEngineClient } from '../../src/engine-client/engine-client.js';
import { ChatRouter } from '../../src/router/chat-router.js';
import { RequestRecorder } from '../../src/router/request-recorder.js';
import { SPAWN_LINE_PREFIX } from '../../src/runtime/local-runtime.js';
import { authenticate, type Principal } from '../../src/services/principal.js';
import {
  liveReplicaRows,
  startTestApp,
  statusOf,
  statusTrail,
  TINY_REPO,
  waitFor,
  waitForStatus,
  type SeededUser,
  type TestApp,
} from '../support/app.js';

let t: TestApp;
let alice: SeededUser;
let principal: Principal;
let router: ChatRouter;
let recorder: RequestRecorder;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  const auth = await authenticate(t.sql, `Bearer ${alice.key}`, null);
  if (auth.type !== 'ok') throw new Error('the seeded key does not authenticate');
  principal = auth.value;
  recorder = new RequestRecorder(t.sql, 250);
  // Polls once a minute when no event comes: only the endpoint's events can let a request on in time.
  router = new ChatRouter(t.sql, t.app.services, recorder, sharedEngineClient(), { wakePollMs: 60_000 });
});

afterAll(async () => {
  router.close();
  await recorder.close();
});

async function sleepingEndpoint(name: string): Promise<string> {
  const project = await alice.project(name);
  const id = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 0, maxReplica: 1, cooldownPeriod: 600 },
    advanced: { max_token_count: 1024 },
  });
  await waitForStatus(t.sql, id, 'RUNNING');
  await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
  await waitForStatus(t.sql, id, 'SLEEPING');
  return id;
}

/** Engines start beside the other tests' on a loaded machine: a wider bound than 30 s for each test. */
const CONCURRENT_TIMEOUT_MS = 120_000;

describe.concurrent('wake on request', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
  test("a request to a SLEEPING endpoint goes on at the endpoint's RUNNING event, without waiting for a poll", async () => {
    const id = await sleepingEndpoint('wake-events');
    const t0 = Date.now();
    const routed = await router.route(
      principal,
      { model: id, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 },
      AbortSignal.timeout(25_000),
    );
    const routedAt = Date.now();
    if (routed.type !== 'ok') throw new Error(`the request was refused: ${JSON.stringify(routed.error)}`);
    const chunks: Buffer[] = [];
    for await (const chunk of routed.value.upstream.body) chunks.push(chunk as Buffer);
    routed.value.finish({ promptTokens: null, completionTokens: null, ttftMs: null, finishReason: 'length', cancelled: false });
    expect(routed.value.upstream.status).toBe(200);
    expect(JSON.parse(Buffer.concat(chunks).toString()).choices[0].finish_reason).toBe('length');
    // Served as soon as a replica is READY; the endpoint's RUNNING is written just after.
    await waitForStatus(t.sql, id, 'RUNNING');
    expect((await statusTrail(t.sql, id)).slice(-3)).toEqual(['AWAKING ENGINE_INITIALIZING', 'READY', 'RUNNING']);
    // The fallback poll is a minute away (and the request's own limit 25 s): it went on because an event of the
    // endpoint was announced. Its first look found the endpoint SLEEPING, so it waited; it went on after the wake's
    // replica was READY, and long before the poll would have looked again.
    const [replicaReady] = await t.sql<{ ready_at: Date }[]>`
      SELECT ready_at FROM replicas WHERE endpoint_id = ${id} AND ready_at >= ${new Date(t0)} ORDER BY ready_at LIMIT 1`;
    expect(replicaReady).toBeDefined();
    expect(routedAt).toBeGreaterThanOrEqual(replicaReady!.ready_at.getTime());
    expect(routedAt - t0).toBeLessThan(30_000);

    // The replica's log: the runtime's spawn line first, then the engine's ENGINE_READY with when it was ready.
    const [replica] = await liveReplicaRows(t.sql, id);
    const log = (await readFile(path.join(t.dataDir, 'replicas', `${replica!.id}.log`), 'utf8')).split('\n');
    expect(log[0]!.startsWith(SPAWN_LINE_PREFIX)).toBe(true);
    const { at } = JSON.parse(log[0]!.slice(SPAWN_LINE_PREFIX.length)) as { at: number };
    const ready = JSON.parse(log.find((l) => l.startsWith('ENGINE_READY '))!.slice('ENGINE_READY '.length)) as {
      port: number;
      pid: number;
      readyAt: number;
      uptimeMs: number;
    };
    expect(ready.pid).toBe(replica!.pid);
    expect(replica!.address).toBe(`http://127.0.0.1:${ready.port}`);
    expect(at).toBeGreaterThanOrEqual(t0 - 5);
    expect(ready.readyAt).toBeGreaterThan(at);
    expect(ready.uptimeMs).toBeGreaterThan(0);
    // The engine's own clock started after it was spawned.
    expect(ready.readyAt - ready.uptimeMs).toBeGreaterThanOrEqual(at - 5);
    expect(ready.readyAt).toBeLessThanOrEqual(routedAt + 5);
  });

  test('a request that gives up while the endpoint wakes is answered 499 at once, and the wake goes on', async () => {
    const id = await sleepingEndpoint('wake-abort');
    const client = new AbortController();
    const routing = router.route(principal, { model: id, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 }, client.signal);
    // Given up once the wake it asked for is under way (a fixed 100 ms could end it before it asked, on a busy machine).
    await waitFor('the wake to begin', async () => (await statusOf(t.sql, id)).status !== 'SLEEPING');
    const t0 = performance.now();
    client.abort();
    const routed = await routing;
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(routed).toMatchObject({ type: 'error', error: { kind: 'cancelled' } });
    await waitForStatus(t.sql, id, 'RUNNING');
  });
});

describe.concurrent('maxReplica 0: replicas stay between min and max', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
  test('a serving endpoint updated to maxReplica 0 stops its replica and sleeps; wake and chat are refused at once; raising it serves again', async () => {
    const project = await alice.project('held-at-zero');
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 0, maxReplica: 1, cooldownPeriod: 600 },
      advanced: { max_token_count: 1024 },
    });
    await waitForStatus(t.sql, id, 'RUNNING');
    const held = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { autoscalingPolicy: { maxReplica: 0 } });
    expect(held.status, JSON.stringify(held.body)).toBe(200);
    await waitForStatus(t.sql, id, 'SLEEPING');
    expect(await liveReplicaRows(t.sql, id)).toEqual([]);
    expect((await statusTrail(t.sql, id)).slice(-2)).toEqual(['STOPPING', 'SLEEPING']);

    const wake = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`);
    expect(wake.status).toBe(409);
    expect(wake.body.error.message).toMatch(/maxReplica 0, so it runs no replicas/);
    const t0 = performance.now();
    const chat = await alice.rest('POST', '/dedicated/v1/chat/completions', {
      model: id,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 1,
    });
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(chat.status).toBe(409);
    expect(chat.body.error).toMatchObject({ code: 'endpoint_not_running', message: expect.stringMatching(/maxReplica 0/) });
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`)).body.status).toBe('SLEEPING');

    // Raised again: the next request wakes it, as any sleeping endpoint.
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { autoscalingPolicy: { maxReplica: 1 } })).status).toBe(200);
    const served = await alice.rest('POST', '/dedicated/v1/chat/completions', {
      model: id,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 1,
    });
    expect(served.status, JSON.stringify(served.body)).toBe(200);
  });

  test('created with simplescale replicas 0, it never starts a replica', async () => {
    const project = await alice.project('created-at-zero');
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, simplescale: { replicas: 0 }, advanced: { max_token_count: 1024 } });
    await waitForStatus(t.sql, id, 'SLEEPING');
    const replicas = await t.sql`SELECT id FROM replicas WHERE endpoint_id = ${id}`;
    expect(replicas).toEqual([]);
    const status = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    expect(status.body).toMatchObject({ status: 'SLEEPING', errorCode: null });
  });
});
