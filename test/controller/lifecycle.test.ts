/**
 * The controller drives real engine processes on the tiny model, served by
 * the stand-in hub, through every status and phase of the contract.
 *
 * The three parts below (one endpoint's life, step by step; a FAILED endpoint terminated; an update during a rollout)
 * have endpoints of their own and run concurrently, so that their engines' starts overlap; the steps of the one
 * endpoint's life run in order.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import {
  engineFetch,
  FIRST_START_TRAIL,
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
import type { SeededProject } from '../support/gateway.js';

let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  project = await alice.project('lifecycle');
});

async function chat(replica: { address: string; engine_token: string | null }, content = 'Hello') {
  const res = await engineFetch(replica, '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: 4, temperature: 0, seed: 1 }),
  });
  return { status: res.status, body: (await res.json()) as { choices: { message: { content: string } }[] } };
}

/** Engines start beside the other parts' on a loaded machine: a wider bound than 30 s for each test. */
const CONCURRENT_TIMEOUT_MS = 120_000;

// Concurrent with the parts below it; its tests (`test.sequential`) one after the other.
describe.concurrent('one endpoint through its whole life', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
  let id: string;

  test.sequential('create walks REQUESTING_VIRTUAL_MACHINE, DOWNLOADING_MODEL, ENGINE_INITIALIZING, READY, RUNNING', async () => {
    id = await project.endpoint({ hfModelRepo: TINY_REPO, advanced: { max_batch_size: 2, max_token_count: 1024, max_input_length: 512 } });
    await waitForStatus(t.sql, id, 'RUNNING');
    expect(await statusTrail(t.sql, id)).toEqual(FIRST_START_TRAIL);
    expect(await statusOf(t.sql, id)).toMatchObject({ status: 'RUNNING', phase: null, errorCode: null, curr: 1, desired: 1, updated: 1 });
    const [replica] = await liveReplicaRows(t.sql, id);
    expect(replica).toMatchObject({ state: 'READY', version_index: 0 });
    // A direct request to the replica's engine generates from the tiny model.
    const answer = await chat(replica!);
    expect(answer.status).toBe(200);
    expect(answer.body.choices[0]!.message.content.length).toBeGreaterThan(0);
    // The version records what the model resolved to.
    const [version] = await t.sql`SELECT rollout_state, model FROM endpoint_versions WHERE endpoint_id = ${id} AND version_index = 0`;
    expect(version).toMatchObject({
      rollout_state: 'ROLLED_OUT',
      model: { repo: TINY_REPO, file: 'tiny-llama-Q8_0.gguf', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) },
    });
  });

  test.sequential('sleep drains (STOPPING), then SLEEPING with the replica stopped', async () => {
    const [replica] = await liveReplicaRows(t.sql, id);
    const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
    expect(res.body.status).toBe('SLEEPING');
    await waitForStatus(t.sql, id, 'SLEEPING');
    expect((await statusTrail(t.sql, id)).slice(-2)).toEqual(['STOPPING', 'SLEEPING']);
    expect(await liveReplicaRows(t.sql, id)).toEqual([]);
    expect(await statusOf(t.sql, id)).toMatchObject({ curr: 0, updated: 0 });
    await expect(fetch(`${replica!.address}/health`)).rejects.toThrow();
  });

  test.sequential('wake goes AWAKING, then READY and RUNNING, reusing the cached model', async () => {
    const downloadsBefore = t.hub.requests.filter((r) => r.route === 'cdn').length;
    const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`);
    expect(res.body).toMatchObject({ status: 'AWAKING', phase: 'ENGINE_INITIALIZING' });
    await waitForStatus(t.sql, id, 'RUNNING');
    expect((await statusTrail(t.sql, id)).slice(-3)).toEqual(['AWAKING ENGINE_INITIALIZING', 'READY', 'RUNNING']);
    expect(t.hub.requests.filter((r) => r.route === 'cdn').length).toBe(downloadsBefore);
  });

  test.sequential('an update rolls out: UPDATING, a new replica, then RUNNING on the new version', async () => {
    const [old] = await liveReplicaRows(t.sql, id);
    const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 3 }, newVersionComment: 'wider' });
    // The newest version has no replica ready yet: the one serving is the previous version's.
    expect(res.body).toMatchObject({ versionIndex: 1, currReplicaCnt: 1, updatedReplicaCnt: 0 });
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}`)).body).toMatchObject({ versionIndex: 1, updatedReplicaCnt: 0 });
    await waitFor('rollout', async () => {
      const s = await statusOf(t.sql, id);
      return s.status === 'RUNNING' && s.updated === 1 ? s : undefined;
    });
    expect((await statusTrail(t.sql, id)).slice(-2)).toEqual(['UPDATING', 'RUNNING']);
    const replicas = await liveReplicaRows(t.sql, id);
    expect(replicas.map((r) => r.version_index)).toEqual([1]);
    expect(replicas[0]!.id).not.toBe(old!.id);
    const health = (await (await engineFetch(replicas[0]!, '/health')).json()) as { maxBatchSize: number };
    expect(health.maxBatchSize).toBe(3);
  });

  test.sequential('an update of only the autoscaling policy hands the serving replica to the new version: no restart', async () => {
    const [old] = await liveReplicaRows(t.sql, id);
    const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, {
      autoscalingPolicy: { minReplica: 1, maxReplica: 3, cooldownPeriod: 60 },
      newVersionComment: 'scaling only',
    });
    expect(res.body.versionIndex).toBe(2);
    await waitFor('the rollout', async () => {
      const s = await statusOf(t.sql, id);
      const [row] = await liveReplicaRows(t.sql, id);
      return s.status === 'RUNNING' && row?.version_index === 2 ? s : undefined;
    });
    const replicas = await liveReplicaRows(t.sql, id);
    expect(replicas.map((r) => [r.id, r.pid, r.version_index])).toEqual([[old!.id, old!.pid, 2]]);
    expect(await statusOf(t.sql, id)).toMatchObject({ curr: 1, updated: 1 });
    const [version] = await t.sql`SELECT rollout_state, model FROM endpoint_versions WHERE endpoint_id = ${id} AND version_index = 2`;
    expect(version!.rollout_state).toBe('ROLLED_OUT');
    expect(version!.model).not.toBeNull();
    expect((await chat(old!)).status).toBe(200);
  });

  test.sequential('a failing rollout keeps the old replica serving and sets errorCode', async () => {
    const [serving] = await liveReplicaRows(t.sql, id);
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { hfModelRepo: 'test-org/truncated-GGUF' });
    await waitFor('the rollout to fail', async () => {
      const s = await statusOf(t.sql, id);
      return s.status === 'RUNNING' && s.errorCode ? s : undefined;
    });
    const status = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    expect(status.body).toMatchObject({ status: 'RUNNING', errorCode: 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR' });
    // Restart does not apply to a RUNNING endpoint: the advice is another update.
    expect(status.body.errorMessage).toMatch(/the previous version keeps serving; fix the cause with another update/);
    expect(status.body.errorMessage).not.toMatch(/restart/);
    expect((await statusTrail(t.sql, id)).slice(-2)).toEqual(['UPDATING', 'RUNNING INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR']);
    const replicas = await liveReplicaRows(t.sql, id);
    expect(replicas.map((r) => [r.id, r.version_index])).toEqual([[serving!.id, 2]]);
    expect((await chat(serving!)).status).toBe(200);
    const [version] = await t.sql`SELECT rollout_state FROM endpoint_versions WHERE endpoint_id = ${id} AND version_index = 3`;
    expect(version!.rollout_state).toBe('FAILED');
    expect(await statusOf(t.sql, id)).toMatchObject({ curr: 1, updated: 0 });
  });

  test.sequential('terminate goes TERMINATING then TERMINATED; restart brings it back through every phase', async () => {
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { hfModelRepo: TINY_REPO, newVersionComment: 'back to the good model' });
    await waitFor('the fix to roll out', async () => {
      const s = await statusOf(t.sql, id);
      return s.status === 'RUNNING' && !s.errorCode && s.updated === 1 ? s : undefined;
    });
    const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`);
    expect(res.body.status).toBe('TERMINATING');
    await waitForStatus(t.sql, id, 'TERMINATED');
    expect(await liveReplicaRows(t.sql, id)).toEqual([]);
    const restarted = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/restart`);
    expect(restarted.body).toMatchObject({ status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE' });
    await waitForStatus(t.sql, id, 'RUNNING');
    expect((await statusTrail(t.sql, id)).slice(-7)).toEqual([
      'TERMINATING',
      'TERMINATED',
      'INITIALIZING REQUESTING_VIRTUAL_MACHINE',
      'INITIALIZING DOWNLOADING_MODEL',
      'INITIALIZING ENGINE_INITIALIZING',
      'READY',
      'RUNNING',
    ]);
  });

  test.sequential('delete stops every replica', async () => {
    const [replica] = await liveReplicaRows(t.sql, id);
    expect((await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`)).status).toBe(200);
    await waitFor('clean-up', async () => {
      const [row] = await t.sql`SELECT cleaned_at FROM endpoints WHERE id = ${id}`;
      return row!.cleaned_at !== null;
    });
    expect(await liveReplicaRows(t.sql, id)).toEqual([]);
    await expect(fetch(`${replica!.address}/health`)).rejects.toThrow();
  });
});

test.concurrent(
  'a FAILED endpoint terminated goes TERMINATING, then TERMINATED, with no error code left',
  { timeout: CONCURRENT_TIMEOUT_MS },
  async () => {
    const failed = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
    await waitForStatus(t.sql, failed, 'FAILED');
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${failed}/status`)).body.errorCode).not.toBeNull();
    const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${failed}/terminate`);
    expect(res.body).toMatchObject({ status: 'TERMINATING', errorCode: null });
    await waitForStatus(t.sql, failed, 'TERMINATED');
    const terminated = (await alice.rest('GET', `/dedicated/beta/endpoint/${failed}/status`)).body;
    expect(terminated).toMatchObject({ status: 'TERMINATED', errorCode: null });
    expect(terminated).not.toHaveProperty('errorMessage');
  },
);

describe.concurrent('an update during a rollout', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
  test('the endpoint stays UPDATING until the newest version serves: no RUNNING while an older one does', async () => {
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(t.sql, id, 'RUNNING');
    const before = (await statusTrail(t.sql, id)).length;
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 3 } });
    // While the first update's replica starts, a second update.
    await waitFor('the first update to start a replica', async () =>
      (await liveReplicaRows(t.sql, id)).find((r) => r.version_index === 1 && r.state === 'STARTING'),
    );
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 4 } });
    await waitFor('only the newest version serving', async () => {
      const rows = await liveReplicaRows(t.sql, id);
      const s = await statusOf(t.sql, id);
      return s.status === 'RUNNING' && rows.length === 1 && rows[0]!.version_index === 2 && rows[0]!.state === 'READY';
    });
    expect((await statusTrail(t.sql, id)).slice(before)).toEqual(['UPDATING', 'RUNNING']);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });
});
