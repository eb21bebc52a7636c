/**
 * The controller's coalesced statements (src/storage/statement-batches.ts), on a real database: the pass reads, the
 * replicas' moves and the counts' refreshes asked for in one turn go out as one statement per kind, and each caller
 * gets what its own statement would have answered: the same read, a move refused by the replica's lifecycle refused
 * alone, two moves of one replica applied in the order asked, a batch that deadlocks with another transaction sent
 * again move by move, and a move the database refuses fails alone; refreshes write each endpoint's own counts and
 * event (its cause), none when nothing changed, and one refused by the database fails alone.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { KEEP_DESIRED } from '../../src/storage/endpoints-repository.js';
import { insertEvent } from '../../src/storage/events-repository.js';
import { readPassState } from '../../src/storage/pass-reads.js';
import { insertReplica, markReplica, replicaState } from '../../src/storage/replicas-repository.js';
import { StatementBatches } from '../../src/storage/statement-batches.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
let services: Services;
let principal: Principal;
let projectId: string;
/** Statements sent through db.sql, by their first words. */
const sent: string[] = [];
const sentLike = (prefix: string) => sent.filter((q) => q.startsWith(prefix)).length;

beforeAll(async () => {
  db = await createTestDatabase({ onQuery: (query) => sent.push(query.replace(/\s+/g, ' ').trim()) });
  services = createServices(db.sql);
  ({ principal, projectId } = await seedPrincipal(db.sql, services, 'batches'));
});

afterAll(() => db?.close());

const newEndpoint = (name: string) => createEndpointThrough(services, principal, projectId, { name });

async function newReplicas(endpointId: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `rep_${endpointId}_${i}`);
  for (const id of ids)
    await insertReplica(db.sql, { id, endpointId, versionIndex: 1, runtime: 'kubernetes', node: 'n', gpuType: 'H100', numGpu: 1 });
  return ids;
}

test('pass reads asked for in one turn are one statement, each answer the single read', async () => {
  const ids = [];
  for (let i = 0; i < 12; i++) ids.push(await newEndpoint(`read-${i}`));
  const [withReplicas] = ids;
  const [replica] = await newReplicas(withReplicas!, 2);
  await markReplica(db.sql, replica!, { state: 'READY', address: 'http://127.0.0.1:9', locator: 'pod-9' });
  const batches = new StatementBatches(db.sql, 3000);
  sent.length = 0;
  // An id asked twice, and one that does not exist.
  const asked = [...ids, withReplicas!, 'ep_missing'];
  const states = await Promise.all(asked.map((id) => batches.readPassState(id)));
  expect(sentLike('SELECT e.id')).toBe(1);
  const single = await Promise.all(asked.map((id) => readPassState(db.sql, id, 3000)));
  expect(states).toEqual(single);
  expect(states[0]!.replicas.map((r) => r.state)).toEqual(['READY', 'STARTING']);
  expect(states.at(-1)).toBeUndefined();
});

test('moves of different replicas in one turn are one statement; a move the lifecycle refuses is refused alone', async () => {
  const endpointId = await newEndpoint('moves');
  const ids = await newReplicas(endpointId, 10);
  await markReplica(db.sql, ids[9]!, { state: 'STOPPED', lastError: 'scaled in' });
  const batches = new StatementBatches(db.sql, 3000);
  sent.length = 0;
  const applied = await Promise.all(
    ids.map((id, i) => batches.markReplica(id, { state: 'READY', address: `http://127.0.0.1:${i}`, locator: `pod-${i}` })),
  );
  expect(sentLike('UPDATE replicas r ')).toBe(1);
  // The stopped one stays stopped; the others serve, each at its own address, the rest of its row kept.
  expect(applied).toEqual([...Array(9).fill(true), false]);
  const rows = await db.sql<
    { id: string; state: string; address: string | null; locator: string | null; ready: boolean; last_error: string | null }[]
  >`
    SELECT id, state, address, locator, ready_at IS NOT NULL AS ready, last_error FROM replicas WHERE endpoint_id = ${endpointId} ORDER BY id`;
  expect(rows.slice(0, 9)).toEqual(
    ids
      .slice(0, 9)
      .map((id, i) => ({ id, state: 'READY', address: `http://127.0.0.1:${i}`, locator: `pod-${i}`, ready: true, last_error: null })),
  );
  expect(rows[9]).toMatchObject({ state: 'STOPPED', address: null, last_error: 'scaled in', ready: false });
});

test('two moves of one replica in one turn apply in the order asked, as two statements would', async () => {
  const endpointId = await newEndpoint('order');
  const [a, b] = await newReplicas(endpointId, 2);
  const batches = new StatementBatches(db.sql, 3000);
  sent.length = 0;
  // a: READY then DRAINING (both apply); b: STOPPED then READY (the second is refused: a stopped replica stays so).
  const answers = await Promise.all([
    batches.markReplica(a!, { state: 'READY', address: 'http://127.0.0.1:1' }),
    batches.markReplica(b!, { state: 'STOPPED', lastError: 'gone' }),
    batches.markReplica(a!, { state: 'DRAINING' }),
    batches.markReplica(b!, { state: 'READY', address: 'http://127.0.0.1:2' }),
  ]);
  expect(answers).toEqual([true, true, true, false]);
  expect(sentLike('UPDATE replicas r ')).toBe(2);
  expect(await replicaState(db.sql, a!)).toBe('DRAINING');
  expect(await replicaState(db.sql, b!)).toBe('STOPPED');
});

test('a batch that deadlocks with another transaction is sent again move by move, and every move applies', async () => {
  const endpointId = await newEndpoint('deadlock');
  const [first, second] = (await newReplicas(endpointId, 2)).sort();
  const batches = new StatementBatches(db.sql, 3000);
  // Another transaction holds the second row; the batch locks the first (id order) and waits for the second; the
  // other then asks for the first: a cycle, which PostgreSQL breaks by failing one of the two.
  let holdsSecond!: () => void;
  const secondHeld = new Promise<void>((resolve) => (holdsSecond = resolve));
  const other = db.sql.begin(async (tx) => {
    // The batch's session, which waits first, looks for the cycle first (after deadlock_timeout, 1 s); this one only
    // after 10 s, so that a machine too busy to run the first look on time cannot make this one the victim.
    await tx`SET LOCAL deadlock_timeout = '10s'`;
    await tx`UPDATE replicas SET last_error = 'held' WHERE id = ${second!}`;
    holdsSecond();
    await waitForLockWaits(1);
    await tx`UPDATE replicas SET last_error = 'held' WHERE id = ${first!}`;
  });
  await secondHeld;
  const moves = Promise.all([first!, second!].map((id) => batches.markReplica(id, { state: 'READY', address: `http://127.0.0.1:5` })));
  sent.length = 0;
  const [otherResult, applied] = await Promise.allSettled([other, moves]);
  // The batch waited first, so its session found the cycle and failed: the other committed, then each move went alone.
  expect(otherResult.status).toBe('fulfilled');
  expect(applied).toEqual({ status: 'fulfilled', value: [true, true] });
  expect(sentLike('UPDATE replicas r ')).toBe(3);
  expect(await replicaState(db.sql, first!)).toBe('READY');
  expect(await replicaState(db.sql, second!)).toBe('READY');
}, 30_000);

/** Waits until `n` sessions of this database wait for a lock. */
async function waitForLockWaits(n: number): Promise<void> {
  for (let i = 0; i < 250; i++) {
    const [row] = await db.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
    if (row!.n >= n) return;
    await sleep(20);
  }
  throw new Error('nobody waited for a lock');
}

test('a move carrying a value the database refuses fails alone: the others of its turn apply', async () => {
  const endpointId = await newEndpoint('refused');
  const ids = await newReplicas(endpointId, 4);
  const batches = new StatementBatches(db.sql, 3000);
  sent.length = 0;
  const answers = await Promise.allSettled(
    // A NUL character: PostgreSQL's text refuses it (SQLSTATE 22021).
    ids.map((id, i) => batches.markReplica(id, { state: 'FAILED', lastError: i === 2 ? 'engine said \u0000' : 'engine exited' })),
  );
  expect(answers.map((a) => a.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
  expect(((answers[2] as PromiseRejectedResult).reason as { code?: string }).code).toBe('22021');
  // The batch, then each move alone.
  expect(sentLike('UPDATE replicas r ')).toBe(5);
  const states = await Promise.all(ids.map((id) => replicaState(db.sql, id)));
  expect(states).toEqual(['FAILED', 'FAILED', 'STARTING', 'FAILED']);
});

test("refreshes of several endpoints' counts in one turn are one statement: each writes its own counts and event, or nothing", async () => {
  const ids = [];
  for (let i = 0; i < 4; i++) ids.push(await newEndpoint(`counts-${i}`));
  // Endpoint i has i READY replicas.
  for (const [i, id] of ids.entries())
    for (const replica of await newReplicas(id, i)) await markReplica(db.sql, replica, { state: 'READY', address: 'http://127.0.0.1:9' });
  const batches = new StatementBatches(db.sql, 3000);
  await batches.refreshCounts(ids[0]!, 0, 'settle');
  sent.length = 0;
  // The first shows its counts already (0 of 0): nothing written; a number, a floor, and the count kept.
  const changed = await Promise.all([
    batches.refreshCounts(ids[0]!, 0, 'none'),
    batches.refreshCounts(ids[1]!, 3, 'scale-up'),
    batches.refreshCounts(ids[2]!, { atLeast: 1 }, 'started'),
    batches.refreshCounts(ids[3]!, KEEP_DESIRED, 'replica-ready'),
  ]);
  expect(sentLike('WITH asked AS')).toBe(1);
  expect(changed).toEqual([false, true, true, true]);
  const shown = await db.sql<{ id: string; curr: number; desired: number; updated: number }[]>`
    SELECT id, curr_replica_cnt AS curr, desired_replica_cnt AS desired, updated_replica_cnt AS updated
    FROM endpoints WHERE id = ANY(${ids}) ORDER BY array_position(${ids}::text[], id)`;
  // The desired count of the endpoint that kept its own: the one it was created with (none).
  expect(shown.map(({ curr, desired }) => [curr, desired])).toEqual([
    [0, 0],
    [1, 3],
    [2, 1],
    [3, 0],
  ]);
  const events = await db.sql<{ endpoint_id: string; cause: string; detail: unknown }[]>`
    SELECT endpoint_id, cause, detail FROM endpoint_events
    WHERE endpoint_id = ANY(${ids}) AND type = 'REPLICAS_CHANGED' AND cause <> 'settle' ORDER BY id`;
  // Each event says what its endpoint shows now; they are appended in the order of the ids.
  const detail = ({ curr, desired, updated }: (typeof shown)[number]) => ({
    currReplicaCnt: curr,
    desiredReplicaCnt: desired,
    updatedReplicaCnt: updated,
  });
  expect(events.map((e) => [e.endpoint_id, e.cause, e.detail])).toEqual(
    [
      [ids[1], 'scale-up', detail(shown[1]!)],
      [ids[2], 'started', detail(shown[2]!)],
      [ids[3], 'replica-ready', detail(shown[3]!)],
    ].sort((a, b) => ((a[0] as string) < (b[0] as string) ? -1 : 1)),
  );
});

test('a refresh carrying a value the database refuses fails alone: the others of its turn write', async () => {
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push(await newEndpoint(`counts-refused-${i}`));
  const batches = new StatementBatches(db.sql, 3000);
  sent.length = 0;
  const answers = await Promise.allSettled(ids.map((id, i) => batches.refreshCounts(id, 2, i === 1 ? 'cause \u0000' : 'scale-up')));
  expect(answers.map((a) => a.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  expect(((answers[1] as PromiseRejectedResult).reason as { code?: string }).code).toBe('22021');
  expect(sentLike('WITH asked AS')).toBe(4);
  const desired = await db.sql<{ d: number }[]>`
    SELECT desired_replica_cnt AS d FROM endpoints WHERE id = ANY(${ids}) ORDER BY array_position(${ids}::text[], id)`;
  expect(desired.map((r) => r.d)).toEqual([2, 0, 2]);
});

test('a batch of refreshes takes the event order lock only once every row it writes is locked: a writer holding one of them, then appending an event, is not deadlocked', async () => {
  const ids = [await newEndpoint('order-lock-a'), await newEndpoint('order-lock-b')].sort();
  const batches = new StatementBatches(db.sql, 3000);
  const [endpoint] = await db.sql<
    { project_id: string; team_id: string }[]
  >`SELECT project_id, team_id FROM endpoints WHERE id = ${ids[1]!}`;
  // An API action on the second (in id order): its row locked, then, a round trip later, its event appended.
  let holds!: () => void;
  const held = new Promise<void>((resolve) => (holds = resolve));
  let appendNow!: () => void;
  const append = new Promise<void>((resolve) => (appendNow = resolve));
  const action = db.sql.begin(async (tx) => {
    await tx`SELECT 1 FROM endpoints WHERE id = ${ids[1]!} FOR UPDATE`;
    holds();
    await append;
    await insertEvent(tx, {
      endpointId: ids[1]!,
      projectId: endpoint!.project_id,
      teamId: endpoint!.team_id,
      type: 'STATUS_CHANGED',
      status: null,
      phase: null,
      errorCode: null,
      versionIndex: null,
      cause: 'api',
      actorId: null,
      detail: null,
    });
  });
  await held;
  // Both refreshes change their counts: the batch locks the first, and waits for the second.
  sent.length = 0;
  const refreshes = Promise.all(ids.map((id) => batches.refreshCounts(id, 4, 'scale-up')));
  await waitForLockWaits(1);
  appendNow();
  const [acted, refreshed] = await Promise.allSettled([action, refreshes]);
  expect(acted.status).toBe('fulfilled');
  expect(refreshed).toEqual({ status: 'fulfilled', value: [true, true] });
  // One statement: no deadlock was broken by failing it (then each refresh would have gone again alone).
  expect(sentLike('WITH asked AS')).toBe(1);
  const desired = await db.sql<{ d: number }[]>`SELECT desired_replica_cnt AS d FROM endpoints WHERE id = ANY(${ids})`;
  expect(desired.map((r) => r.d)).toEqual([4, 4]);
}, 30_000);
