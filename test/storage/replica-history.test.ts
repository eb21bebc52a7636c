/**
 * The reads of an endpoint's replica history (the replicas that ended: STOPPED, FAILED), on a real database: what
 * each answers, and that each finds the ended rows through their index (replicas_ended_idx) rather than by scanning
 * every endpoint's replicas. The history grows with every scale-in, restart and crash, and the crash policy reads it
 * before every scale-out.
 */
import postgres from 'postgres';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createServices } from '../../src/services/index.js';
import type { Queryable } from '../../src/storage/database.js';
import { endpointReplicas, failedSince, newestReplica } from '../../src/storage/replica-reads.js';
import { failuresSince, insertReplica, markReplica } from '../../src/storage/replicas-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
let endpointId: string;
let other: string;
const ENGINE_EXITED = 'the engine exited';

beforeAll(async () => {
  db = await createTestDatabase();
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'history');
  const create = () => createEndpointThrough(services, principal, projectId);
  endpointId = await create();
  other = await create();
});

afterAll(() => db?.close());

let n = 0;
/** A replica of `endpoint` moved to `state` (through READY unless it stays STARTING), `endedAgoMs` ago when it ended. */
async function replica(
  endpoint: string,
  state: 'STARTING' | 'READY' | 'DRAINING' | 'STOPPED' | 'FAILED',
  lastError = 'scaled in',
  endedAgoMs = 0,
) {
  const id = `rep_h${++n}`;
  await insertReplica(db.sql, { id, endpointId: endpoint, versionIndex: 1, runtime: 'local', node: 'n', gpuType: 'H100', numGpu: 1 });
  if (state !== 'STARTING') await markReplica(db.sql, id, { state: 'READY', address: `http://127.0.0.1:${n}`, locator: String(n) });
  if (state === 'DRAINING') await markReplica(db.sql, id, { state });
  if (state === 'STOPPED' || state === 'FAILED') {
    await markReplica(db.sql, id, { state, lastError });
    await db.sql`UPDATE replicas SET stopped_at = now() - ${endedAgoMs} * interval '1 millisecond' WHERE id = ${id}`;
  }
  return id;
}

/**
 * The plans of the statements `read` sends, with sequential scans priced out (on tables this small the planner
 * prefers them to any index): the names of the indexes the plans read the replicas through.
 */
async function indexesRead(read: (db: Queryable) => Promise<unknown>): Promise<string[]> {
  const sent: { query: string; parameters: unknown[] }[] = [];
  const url = db.dbUrl;
  const probe = postgres(url, { max: 1, onnotice: () => {}, debug: (_c, query, parameters) => void sent.push({ query, parameters }) });
  const explain = postgres(url, { max: 1, onnotice: () => {}, connection: { enable_seqscan: 'off' } });
  try {
    await read(probe as unknown as Queryable);
    const names = new Set<string>();
    // The client's own first read (the database's array types) is not the read's.
    for (const { query, parameters } of sent.filter((s) => /\bFROM replicas\b/.test(s.query))) {
      const [row] = await explain.unsafe(`EXPLAIN (FORMAT JSON) ${query}`, parameters as never[]);
      JSON.stringify(row!['QUERY PLAN'], (key, value: unknown) => {
        if (key === 'Index Name') names.add(String(value));
        return value;
      });
    }
    return [...names].sort();
  } finally {
    await probe.end();
    await explain.end();
  }
}

test("the crash policy's count of recent deaths: the endpoint's engine exits within the window, through the ended replicas' index", async () => {
  await replica(endpointId, 'FAILED', ENGINE_EXITED, 1_000);
  await replica(endpointId, 'FAILED', ENGINE_EXITED, 30_000);
  await replica(endpointId, 'FAILED', ENGINE_EXITED, 120_000); // before the window
  await replica(endpointId, 'FAILED', 'the warm-up generation failed with HTTP 500', 1_000); // not an exit
  await replica(endpointId, 'STOPPED', ENGINE_EXITED, 1_000); // not a failure
  await replica(other, 'FAILED', ENGINE_EXITED, 1_000); // another endpoint's
  const since = new Date(Date.now() - 60_000);
  const deaths = await failuresSince(db.sql, endpointId, since, ENGINE_EXITED);
  expect(deaths.count).toBe(2);
  expect(Date.now() - deaths.lastAt!).toBeGreaterThanOrEqual(900);
  expect(Date.now() - deaths.lastAt!).toBeLessThan(60_000);
  const resets = ['api:restart'];
  expect(await indexesRead((q) => failuresSince(q, endpointId, since, ENGINE_EXITED, resets))).toEqual([
    'endpoint_events_type_idx',
    'replicas_ended_idx',
  ]);
  // A restart by the user 15 s ago: the count starts anew from there (the death of 30 s ago is no longer counted). The
  // times are seconds apart, so that a test slowed down on a loaded machine still sees the restart between them.
  await db.sql`
    INSERT INTO endpoint_events (endpoint_id, project_id, team_id, type, status, cause, created_at)
    VALUES (${endpointId}, 'prj', 'team', 'STATUS_CHANGED', 'INITIALIZING', 'api:restart', now() - interval '15 seconds')`;
  expect((await failuresSince(db.sql, endpointId, since, ENGINE_EXITED, resets)).count).toBe(1);
  expect((await failuresSince(db.sql, endpointId, since, ENGINE_EXITED, ['api:wake'])).count).toBe(2);
  expect((await failedSince(db.sql, endpointId, since)).count).toBe(3);
  expect(await indexesRead((q) => failedSince(q, endpointId, since))).toEqual(['replicas_ended_idx']);
});

test("the replicas' view: the live ones, then those that ended lately, newest first, each half through its index", async () => {
  const endpoint = other;
  const ended = [await replica(endpoint, 'STOPPED', 'scaled in', 5_000), await replica(endpoint, 'FAILED', 'x', 3_000)];
  const live = [await replica(endpoint, 'READY'), await replica(endpoint, 'STARTING')];
  const options = { endedSince: new Date(Date.now() - 60_000), maxEnded: 10 };
  const view = await endpointReplicas(db.sql, endpoint, options);
  const ids = view.map((r) => r.id);
  // The live ones oldest first; then the ended ones newest first (the other endpoint's failure from the test above too).
  expect(ids.slice(0, 2)).toEqual(live);
  expect(ids.slice(2).filter((id) => ended.includes(id))).toEqual([...ended].reverse());
  expect(await indexesRead((q) => endpointReplicas(q, endpoint, options))).toEqual(['replicas_ended_idx', 'replicas_live_idx']);
});

test('the newest replica: a READY one before a starting or draining one, any live one before those that ended, else the last that ended', async () => {
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'history-newest');
  const endpoint = await createEndpointThrough(services, principal, projectId);
  expect(await newestReplica(db.sql, endpoint)).toBeUndefined();
  await replica(endpoint, 'FAILED', 'x', 9_000);
  const lastEnded = await replica(endpoint, 'STOPPED', 'scaled in', 4_000);
  await replica(endpoint, 'FAILED', 'x', 6_000);
  expect((await newestReplica(db.sql, endpoint))?.id).toBe(lastEnded);
  // Each rule below holds against a newer replica that a read by recency alone would answer.
  const starting = await replica(endpoint, 'STARTING');
  await replica(endpoint, 'DRAINING');
  expect((await newestReplica(db.sql, endpoint))?.id).toBe(starting); // starting before a newer draining one
  await replica(endpoint, 'STOPPED', 'scaled in', 0);
  expect((await newestReplica(db.sql, endpoint))?.id).toBe(starting); // live before one that ended since
  const ready = await replica(endpoint, 'READY');
  await replica(endpoint, 'STARTING');
  expect((await newestReplica(db.sql, endpoint))?.id).toBe(ready); // ready before a newer starting one
  await db.sql`UPDATE replicas SET state = 'STOPPED', stopped_at = now() WHERE id = ${ready}`;
  await db.sql`UPDATE replicas SET state = 'STOPPED', stopped_at = now() WHERE endpoint_id = ${endpoint} AND state = 'STARTING'`;
  const draining = (await db.sql<{ id: string }[]>`SELECT id FROM replicas WHERE endpoint_id = ${endpoint} AND state = 'DRAINING'`)[0]!.id;
  expect((await newestReplica(db.sql, endpoint))?.id).toBe(draining); // the last live one before every ended one
  expect(await indexesRead((q) => newestReplica(q, endpoint))).toEqual(['replicas_ended_idx', 'replicas_live_idx']);
});
