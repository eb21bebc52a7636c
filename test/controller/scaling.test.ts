/**
 * Autoscaling, replica replacement, and a gateway restart with endpoints running.
 *
 * Most of this file's time is waiting: engines starting, cooldowns, back-offs, hang detection. The tests but the
 * restart's each use endpoints of their own (and the capacity test a gateway of its own), so they run concurrently
 * and their waits overlap; the restart, which replaces the gateway every other test talks to and counts every engine
 * state file, runs alone at the end.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  FIRST_START_TRAIL,
  liveReplicaRows,
  longRequest,
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
  t = await startTestApp({
    // Slots for every replica the concurrent tests run at once (up to 3 + 2 + 1 + 3), so that none waits for another's.
    env: { CPU_SLOTS: '12' },
    controller: { crashLoop: { failures: 3, windowMs: 60_000, backoffBaseMs: 500, hangMs: 3000 } },
  });
  alice = await t.seed.user();
  project = await alice.project('scaling');
});

/** A concurrent test waits for engines that start beside the others' on a loaded machine: a wider bound than 30 s. */
const CONCURRENT_TIMEOUT_MS = 150_000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe.concurrent('autoscaler', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
  test('scales out under concurrent load, up to maxReplica, and back down after the cooldown', async () => {
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 1, maxReplica: 3, cooldownPeriod: 2 },
      advanced: { max_batch_size: 1, max_token_count: 4096, max_input_length: 64 },
    });
    await waitForStatus(t.sql, id, 'RUNNING');
    const [first] = await liveReplicaRows(t.sql, id);
    // Six requests against a batch size of 1 queue up on the only replica.
    const clients = new AbortController();
    const load = Array.from({ length: 6 }, () => longRequest(first!, 4000, clients.signal));
    const scaled = await waitFor('three replicas', async () => {
      const s = await statusOf(t.sql, id);
      return s.curr === 3 ? s : undefined;
    });
    expect(scaled).toMatchObject({ status: 'RUNNING', desired: 3, curr: 3, updated: 3 });
    clients.abort();
    await Promise.all(load);
    await waitFor('scale-down to the minimum', async () => {
      const s = await statusOf(t.sql, id);
      return s.curr === 1 && s.desired === 1 ? s : undefined;
    });
    expect((await statusOf(t.sql, id)).status).toBe('RUNNING');
    const counts = await t.sql`SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} AND type = 'REPLICAS_CHANGED' ORDER BY id`;
    expect(counts.map((e) => e.detail.currReplicaCnt)).toContain(3);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });

  test('after a failed rollout, scale-out adds replicas of the version that serves, not of the failed one', async () => {
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 1, maxReplica: 2, cooldownPeriod: 2 },
      advanced: { max_batch_size: 1, max_token_count: 4096, max_input_length: 64 },
    });
    await waitForStatus(t.sql, id, 'RUNNING');
    const [first] = await liveReplicaRows(t.sql, id);
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { hfModelRepo: 'test-org/truncated-GGUF' });
    await waitFor('the rollout to fail', async () => {
      const s = await statusOf(t.sql, id);
      return s.status === 'RUNNING' && s.errorCode ? s : undefined;
    });
    const clients = new AbortController();
    const load = Array.from({ length: 3 }, () => longRequest(first!, 4000, clients.signal));
    const added = await waitFor('a second replica serving', async () => {
      const rows = await liveReplicaRows(t.sql, id);
      return rows.find((r) => r.id !== first!.id && r.state === 'READY');
    });
    clients.abort();
    await Promise.all(load);
    expect(added.version_index).toBe(first!.version_index);
    // The failed version was started once, by its rollout.
    const [failed] =
      await t.sql`SELECT count(*)::int AS n FROM replicas WHERE endpoint_id = ${id} AND version_index > ${first!.version_index}`;
    expect(failed!.n).toBe(1);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });

  test('with minReplica 0, an idle endpoint sleeps after its cooldown: RUNNING, STOPPING, SLEEPING', async () => {
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 0, maxReplica: 1, cooldownPeriod: 1 },
      advanced: { max_token_count: 1024 },
    });
    await waitForStatus(t.sql, id, 'RUNNING');
    await waitForStatus(t.sql, id, 'SLEEPING', 30_000);
    expect((await statusTrail(t.sql, id)).slice(-3)).toEqual(['RUNNING', 'STOPPING', 'SLEEPING']);
    const [event] = await t.sql`SELECT cause FROM endpoint_events WHERE endpoint_id = ${id} AND status = 'STOPPING'`;
    expect(event!.cause).toBe('controller:idle');
    expect(await liveReplicaRows(t.sql, id)).toEqual([]);
  });
});

describe.concurrent('replica failures', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
  /** A RUNNING endpoint of one replica, and that replica. */
  const oneReplica = async () => {
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
      advanced: { max_token_count: 1024 },
    });
    await waitForStatus(t.sql, id, 'RUNNING');
    const [victim] = await liveReplicaRows(t.sql, id);
    return { id, victim: victim! };
  };
  /** The replica that replaced `victim`, once READY; `victim` is recorded as a death. */
  const replaced = async (id: string, victim: { id: string }) => {
    const replacement = await waitFor('a replacement', async () => {
      const rows = await liveReplicaRows(t.sql, id);
      return rows.length === 1 && rows[0]!.id !== victim.id && rows[0]!.state === 'READY' ? rows[0] : undefined;
    });
    expect(alive(replacement.pid)).toBe(true);
    const [dead] = await t.sql`SELECT state, last_error FROM replicas WHERE id = ${victim.id}`;
    expect(dead).toMatchObject({ state: 'FAILED', last_error: 'the engine process exited' });
    return replacement;
  };

  test('a replica killed with SIGKILL is replaced; the endpoint keeps RUNNING', async () => {
    const { id, victim } = await oneReplica();
    process.kill(victim.pid, 'SIGKILL');
    await replaced(id, victim);
    // The replacement is marked READY a moment before the endpoint's counts are written: wait for the count, not just the row.
    const status = await waitFor('the replacement counted', async () => {
      const s = await statusOf(t.sql, id);
      return s.curr === 1 ? s : undefined;
    });
    expect(status).toMatchObject({ status: 'RUNNING', curr: 1 });
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });

  test('a replica whose engine hangs (SIGSTOP) is killed once it has answered no health check for hangMs, and replaced; its request gets an answer', async () => {
    const { id, victim } = await oneReplica();
    process.kill(victim.pid, 'SIGSTOP');
    // The controller records the death (after killing the engine) only once the test lets it: a row lock on the replica.
    // Until then no replacement starts, and the request's second try finds what it finds before a death is seen: no
    // replica but the one it tried. So its answer is the 503 of a replica that did not answer, not a replacement's.
    const held = await t.sql.reserve();
    try {
      await held`BEGIN`;
      await held`SELECT 1 FROM replicas WHERE id = ${victim.id} FOR NO KEY UPDATE`;
      // Sent to the hung engine: answered once the engine is killed, instead of waiting forever.
      const answer = await alice.rest('POST', '/dedicated/v1/chat/completions', {
        model: id,
        messages: [{ role: 'user', content: 'Hello?' }],
        max_tokens: 4,
      });
      expect(answer.status).toBe(503);
      expect(answer.headers.get('retry-after')).toBe('2');
      expect(answer.body).toMatchObject({ error: { type: 'server_error', code: 'replica_unavailable' } });
      // Killed by the controller (the test only stopped it), and not yet recorded: the answer came from the kill.
      expect((await t.sql`SELECT state FROM replicas WHERE id = ${victim.id}`)[0]).toEqual({ state: 'READY' });
    } finally {
      await held`COMMIT`;
      held.release();
    }
    try {
      await replaced(id, victim);
      expect(alive(victim.pid)).toBe(false);
    } finally {
      if (alive(victim.pid)) process.kill(victim.pid, 'SIGKILL');
    }
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });

  test('a replica that keeps dying is replaced after a doubling back-off, then marks the endpoint FAILED with INFERENCE_ENGINE_UNKNOWN_ERROR', async () => {
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
      advanced: { max_token_count: 1024 },
    });
    await waitForStatus(t.sql, id, 'RUNNING');
    const gaps: number[] = [];
    for (let i = 0; i < 3; i++) {
      const replica = await waitFor('a ready replica', async () => (await liveReplicaRows(t.sql, id)).find((r) => r.state === 'READY'));
      process.kill(replica.pid, 'SIGKILL');
      const [dead] = await waitFor('the death to be seen', async () => {
        const rows = await t.sql`SELECT state, stopped_at FROM replicas WHERE id = ${replica.id}`;
        return rows[0]!.state === 'FAILED' ? rows : undefined;
      });
      if (i === 2) break;
      // The endpoint keeps RUNNING while its replacement waits out the back-off.
      expect((await statusOf(t.sql, id)).status).toBe('RUNNING');
      const [next] = await waitFor('the replacement', async () => {
        const rows =
          await t.sql`SELECT created_at FROM replicas WHERE endpoint_id = ${id} AND created_at > ${dead!.stopped_at} ORDER BY created_at LIMIT 1`;
        return rows.length > 0 ? rows : undefined;
      });
      gaps.push(next!.created_at.getTime() - dead!.stopped_at.getTime());
    }
    // 0.5 s after the first death, 1 s after the second (the policy's base in this file), never sooner.
    expect(gaps[0]).toBeGreaterThanOrEqual(500 - 50);
    expect(gaps[1]).toBeGreaterThanOrEqual(1000 - 50);
    const failed = await waitForStatus(t.sql, id, 'FAILED');
    expect(failed.errorCode).toBe('INFERENCE_ENGINE_UNKNOWN_ERROR');
    expect(await liveReplicaRows(t.sql, id)).toEqual([]);
    const [event] = await t.sql`SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} AND status = 'FAILED'`;
    expect(event!.detail.message).toBe('the engine exited 3 times within 60 seconds');
  });
});

describe.concurrent('capacity', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
  test('REQUESTING_VIRTUAL_MACHINE waits while no capacity is free, and proceeds once some is', async () => {
    const small = await startTestApp({ env: { CPU_SLOTS: '2' }, hub: t.hub });
    const bob = await small.seed.user();
    const p = await bob.project('two slots');
    // 2 GPUs of a kind per replica: the first endpoint takes both slots.
    const first = await p.endpoint({
      hfModelRepo: TINY_REPO,
      instanceOptionId: 'zfTutSiLn0Hq',
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
      advanced: { max_token_count: 1024 },
    });
    await waitForStatus(small.sql, first, 'RUNNING');
    const second = await p.endpoint({ hfModelRepo: TINY_REPO, instanceOptionId: 'TwD5AqnBSVN0', advanced: { max_token_count: 1024 } });
    // The wait says what it waits for, on REST and GraphQL: written by a pass that found no free slot.
    const waiting = await waitFor('the wait reason', async () => {
      const status = (await bob.rest('GET', `/dedicated/beta/endpoint/${second}/status`)).body as { waitReason?: string };
      return status.waitReason;
    });
    expect(waiting).toBe('waiting for 1 × H100 80 GB: 2 of 2 in use');
    expect(await statusOf(small.sql, second)).toMatchObject({ status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE' });
    expect(await liveReplicaRows(small.sql, second)).toEqual([]);
    const viaGraphql = await bob.rest('POST', '/graphql', {
      query: 'query($id: ID!) { endpoint(id: $id) { status { phase waitReason } } }',
      variables: { id: second },
    });
    expect(viaGraphql.body.data.endpoint.status).toEqual({ phase: 'REQUESTING_VIRTUAL_MACHINE', waitReason: waiting });
    // A repository that does not exist is reported at once, not after the wait for a machine.
    const misspelled = await p.endpoint({ hfModelRepo: 'test-org/tiny-lama-GGUF', instanceOptionId: 'TwD5AqnBSVN0' });
    const failed = await waitForStatus(small.sql, misspelled, 'FAILED', 30_000);
    expect(failed.errorCode).toBe('WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect((await statusOf(small.sql, first)).status).toBe('RUNNING');
    // Still waiting after those passes (many, at 100 ms each, while the misspelled one failed): no replica was started.
    expect(await statusOf(small.sql, second)).toMatchObject({ status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE' });
    expect(await liveReplicaRows(small.sql, second)).toEqual([]);
    await bob.rest('PUT', `/dedicated/beta/endpoint/${first}/terminate`);
    await waitForStatus(small.sql, second, 'RUNNING');
    expect(await statusTrail(small.sql, second)).toEqual(FIRST_START_TRAIL);
  });
});

// Last and alone: it restarts the gateway the other tests use, and counts every engine state file of this machine.
describe('gateway restart', () => {
  test('running endpoints survive a restart: replicas are adopted, none is lost or orphaned', async () => {
    const ids = [
      await project.endpoint({
        hfModelRepo: TINY_REPO,
        autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
        advanced: { max_token_count: 1024 },
      }),
      await project.endpoint({
        hfModelRepo: TINY_REPO,
        autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
        advanced: { max_token_count: 1024 },
      }),
    ];
    for (const id of ids) await waitForStatus(t.sql, id, 'RUNNING');
    const before = new Map<string, { id: string; pid: number }>();
    for (const id of ids) before.set(id, (await liveReplicaRows(t.sql, id))[0]!);

    // A stray engine: its row says STOPPED, but the process runs (a crash between the two).
    const stray = before.get(ids[1]!)!;
    await t.sql`UPDATE replicas SET state = 'STOPPED' WHERE id = ${stray.id}`;

    await t.restart();

    // The first endpoint's replica is adopted as it was; the stray one is reaped and replaced.
    await waitFor('the stray engine to be reaped', async () => !alive(stray.pid));
    const adopted = await liveReplicaRows(t.sql, ids[0]!);
    expect(adopted.map((r) => [r.id, r.pid])).toEqual([[before.get(ids[0]!)!.id, before.get(ids[0]!)!.pid]]);
    expect(alive(adopted[0]!.pid)).toBe(true);
    const replaced = await waitFor('a replacement for the second endpoint', async () => {
      const rows = await liveReplicaRows(t.sql, ids[1]!);
      return rows[0]?.state === 'READY' ? rows[0] : undefined;
    });
    expect(replaced.id).not.toBe(stray.id);
    for (const id of ids) expect((await statusOf(t.sql, id)).status).toBe('RUNNING');

    // Every engine state file on this machine belongs to a live replica.
    const files = (await readdir(path.join(t.dataDir, 'replicas'))).filter((f) => f.endsWith('.json')).map((f) => f.replace('.json', ''));
    const live = await t.sql`SELECT id FROM replicas WHERE state IN ('STARTING', 'READY', 'DRAINING')`;
    expect(files.sort()).toEqual(live.map((r) => r.id).sort());
  });
});
