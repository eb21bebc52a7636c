/**
 * The controller's refresh of an endpoint's replica counts, on a real database: asked many times at once (the
 * replicas of one endpoint becoming ready together), the counts end right with one or two refreshes, not one per
 * ask; each refresh is one statement, which writes (and appends an event) only when the counts change; a refresh
 * that fails does not keep the next ones from running.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { EndpointWrites, StaleError } from '../../src/controller/endpoint-writes.js';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { countsOf, findEndpoints, KEEP_DESIRED, refreshReplicaCounts } from '../../src/storage/endpoints-repository.js';
import { insertEvent } from '../../src/storage/events-repository.js';
import { acquireLeases } from '../../src/storage/leases-repository.js';
import { insertReplica, liveReplicas, markReplica } from '../../src/storage/replicas-repository.js';
import { createTestDatabase, waitForLockWait, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
let services: Services;
let principal: Principal;
let projectId: string;
/** The statements sent, as sent. */
const sent: string[] = [];
/** The refreshes sent: one statement each. */
const refreshes = () => sent.filter((q) => /REPLICAS_CHANGED/.test(q)).length;
const countEvents = async (id: string) =>
  (await db.sql`SELECT count(*)::int AS n FROM endpoint_events WHERE endpoint_id = ${id} AND type = 'REPLICAS_CHANGED'`)[0]!.n as number;

beforeAll(async () => {
  db = await createTestDatabase({ onQuery: (query) => sent.push(query) });
  services = createServices(db.sql);
  ({ principal, projectId } = await seedPrincipal(db.sql, services, 'writes'));
});

afterAll(() => db?.close());

/** The endpoint's last REPLICAS_CHANGED event: its cause and detail. */
async function lastCountsEvent(id: string) {
  const [event] = await db.sql<{ cause: string; detail: unknown }[]>`
    SELECT cause, detail FROM endpoint_events WHERE endpoint_id = ${id} AND type = 'REPLICAS_CHANGED' ORDER BY id DESC LIMIT 1`;
  return event!;
}

/** Waits until a session of this database waits for a lock, running a statement `like` the pattern. */
const lockWaited = (what: string, like = '%') => waitForLockWait(db.sql, what, like);

/** An endpoint with `ready` READY replicas of its first version. */
async function endpointWithReady(ready: number): Promise<string> {
  const id = await createEndpointThrough(services, principal, projectId);
  const [row] = await db.sql<{ current_version: number }[]>`SELECT current_version FROM endpoints WHERE id = ${id}`;
  const versionIndex = row!.current_version;
  for (let i = 0; i < ready; i++) {
    const replicaId = `rep_${id}_${i}`;
    await insertReplica(db.sql, {
      id: replicaId,
      endpointId: id,
      versionIndex,
      runtime: 'local',
      node: 'n',
      gpuType: 'H100',
      numGpu: 1,
    });
    expect(await markReplica(db.sql, replicaId, { state: 'READY', address: 'http://127.0.0.1:1', locator: '1' })).toBe(true);
  }
  return id;
}

async function counts(id: string) {
  const [row] = await db.sql`SELECT curr_replica_cnt, desired_replica_cnt, updated_replica_cnt FROM endpoints WHERE id = ${id}`;
  return row;
}

test("the counts the controller checks (countsOf) are the ones the database writes, whatever the replicas' states and versions", async () => {
  const id = await endpointWithReady(2); // two READY of version 0
  const updated = await services.endpoints.update(principal, id, { advanced: { max_batch_size: 3 }, newVersionComment: 'v1' });
  if (updated.type === 'error') throw new Error(updated.error.message);
  const moves = [
    { state: 'READY', version: 1 },
    { state: 'READY', version: 1 },
    { state: 'STARTING', version: 1 },
    { state: 'DRAINING', version: 0 },
    { state: 'STOPPED', version: 1 },
    { state: 'FAILED', version: 1 },
  ] as const;
  for (const [i, move] of moves.entries()) {
    const replicaId = `rep_${id}_mixed_${i}`;
    await insertReplica(db.sql, {
      id: replicaId,
      endpointId: id,
      versionIndex: move.version,
      runtime: 'local',
      node: 'n',
      gpuType: 'H100',
      numGpu: 1,
    });
    if (move.state !== 'STARTING')
      await markReplica(db.sql, replicaId, {
        state: move.state === 'DRAINING' ? 'READY' : move.state,
        address: 'http://127.0.0.1:1',
        locator: '1',
      });
    if (move.state === 'DRAINING') await markReplica(db.sql, replicaId, { state: 'DRAINING' });
  }
  expect(await refreshReplicaCounts(db.sql, id, 7, 'test')).toBe(true);
  const [endpoint] = await findEndpoints(db.sql, [id]);
  const ready = (await liveReplicas(db.sql, id)).filter((r) => r.state === 'READY');
  const shown = {
    currReplicaCnt: endpoint!.currReplicaCnt,
    desiredReplicaCnt: endpoint!.desiredReplicaCnt,
    updatedReplicaCnt: endpoint!.updatedReplicaCnt,
  };
  expect(shown).toEqual({ currReplicaCnt: 4, desiredReplicaCnt: 7, updatedReplicaCnt: 2 });
  expect(countsOf(endpoint!, ready, 7)).toEqual(shown);
});

test('ten asks at once: the counts end right, refreshed once or twice, not ten times', async () => {
  const id = await endpointWithReady(5);
  const writes = new EndpointWrites(db.sql, 'gateway-a');
  sent.length = 0;
  await Promise.all(Array.from({ length: 10 }, (_, i) => writes.refreshCounts(id, 5 + (i === 9 ? 1 : 0), 'test')));
  // Nothing but the refreshes: one or two statements for the ten asks.
  expect(refreshes()).toBeGreaterThanOrEqual(1);
  expect(refreshes()).toBeLessThanOrEqual(2);
  expect(sent).toHaveLength(refreshes());
  // The last ask's desired count is the one written: the asks that came while the first ran shared one more refresh.
  expect(await counts(id)).toEqual({ curr_replica_cnt: 5, desired_replica_cnt: 6, updated_replica_cnt: 5 });
  const event = await lastCountsEvent(id);
  expect(event).toEqual({ cause: 'test', detail: { currReplicaCnt: 5, desiredReplicaCnt: 6, updatedReplicaCnt: 5 } });

  // As shown now: one statement, which writes nothing (no event, the row untouched).
  const events = await countEvents(id);
  const [before] = await db.sql`SELECT updated_at FROM endpoints WHERE id = ${id}`;
  sent.length = 0;
  await writes.refreshCounts(id, 6, 'test');
  expect(sent).toHaveLength(1);
  expect(await countEvents(id)).toBe(events);
  expect((await db.sql`SELECT updated_at FROM endpoints WHERE id = ${id}`)[0]).toEqual(before);

  // A replica that became ready after an ask began is counted by a refresh that begins after it.
  const first = writes.refreshCounts(id, 6, 'test');
  await markReplica(db.sql, `rep_${id}_0`, { state: 'DRAINING' });
  await Promise.all([first, writes.refreshCounts(id, 6, 'test')]);
  expect(await counts(id)).toEqual({ curr_replica_cnt: 4, desired_replica_cnt: 6, updated_replica_cnt: 4 });
});

test('a desired count asked as a floor: kept when it is shown already, raised to the floor, merged with a number asked meanwhile', async () => {
  const id = await endpointWithReady(2);
  const writes = new EndpointWrites(db.sql, 'gateway-floor');
  await writes.refreshCounts(id, 5, 'scale-up');
  // A warm-up's refresh, its snapshot of the endpoint read before the scale-out: the 5 stays.
  await markReplica(db.sql, `rep_${id}_1`, { state: 'DRAINING' });
  await writes.refreshCounts(id, KEEP_DESIRED, 'replica-ready');
  expect(await counts(id)).toEqual({ curr_replica_cnt: 1, desired_replica_cnt: 5, updated_replica_cnt: 1 });
  await writes.refreshCounts(id, { atLeast: 1 }, 'started');
  expect((await counts(id))!.desired_replica_cnt).toBe(5);
  await writes.refreshCounts(id, 0, 'sleep');
  await writes.refreshCounts(id, { atLeast: 1 }, 'started');
  expect((await counts(id))!.desired_replica_cnt).toBe(1);
  const event = await lastCountsEvent(id);
  expect(event).toEqual({ cause: 'started', detail: { currReplicaCnt: 1, desiredReplicaCnt: 1, updatedReplicaCnt: 1 } });

  // Asked while one runs: a scale-out's 4, then a warm-up's floor of 1, share one refresh, which writes 4.
  const running = writes.refreshCounts(id, 1, 'steady');
  const merged = [writes.refreshCounts(id, 4, 'scale-up'), writes.refreshCounts(id, { atLeast: 1 }, 'replica-ready')];
  await Promise.all([running, ...merged]);
  expect((await counts(id))!.desired_replica_cnt).toBe(4);
  // Its event is the scale-out's, whose count it wrote.
  const last = await lastCountsEvent(id);
  expect(last).toEqual({ cause: 'scale-up', detail: { currReplicaCnt: 1, desiredReplicaCnt: 4, updatedReplicaCnt: 1 } });
});

test("a floor is taken from the row as it is once locked: a desired count written meanwhile by another transaction is kept (the refresh is sent again), not the statement's snapshot of it", async () => {
  const id = await endpointWithReady(2);
  await refreshReplicaCounts(db.sql, id, 2, 'test');
  await markReplica(db.sql, `rep_${id}_1`, { state: 'DRAINING' }); // the counts to refresh: 1 READY, not 2
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const holding = new Promise<void>((resolve) => (locked = resolve));
  // Another writer (a transition of the controller, a scale-out) has set 5 and holds the row until its commit.
  const other = db.sql.begin(async (tx) => {
    await tx`UPDATE endpoints SET desired_replica_cnt = 5 WHERE id = ${id}`;
    locked();
    await released;
  });
  await holding;
  const refresh = refreshReplicaCounts(db.sql, id, KEEP_DESIRED, 'replica-ready');
  // The refresh has begun (its snapshot taken: desired 2) and waits for the row.
  try {
    await lockWaited('the refresh', '%WITH asked AS%');
  } finally {
    release();
  }
  await other;
  expect(await refresh).toBe(true);
  expect(await counts(id)).toEqual({ curr_replica_cnt: 1, desired_replica_cnt: 5, updated_replica_cnt: 1 });
  const event = await lastCountsEvent(id);
  expect(event.detail).toEqual({ currReplicaCnt: 1, desiredReplicaCnt: 5, updatedReplicaCnt: 1 });
});

test('a refresh that fails fails its own asks only: the next ones run', async () => {
  const id = await endpointWithReady(2);
  const writes = new EndpointWrites(db.sql, 'gateway-b');
  // Out of the column's range: the first refresh fails.
  const failing = writes.refreshCounts(id, 2 ** 40, 'test').then(
    () => 'written',
    () => 'failed',
  );
  const next = writes.refreshCounts(id, 3, 'test');
  await next;
  expect(await failing).toBe('failed');
  expect(await counts(id)).toMatchObject({ curr_replica_cnt: 2, desired_replica_cnt: 3 });
  await writes.refreshCounts(id, 4, 'test');
  expect(await counts(id)).toMatchObject({ desired_replica_cnt: 4 });
});

test('a status written with its counts: whoever sees RUNNING sees the replica that serves (the counts come first, in its transaction)', async () => {
  // As a pass reads it when the first replica turned READY and its warm-up has not yet shown it: READY, counts 0/0.
  const id = await endpointWithReady(1);
  await db.sql`UPDATE endpoints SET status = 'READY', phase = NULL, curr_replica_cnt = 0, desired_replica_cnt = 0, updated_replica_cnt = 0 WHERE id = ${id}`;
  expect(await acquireLeases(db.sql, [id], 'gateway-c', 60_000)).toEqual(new Set([id]));
  const [endpoint] = await findEndpoints(db.sql, [id]);
  const writes = new EndpointWrites(db.sql, 'gateway-c');
  const written = await writes.transition(
    id,
    endpoint!,
    { type: 'all-replicas-current' },
    // As the pass asks: at least the replicas it read serving (one).
    { cause: 'controller:serving', desiredReplicas: Math.max(endpoint!.desiredReplicaCnt, 1) },
  );
  expect(written).toMatchObject({ status: 'RUNNING' });
  expect(await counts(id)).toEqual({ curr_replica_cnt: 1, desired_replica_cnt: 1, updated_replica_cnt: 1 });
  const events = await db.sql<{ type: string; status: string | null; detail: unknown; xmin: string }[]>`
    SELECT type, status, detail, xmin::text FROM endpoint_events WHERE endpoint_id = ${id} AND cause = 'controller:serving' ORDER BY id`;
  expect(events.map((e) => [e.type, e.status, e.detail])).toEqual([
    ['REPLICAS_CHANGED', null, { currReplicaCnt: 1, desiredReplicaCnt: 1, updatedReplicaCnt: 1 }],
    ['STATUS_CHANGED', 'RUNNING', null],
  ]);
  // One transaction wrote both.
  expect(new Set(events.map((e) => e.xmin)).size).toBe(1);
});

test('refreshes and status writes of one endpoint at once: every one commits (the row is locked before the event order, by both)', async () => {
  const id = await endpointWithReady(2);
  const [endpoint] = await findEndpoints(db.sql, [id]);
  // As writeStatus does: the endpoint's row locked, then an event appended (which takes the event order lock).
  const statusWrite = (i: number) =>
    db.sql.begin(async (tx) => {
      await tx`SELECT 1 FROM endpoints WHERE id = ${id} FOR UPDATE`;
      await insertEvent(tx, { ...eventOf(endpoint!), cause: `status-${i}` });
    });
  // Each refresh changes the desired count: each writes, and appends its event.
  const results = await Promise.allSettled(
    Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? refreshReplicaCounts(db.sql, id, 3 + (i % 4), `refresh-${i}`) : statusWrite(i))),
  );
  expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
  const events = await db.sql<{ cause: string }[]>`SELECT cause FROM endpoint_events WHERE endpoint_id = ${id} AND cause LIKE 'status-%'`;
  expect(events).toHaveLength(20);
});

/** A STATUS_CHANGED event of the endpoint as it is. */
function eventOf(endpoint: { id: string; projectId: string; teamId: string }) {
  return {
    endpointId: endpoint.id,
    projectId: endpoint.projectId,
    teamId: endpoint.teamId,
    type: 'STATUS_CHANGED' as const,
    status: null,
    phase: null,
    errorCode: null,
    versionIndex: null,
    actorId: null,
    detail: null,
  };
}

test("a guarded step locks and reads its endpoint in one statement; one that waited for an update's lock reads the update's version", async () => {
  const id = await endpointWithReady(0);
  expect(await acquireLeases(db.sql, [id], 'gateway-e', 60_000)).toEqual(new Set([id]));
  const writes = new EndpointWrites(db.sql, 'gateway-e');
  const readVersion = () =>
    writes.guarded(
      id,
      () => true,
      async (_tx, e) => e.current.versionIndex,
    );
  const [{ current_version: first }] = await db.sql<[{ current_version: number }]>`SELECT current_version FROM endpoints WHERE id = ${id}`;
  sent.length = 0;
  expect(await readVersion()).toBe(first);
  // begin, the lock with the read, commit.
  expect(sent.map((q) => q.trim().split(/\s+/)[0]!.toLowerCase())).toEqual(['begin', 'select', 'commit']);

  // An update holds the row while it appends the next version and points the endpoint at it; the step waits for the lock.
  let commitUpdate!: () => void;
  const updated = new Promise<void>((resolve) => (commitUpdate = resolve));
  let holdsRow!: () => void;
  const rowHeld = new Promise<void>((resolve) => (holdsRow = resolve));
  const update = db.sql.begin(async (tx) => {
    await tx`SELECT 1 FROM endpoints WHERE id = ${id} FOR UPDATE`;
    await tx`INSERT INTO endpoint_versions
      SELECT (jsonb_populate_record(v, jsonb_build_object('version_index', ${first + 1}::int))).* FROM endpoint_versions v
      WHERE endpoint_id = ${id} AND version_index = ${first}`;
    await tx`UPDATE endpoints SET current_version = ${first + 1}, updated_at = now() WHERE id = ${id}`;
    holdsRow();
    await updated;
  });
  // The step begins once the update holds the row (begun together, the step could read before the update locks).
  await rowHeld;
  const step = readVersion();
  try {
    await lockWaited('the step');
  } finally {
    commitUpdate();
  }
  await update;
  // Not stale, not the version before: the read after the lock sees what the update committed.
  expect(await step).toBe(first + 1);
});

test('a guarded step of a process whose lease is gone is stale', async () => {
  const id = await endpointWithReady(0);
  expect(await acquireLeases(db.sql, [id], 'gateway-f', 60_000)).toEqual(new Set([id]));
  const writes = new EndpointWrites(db.sql, 'gateway-g');
  await expect(
    writes.guarded(
      id,
      () => true,
      async () => 'written',
    ),
  ).rejects.toThrow(/lease on .* lost/);
});

test('a transition whose event the database refuses fails whole: its error is thrown, nothing of it is written', async () => {
  const id = await endpointWithReady(1);
  await db.sql`UPDATE endpoints SET status = 'READY', phase = NULL, curr_replica_cnt = 0, desired_replica_cnt = 0, updated_replica_cnt = 0 WHERE id = ${id}`;
  expect(await acquireLeases(db.sql, [id], 'gateway-h', 60_000)).toEqual(new Set([id]));
  const [endpoint] = await findEndpoints(db.sql, [id]);
  const writes = new EndpointWrites(db.sql, 'gateway-h');
  const events = async () => (await db.sql`SELECT count(*)::int AS n FROM endpoint_events WHERE endpoint_id = ${id}`)[0]!.n as number;
  const before = await events();
  // A NUL in the event's detail: jsonb refuses it (the status event is appended after the counts', with the commit).
  await expect(
    writes.transition(
      id,
      endpoint!,
      { type: 'all-replicas-current' },
      { cause: 'controller:serving', desiredReplicas: 1, detail: { message: 'nul \u0000 here' } },
    ),
  ).rejects.toMatchObject({ code: '22P05' });
  expect(await events()).toBe(before);
  expect(await counts(id)).toEqual({ curr_replica_cnt: 0, desired_replica_cnt: 0, updated_replica_cnt: 0 });
  expect((await findEndpoints(db.sql, [id]))[0]).toMatchObject({ status: 'READY' });
  // The same transition, writable, then commits both events and the row.
  await writes.transition(id, endpoint!, { type: 'all-replicas-current' }, { cause: 'controller:serving', desiredReplicas: 1 });
  expect(await events()).toBe(before + 2);
  expect((await findEndpoints(db.sql, [id]))[0]).toMatchObject({ status: 'RUNNING', currReplicaCnt: 1 });
});

test('a transition is one statement: what it requires is checked on the row as locked; a stale or unleased one writes nothing', async () => {
  const id = await endpointWithReady(0);
  await db.sql`UPDATE endpoints SET status = 'INITIALIZING', phase = 'REQUESTING_VIRTUAL_MACHINE', wait_reason = 'no H100 free',
    progress = '{"downloadedBytes": 1}' WHERE id = ${id}`;
  expect(await acquireLeases(db.sql, [id], 'gateway-i', 60_000)).toEqual(new Set([id]));
  const writes = new EndpointWrites(db.sql, 'gateway-i');
  const [endpoint] = await findEndpoints(db.sql, [id]);
  const row = async () =>
    (
      await db.sql<{ status: string; phase: string | null; wait_reason: string | null; progress: unknown; error_message: string | null }[]>`
        SELECT status, phase, wait_reason, progress, error_message FROM endpoints WHERE id = ${id}`
    )[0]!;
  const statusEvents = async () =>
    (
      await db.sql<{ phase: string | null; cause: string }[]>`
      SELECT phase, cause FROM endpoint_events WHERE endpoint_id = ${id} AND type = 'STATUS_CHANGED' AND cause LIKE 'step%' ORDER BY id`
    ).map((e) => `${e.phase}:${e.cause}`);

  // Another gateway's process (no lease here) writes nothing.
  await expect(
    new EndpointWrites(db.sql, 'gateway-other').transition(id, endpoint!, { type: 'downloading-model' }, { cause: 'step-0' }),
  ).rejects.toBeInstanceOf(StaleError);
  sent.length = 0;
  // The download's phase: the wait's reason cleared, the progress kept; one statement, no transaction around it.
  expect(await writes.transition(id, endpoint!, { type: 'downloading-model' }, { cause: 'step-1' })).toMatchObject({
    phase: 'DOWNLOADING_MODEL',
  });
  expect(sent).toHaveLength(1);
  expect(await row()).toMatchObject({ phase: 'DOWNLOADING_MODEL', wait_reason: null, progress: { downloadedBytes: 1 } });

  // The API terminates the endpoint while holding its row; the transition waits for the lock, then finds it stale.
  let commit!: () => void;
  const committed = new Promise<void>((resolve) => (commit = resolve));
  let holds!: () => void;
  const held = new Promise<void>((resolve) => (holds = resolve));
  const terminate = db.sql.begin(async (tx) => {
    await tx`UPDATE endpoints SET desired_state = 'TERMINATED', status = 'TERMINATING', updated_at = now() WHERE id = ${id}`;
    holds();
    await committed;
  });
  await held;
  const step = writes.transition(id, { ...endpoint!, phase: 'DOWNLOADING_MODEL' }, { type: 'starting-engine' }, { cause: 'step-2' });
  const settled = step.then(
    () => 'written',
    (error: unknown) => error,
  );
  try {
    await lockWaited('the transition', '%WITH target AS%');
  } finally {
    commit();
  }
  await terminate;
  expect(await settled).toBeInstanceOf(StaleError);
  expect(await row()).toMatchObject({ status: 'TERMINATING', phase: 'DOWNLOADING_MODEL', progress: { downloadedBytes: 1 } });

  // The progress goes once the download's phase is left (and no error code, no message).
  await db.sql`UPDATE endpoints SET desired_state = 'RUNNING', status = 'INITIALIZING' WHERE id = ${id}`;
  await writes.transition(id, { ...endpoint!, phase: 'DOWNLOADING_MODEL' }, { type: 'starting-engine' }, { cause: 'step-3' });
  expect(await row()).toMatchObject({ phase: 'ENGINE_INITIALIZING', progress: null, error_message: null });
  expect(await statusEvents()).toEqual(['DOWNLOADING_MODEL:step-1', 'ENGINE_INITIALIZING:step-3']);
});

test("a transition asked for a version no longer the endpoint's newest is stale", async () => {
  const id = await endpointWithReady(1);
  await db.sql`UPDATE endpoints SET status = 'UPDATING', phase = NULL WHERE id = ${id}`;
  expect(await acquireLeases(db.sql, [id], 'gateway-j', 60_000)).toEqual(new Set([id]));
  const writes = new EndpointWrites(db.sql, 'gateway-j');
  const [endpoint] = await findEndpoints(db.sql, [id]);
  const version = endpoint!.current.versionIndex;
  await expect(
    writes.transition(id, endpoint!, { type: 'all-replicas-current' }, { cause: 'controller:rollout', ofVersion: version + 1 }),
  ).rejects.toBeInstanceOf(StaleError);
  expect((await findEndpoints(db.sql, [id]))[0]).toMatchObject({ status: 'UPDATING' });
  await writes.transition(id, endpoint!, { type: 'all-replicas-current' }, { cause: 'controller:rollout', ofVersion: version });
  expect((await findEndpoints(db.sql, [id]))[0]).toMatchObject({ status: 'RUNNING' });
});

test('a transition with counts whose row changed while it waited for the lock is sent again: counts never go back', async () => {
  const id = await endpointWithReady(1);
  await db.sql`UPDATE endpoints SET status = 'READY', phase = NULL WHERE id = ${id}`;
  await refreshReplicaCounts(db.sql, id, 1, 'test');
  expect(await acquireLeases(db.sql, [id], 'gateway-k', 60_000)).toEqual(new Set([id]));
  const writes = new EndpointWrites(db.sql, 'gateway-k');
  const [endpoint] = await findEndpoints(db.sql, [id]);
  // A second replica becomes READY in a transaction that also writes the counts (as a refresh would) and holds the row.
  const second = `rep_${id}_1`;
  await insertReplica(db.sql, {
    id: second,
    endpointId: id,
    versionIndex: endpoint!.current.versionIndex,
    runtime: 'local',
    node: 'n',
    gpuType: 'H100',
    numGpu: 1,
  });
  let commit!: () => void;
  const committed = new Promise<void>((resolve) => (commit = resolve));
  let holds!: () => void;
  const held = new Promise<void>((resolve) => (holds = resolve));
  const other = db.sql.begin(async (tx) => {
    await tx`UPDATE replicas SET state = 'READY', ready_at = now() WHERE id = ${second}`;
    await tx`UPDATE endpoints SET curr_replica_cnt = 2, updated_replica_cnt = 2, updated_at = now() WHERE id = ${id}`;
    holds();
    await committed;
  });
  await held;
  sent.length = 0;
  // Its snapshot sees one READY replica; it waits for the row.
  const step = writes.transition(id, endpoint!, { type: 'replica-ready' }, { cause: 'controller:serving', desiredReplicas: 2 });
  try {
    await lockWaited('the transition', '%WITH target AS%');
  } finally {
    commit();
  }
  await other;
  expect(await step).toMatchObject({ status: 'RUNNING' });
  // Sent twice: the first found the row changed and wrote nothing; the second counted both replicas.
  expect(sent.filter((q) => q.trim().startsWith('WITH target AS')).length).toBe(2);
  expect(await counts(id)).toEqual({ curr_replica_cnt: 2, desired_replica_cnt: 2, updated_replica_cnt: 2 });
  const last = await lastCountsEvent(id);
  expect(last.detail).toEqual({ currReplicaCnt: 2, desiredReplicaCnt: 2, updatedReplicaCnt: 2 });
});

test('a transition whose endpoint moved to a status it does not allow (the desired state unchanged) is stale and writes nothing', async () => {
  const id = await endpointWithReady(0);
  await db.sql`UPDATE endpoints SET status = 'INITIALIZING', phase = 'DOWNLOADING_MODEL' WHERE id = ${id}`;
  expect(await acquireLeases(db.sql, [id], 'gateway-l', 60_000)).toEqual(new Set([id]));
  const writes = new EndpointWrites(db.sql, 'gateway-l');
  const [endpoint] = await findEndpoints(db.sql, [id]);
  // Read as INITIALIZING; it is READY by the time the phase is written (still desired RUNNING).
  await db.sql`UPDATE endpoints SET status = 'READY', phase = NULL WHERE id = ${id}`;
  const events = async () => (await db.sql`SELECT count(*)::int AS n FROM endpoint_events WHERE endpoint_id = ${id}`)[0]!.n as number;
  const before = await events();
  await expect(writes.transition(id, endpoint!, { type: 'starting-engine' }, { cause: 'controller:engine' })).rejects.toBeInstanceOf(
    StaleError,
  );
  expect((await findEndpoints(db.sql, [id]))[0]).toMatchObject({ status: 'READY', phase: null });
  expect(await events()).toBe(before);
});
