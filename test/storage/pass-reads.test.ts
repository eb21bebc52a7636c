/**
 * A reconcile pass's one read of its endpoint (src/storage/pass-reads.ts), on a real database: the endpoint with its
 * current version, its live replicas only (oldest first, each as the replicas' own read gives it), and the requests
 * queued for it in every gateway process that published lately (a stale process's count is not demand).
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { findEndpoints } from '../../src/storage/endpoints-repository.js';
import { SHARD_COUNT, shardOf, shardSql } from '../../src/domain/shards.js';
import { endpointsToReconcile, settled, readPassState } from '../../src/storage/pass-reads.js';
import { publishQueueDepths } from '../../src/storage/queue-depth-repository.js';
import { insertReplica, liveReplicas, markReplica } from '../../src/storage/replicas-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
let services: Services;
let principal: Principal;
let projectId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  services = createServices(db.sql);
  ({ principal, projectId } = await seedPrincipal(db.sql, services, 'pass-reads'));
});

afterAll(() => db?.close());

const newEndpoint = () => createEndpointThrough(services, principal, projectId);

async function addReplica(endpointId: string, n: number, state: 'STARTING' | 'READY' | 'STOPPED'): Promise<string> {
  const id = `rep_${endpointId}_${n}`;
  await insertReplica(db.sql, { id, endpointId, versionIndex: 1, runtime: 'local', node: 'n', gpuType: 'H100', numGpu: 1 });
  if (state !== 'STARTING') {
    expect(await markReplica(db.sql, id, { state: 'READY', address: `http://127.0.0.1:${n}`, locator: String(n) })).toBe(true);
  }
  if (state === 'STOPPED') expect(await markReplica(db.sql, id, { state: 'STOPPED', lastError: 'scaled in' })).toBe(true);
  return id;
}

test('an endpoint without replicas or queued requests', async () => {
  const id = await newEndpoint();
  const state = await readPassState(db.sql, id, 3000);
  const [endpoint] = await findEndpoints(db.sql, [id]);
  expect(state).toEqual({ endpoint, replicas: [], queued: 0, stamp: expect.any(String) });
});

test("the stamp changes with every write to the endpoint's row and with its live and ready replicas' counts; the listing shows the same", async () => {
  const id = await newEndpoint();
  const stamp = async () => (await readPassState(db.sql, id, 3000))!.stamp;
  const listed = async () => (await endpointsToReconcile(db.sql, 3000)).find((e) => e.id === id)!;
  const seen = [await stamp()];
  expect((await listed()).stamp).toBe(seen[0]);
  // Unchanged, unchanged.
  expect(await stamp()).toBe(seen[0]);
  await db.sql`UPDATE endpoints SET updated_at = now() WHERE id = ${id}`;
  seen.push(await stamp());
  await addReplica(id, 1, 'STARTING');
  seen.push(await stamp());
  await markReplica(db.sql, `rep_${id}_1`, { state: 'READY', address: 'http://127.0.0.1:1', locator: '1' });
  seen.push(await stamp());
  await markReplica(db.sql, `rep_${id}_1`, { state: 'STOPPED', lastError: 'scaled in' });
  seen.push(await stamp());
  // Each change shows (a replica that came and went between two reads leaves the stamp as it was: the state is).
  for (let i = 1; i < seen.length; i++) expect(seen[i]).not.toBe(seen[i - 1]);
  // Settled (every live replica READY: a gateway may hand the endpoint over) with none, not with one starting.
  expect(seen.map(settled)).toEqual([true, true, false, true, true]);
  expect((await listed()).stamp).toBe(seen.at(-1));
  await publishQueueDepths(db.sql, 'gw-stamp', new Map([[id, 4]]), 60_000);
  expect(await listed()).toMatchObject({ queued: 4, stamp: seen.at(-1) });
});

test('the live replicas, as their own read gives them, and the fresh queued counts of every process', async () => {
  const id = await newEndpoint();
  const other = await newEndpoint();
  const first = await addReplica(id, 1, 'READY');
  await addReplica(id, 2, 'STOPPED');
  const third = await addReplica(id, 3, 'STARTING');
  await addReplica(other, 4, 'READY');
  await publishQueueDepths(
    db.sql,
    'gw-a',
    new Map([
      [id, 3],
      [other, 7],
    ]),
    60_000,
  );
  await publishQueueDepths(db.sql, 'gw-b', new Map([[id, 2]]), 60_000);
  // A process that stopped publishing: its count is stale.
  await publishQueueDepths(db.sql, 'gw-dead', new Map([[id, 50]]), 60_000);
  await db.sql`UPDATE gateway_queue_depth SET updated_at = now() - interval '10 seconds' WHERE process_id = 'gw-dead'`;

  const state = await readPassState(db.sql, id, 3000);
  expect(state!.replicas.map((r) => r.id)).toEqual([first, third]);
  expect(state!.replicas).toEqual(await liveReplicas(db.sql, id));
  expect(state!.replicas[0]!.readyAt).toBeInstanceOf(Date);
  expect(state!.queued).toBe(5);
  expect(state!.endpoint).toEqual((await findEndpoints(db.sql, [id]))[0]);
  expect((await readPassState(db.sql, other, 3000))!.queued).toBe(7);
});

test('a deleted endpoint is read (the controller stops its replicas); an unknown one is not', async () => {
  const id = await newEndpoint();
  await addReplica(id, 1, 'READY');
  await db.sql`UPDATE endpoints SET deleted_at = now() WHERE id = ${id}`;
  const state = await readPassState(db.sql, id, 3000);
  expect(state!.endpoint.deleted).toBe(true);
  expect(state!.replicas).toHaveLength(1);
  expect(await readPassState(db.sql, 'ep_none', 3000)).toBeUndefined();
});

test("the listing of some shards shows their endpoints alone; PostgreSQL's shard of an id is the gateway's", async () => {
  // The same function on both sides: 4,000 ids of every shape an id may take (and a few it may not).
  const ids = [
    ...Array.from({ length: 4000 }, (_, i) => `ep_${(i * 7919).toString(36)}${i % 3 === 0 ? '_x' : ''}`),
    '',
    'é-ünïcode',
    'ep_' + 'z'.repeat(200),
  ];
  const rows = await db.sql<{ id: string; shard: number }[]>`
    SELECT id, ${db.sql.unsafe(shardSql('id'))} AS shard FROM unnest(${ids}::text[]) AS t (id)`;
  expect(rows.map((r) => [r.id, r.shard])).toEqual(ids.map((id) => [id, shardOf(id)]));

  const made = await Promise.all(Array.from({ length: 12 }, () => newEndpoint()));
  const some = [...new Set(made.slice(0, 3).map(shardOf))];
  const listed = (await endpointsToReconcile(db.sql, 3000, some)).map((e) => e.id);
  expect(listed.length).toBeGreaterThan(0);
  for (const id of listed) expect(some).toContain(shardOf(id));
  for (const id of made) expect(listed.includes(id)).toBe(some.includes(shardOf(id)));
  // Every shard listed is the whole listing.
  const all = await endpointsToReconcile(db.sql, 3000);
  const everyShard = await endpointsToReconcile(
    db.sql,
    3000,
    Array.from({ length: SHARD_COUNT }, (_, i) => i),
  );
  expect(everyShard).toEqual(all);
  expect(await endpointsToReconcile(db.sql, 3000, [])).toEqual([]);
});

interface PlanNode {
  'Node Type': string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

/** `db` as endpointsToReconcile sees it, but the listing's statement is explained (EXPLAIN ANALYZE) instead of run. */
function explaining(sql: TestDatabase['sql'], plans: PlanNode[]): TestDatabase['sql'] {
  const tag = (strings: TemplateStringsArray, ...values: unknown[]) => {
    if (!/^\s*SELECT e\.id/.test(strings[0]!)) return sql(strings, ...(values as never[]));
    const explained = Object.assign([`EXPLAIN (ANALYZE, FORMAT JSON) ${strings[0]}`, ...strings.slice(1)], {
      raw: [`EXPLAIN (ANALYZE, FORMAT JSON) ${strings.raw[0]}`, ...strings.raw.slice(1)],
    });
    return sql(explained, ...(values as never[])).then((rows) => {
      plans.push((rows[0] as { 'QUERY PLAN': { Plan: PlanNode }[] })['QUERY PLAN'][0]!.Plan);
      return [];
    });
  };
  return Object.assign(tag, { unsafe: sql.unsafe.bind(sql) }) as unknown as TestDatabase['sql'];
}

test("the interval's listing does work linear in the endpoints and replicas on tables never analyzed (a fleet created at once)", async () => {
  // A database of its own, its tables as fresh as a new deployment's: no statistics.
  const fresh = await createTestDatabase();
  try {
    const seeded = await seedPrincipal(fresh.sql, createServices(fresh.sql), 'listing-plan');
    const [project] = await fresh.sql<{ team_id: string }[]>`SELECT team_id FROM projects WHERE id = ${seeded.projectId}`;
    const ENDPOINTS = 1000;
    await fresh.sql`
      INSERT INTO endpoints (id, project_id, team_id, creator_id, status, desired_state)
      SELECT 'ep_plan_' || i, ${seeded.projectId}, ${project!.team_id}, ${seeded.principal.user.id}, 'RUNNING', 'RUNNING'
      FROM generate_series(1, ${ENDPOINTS}) AS i`;
    await fresh.sql`
      INSERT INTO replicas (id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state)
      SELECT 'rep_plan_' || i || '_' || j, 'ep_plan_' || i, 1, 'kubernetes', 'kubernetes/default', 'H100', 1,
        CASE WHEN j % 3 = 0 THEN 'STARTING' ELSE 'READY' END
      FROM generate_series(1, ${ENDPOINTS}) AS i, generate_series(1, 1 + i % 10) AS j`;
    // Requests queued for every endpoint in two gateway processes (their counts are joined too).
    await fresh.sql`
      INSERT INTO gateway_queue_depth (process_id, endpoint_id, queued)
      SELECT 'gw-' || p, 'ep_plan_' || i, 1 FROM generate_series(1, ${ENDPOINTS}) AS i, generate_series(1, 2) AS p`;
    const [counted] = await fresh.sql<{ replicas: number }[]>`SELECT count(*)::int AS replicas FROM replicas`;
    const replicas = counted!.replicas;
    const plans: PlanNode[] = [];
    const everyShard = Array.from({ length: SHARD_COUNT }, (_, i) => i);
    // As a gateway lists (the shards it follows), and as a tool does (every endpoint).
    await endpointsToReconcile(explaining(fresh.sql, plans), 3000, everyShard);
    await endpointsToReconcile(explaining(fresh.sql, plans), 3000);
    expect(plans).toHaveLength(2);
    // Rows each node produced over all its loops, and those a join compared and dropped: a plan that regroups the
    // replicas for each endpoint produces and drops about endpoints × replicas.
    const work = (node: PlanNode): number =>
      node['Actual Rows'] * node['Actual Loops'] +
      (node['Rows Removed by Join Filter'] ?? 0) +
      (node.Plans ?? []).reduce((sum, n) => sum + work(n), 0);
    for (const plan of plans) expect(work(plan)).toBeLessThan(10 * (ENDPOINTS + replicas));
    // And it lists them all, counted.
    const listed = await endpointsToReconcile(fresh.sql, 3000, everyShard);
    expect(listed).toHaveLength(ENDPOINTS);
    expect(listed.find((e) => e.id === 'ep_plan_9')).toEqual({
      id: 'ep_plan_9',
      stamp: expect.stringMatching(/\/10\/7$/),
      queued: 2,
      away: false,
    });
    // Away: every live replica in one of the pools named (another installation's namespace); none, or not all: not.
    await fresh.sql`UPDATE replicas SET node = 'kubernetes/other' WHERE endpoint_id = 'ep_plan_9' AND id <> 'rep_plan_9_1'`;
    const away = async (nodes: string[]) =>
      Object.fromEntries(
        (await endpointsToReconcile(fresh.sql, 3000, everyShard, nodes))
          .filter((e) => e.id === 'ep_plan_8' || e.id === 'ep_plan_9')
          .map((e) => [e.id, e.away]),
      );
    expect(await away(['kubernetes/default'])).toEqual({ ep_plan_8: true, ep_plan_9: false });
    expect(await away(['kubernetes/default', 'kubernetes/other'])).toEqual({ ep_plan_8: true, ep_plan_9: true });
    expect(await away([])).toEqual({ ep_plan_8: false, ep_plan_9: false });
    // When one serves, the serving ones tell (a replica starting where the holder runs does not keep the endpoint);
    // replicas that ended are none.
    await fresh.sql`UPDATE replicas SET node = 'kubernetes/other' WHERE endpoint_id = 'ep_plan_7' AND state = 'READY'`;
    await fresh.sql`UPDATE replicas SET node = 'kubernetes/other', state = 'STOPPED' WHERE endpoint_id = 'ep_plan_10'`;
    const others = (await endpointsToReconcile(fresh.sql, 3000, everyShard, ['kubernetes/other'])).filter((e) =>
      ['ep_plan_7', 'ep_plan_10'].includes(e.id),
    );
    expect(Object.fromEntries(others.map((e) => [e.id, e.away]))).toEqual({ ep_plan_7: true, ep_plan_10: false });
  } finally {
    await fresh.close();
  }
});
