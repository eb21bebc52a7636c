/**
 * A stopping replica drains: the controller waits for its engine to report nothing in flight, and only a drain
 * timeout (DRAIN_TIMEOUT_MS, 5 s in tests) ends a wait for an engine that is still busy. A health check the engine
 * fails to answer (a busy machine; here a paused process) neither ends the drain nor stops the engine; a silence
 * longer than the drain's bound (drainSilenceMs, 4 s here) does: the engine is hung.
 */
import { beforeAll, expect, test } from 'vitest';
import { isRunning } from '../support/processes.js';
import {
  engineFetch,
  liveReplicaRows,
  longRequest,
  startTestApp,
  statusTrail,
  TINY_REPO,
  waitFor,
  waitForStatus,
  type TestApp,
} from '../support/app.js';

/**
 * Two gateways, one per test, so that the tests run concurrently (their drains, 5 s and 4 s of silence, overlap): the
 * second's drain timeout is a minute, so that only the silence can end its drain.
 */
let t: TestApp;
let long: TestApp;
const logs: string[] = [];

beforeAll(async () => {
  const options = { log: (message: string) => logs.push(message), controller: { drainSilenceMs: 4000, stopGraceMs: 1000 } };
  t = await startTestApp(options);
  long = await startTestApp({ ...options, hub: t.hub, env: { DRAIN_TIMEOUT_MS: '60000' } });
});

/**
 * An endpoint whose one replica generates a long answer (straight to its engine), put to sleep: its replica drains.
 * `end` aborts the request and resumes the engine if it is paused.
 */
async function drainingBusyReplica(t: TestApp, name: string) {
  const alice = await t.seed.user();
  const project = await alice.project(name);
  const id = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 1, max_token_count: 4096, max_input_length: 64 },
  });
  await waitForStatus(t.sql, id, 'RUNNING');
  const [replica] = await liveReplicaRows(t.sql, id);
  const client = new AbortController();
  const request = longRequest(replica!, 4000, client.signal);
  const end = async () => {
    if (await isRunning(replica!.pid)) process.kill(replica!.pid, 'SIGCONT');
    client.abort();
    await request;
  };
  try {
    await waitFor('the request to be generating', async () => {
      const health = (await (await engineFetch(replica!, '/health')).json()) as { active: number };
      return health.active === 1;
    });
    const slept = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
    expect(slept.status).toBe(200);
    await waitFor('the replica to drain', async () => (await liveReplicaRows(t.sql, id))[0]?.state === 'DRAINING');
  } catch (error) {
    await end();
    throw error;
  }
  return { id, replica: replica!, drainingAt: Date.now(), end };
}

test.concurrent(
  'a draining engine that misses health checks keeps its request until it answers again; a busy one is stopped at the drain timeout, and the log says so',
  async () => {
    const { id, replica, drainingAt, end } = await drainingBusyReplica(t, 'drain');
    try {
      // Paused for over two of the drain's 1 s health checks: none is answered.
      process.kill(replica.pid, 'SIGSTOP');
      await new Promise((resolve) => setTimeout(resolve, 2500));
      process.kill(replica.pid, 'SIGCONT');
      // Not told to stop (a SIGTERM sent while paused is handled now, and the engine would answer "draining" with 503):
      // it serves its request on.
      const health = await engineFetch(replica, '/health');
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: 'ok', active: 1 });
      expect((await liveReplicaRows(t.sql, id)).map((r) => r.state)).toEqual(['DRAINING']);

      // Still generating at the drain timeout: stopped then, and the log says why.
      await waitForStatus(t.sql, id, 'SLEEPING', 30_000);
      expect(Date.now() - drainingAt).toBeGreaterThanOrEqual(4500);
      expect(await liveReplicaRows(t.sql, id)).toEqual([]);
      await waitFor('the engine to be gone', async () => !(await isRunning(replica.pid)), 15_000);
      expect(logs).toContainEqual(
        `replica ${replica.id} last reported 1 request(s) in flight or queued at the end of its drain (5000 ms): stopping it`,
      );
      expect((await statusTrail(t.sql, id)).slice(-2)).toEqual(['STOPPING', 'SLEEPING']);
    } finally {
      await end();
    }
  },
  120_000,
);

test.concurrent(
  'a draining engine silent for longer than the bound is hung: stopped then, long before the drain timeout',
  async () => {
    const t = long;
    const { id, replica, drainingAt, end } = await drainingBusyReplica(t, 'drain-hung');
    try {
      process.kill(replica.pid, 'SIGSTOP'); // for good: it never answers again
      await waitForStatus(t.sql, id, 'SLEEPING', 30_000);
      expect(Date.now() - drainingAt).toBeLessThan(30_000);
      expect(logs).toContainEqual(`replica ${replica.id} answered no health check for 4000 ms while it drained: stopping it`);
      // Paused, it ignores SIGTERM: the stop's SIGKILL (after stopGraceMs) ends it.
      await waitFor('the engine to be gone', async () => !(await isRunning(replica.pid)), 15_000);
      expect(await liveReplicaRows(t.sql, id)).toEqual([]);
    } finally {
      await end();
    }
  },
  120_000,
);
