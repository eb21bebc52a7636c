/**
 * Several gateways share the endpoints (src/controller/lease-share.ts): each takes no more than its share, and one
 * that holds too many hands the excess back when the others place replicas where it does. The rule alone, the capped
 * take in SQL, then real reconcile loops on a real database (their passes recorded: the loop is what is tested here).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { leaseShare } from '../../src/controller/lease-share.js';
import { assignShards, SHARD_COUNT, shardOf } from '../../src/domain/shards.js';
import { ReconcileLoop, type ReconcileLoopOptions } from '../../src/controller/reconcile-loop.js';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { acquireLeases, countMembers, heartbeat, releaseLeases } from '../../src/storage/leases-repository.js';
import { readPassState } from '../../src/storage/pass-reads.js';
import { QUEUE_DEPTH_STALE_MS } from '../../src/storage/queue-depth-repository.js';
import { onCleanup } from '../support/cleanup.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createBody, seedPrincipal } from '../support/gateway.js';

/**
 * The loops' lease TTL: short, so that membership and hand-overs come quickly, yet long enough that a loop's renewal is
 * not late on a loaded machine (at 1.5 s, a full run's load let leases lapse and another gateway take them).
 */
const LEASE_TTL_MS = 3000;

let db: TestDatabase;
let services: Services;
let principal: Principal;
let projectId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  services = createServices(db.sql);
  ({ principal, projectId } = await seedPrincipal(db.sql, services, 'share'));
});

afterAll(() => db?.close());

async function createEndpoints(n: number, prefix: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const created = await services.endpoints.create(
      principal,
      createBody(projectId, { name: `${prefix}-${i}`, hfModelRepo: 'test-org/none' }),
    );
    if (created.type === 'error') throw new Error(created.error.message);
    ids.push(created.value.id);
  }
  return ids;
}

test('the rule: alone, a gateway takes every endpoint; with others, its share; the excess goes back only within one pool', () => {
  expect(leaseShare({ endpoints: 10, others: 0, elsewhere: 0, held: 3 })).toEqual({ share: 10, take: null, release: 0 });
  expect(leaseShare({ endpoints: 10, others: 1, elsewhere: 0, held: 3 })).toEqual({ share: 5, take: 2, release: 0 });
  expect(leaseShare({ endpoints: 11, others: 2, elsewhere: 0, held: 0 })).toEqual({ share: 4, take: 4, release: 0 });
  // A tenth over its share (one at least) is kept: no handing back and forth as endpoints come and go.
  expect(leaseShare({ endpoints: 10, others: 1, elsewhere: 0, held: 6 })).toEqual({ share: 5, take: 0, release: 0 });
  expect(leaseShare({ endpoints: 10, others: 1, elsewhere: 0, held: 10 })).toEqual({ share: 5, take: 0, release: 5 });
  expect(leaseShare({ endpoints: 1000, others: 1, elsewhere: 0, held: 550 })).toEqual({ share: 500, take: 0, release: 0 });
  expect(leaseShare({ endpoints: 1000, others: 1, elsewhere: 0, held: 551 })).toEqual({ share: 500, take: 0, release: 51 });
  // Another machine's local gateway cannot adopt an engine here: nothing is handed back.
  expect(leaseShare({ endpoints: 10, others: 1, elsewhere: 1, held: 10 })).toEqual({ share: 5, take: 0, release: 0 });
});

test('a capped take renews every lease the owner holds and takes at most the limit of the others, each owner in its own order', async () => {
  const ids = await createEndpoints(12, 'cap');
  const a = await acquireLeases(db.sql, ids, 'cap-a', 60_000, 4);
  expect(a.size).toBe(4);
  // Its own are renewed whatever the limit; none is taken past it.
  expect(await acquireLeases(db.sql, ids, 'cap-a', 60_000, 0)).toEqual(a);
  const again = await acquireLeases(db.sql, ids, 'cap-a', 60_000, 2);
  expect(again.size).toBe(6);
  for (const id of a) expect(again.has(id)).toBe(true);
  // Another owner takes only what is free: never a live lease of another.
  const b = await acquireLeases(db.sql, ids, 'cap-b', 60_000, null);
  expect(b.size).toBe(6);
  for (const id of b) expect(again.has(id)).toBe(false);
  // Two owners prefer different endpoints (a hash of the id and the owner): of the same 24 free endpoints, the 12
  // each would take first are not the same ones (the same twelve would come once in 2.7 million).
  const more = await createEndpoints(24, 'order');
  const firstPicks = await acquireLeases(db.sql, more, 'cap-c', 60_000, 12);
  await db.sql`DELETE FROM endpoint_leases WHERE owner = 'cap-c'`;
  const d = await acquireLeases(db.sql, more, 'cap-d', 60_000, 12);
  expect(firstPicks.size).toBe(12);
  expect(d.size).toBe(12);
  expect([...d].every((id) => firstPicks.has(id))).toBe(false);
  const c = await acquireLeases(db.sql, more, 'cap-c', 60_000, null);
  expect(c.size).toBe(12);
  // The heartbeat renews the leases it holds, and counts the other members: each once it has run for a TTL.
  const beat = await heartbeat(db.sql, 'cap-c', 'pool-1', 60_000);
  expect(beat).toEqual({ held: c, others: 0, elsewhere: 0, peers: [], followedElsewhere: [], takersElsewhere: 0 });
  expect(await heartbeat(db.sql, 'cap-d', 'pool-2', 60_000)).toEqual({
    held: d,
    others: 0,
    elsewhere: 0,
    peers: [],
    followedElsewhere: [],
    takersElsewhere: 0,
  });
  await db.sql`UPDATE controller_members SET joined_at = now() - interval '61 seconds' WHERE owner LIKE 'cap-%'`;
  expect(await heartbeat(db.sql, 'cap-d', 'pool-2', 60_000)).toMatchObject({ held: d, others: 1, elsewhere: 1, peers: [] });
  // The others of its own pool, by name: those it divides the pool's shards with.
  expect(await countMembers(db.sql, 'cap-c', 'pool-2', 60_000)).toEqual({
    others: 1,
    elsewhere: 0,
    peers: ['cap-d'],
    followedElsewhere: [],
    takersElsewhere: 0,
  });
  // A stopping gateway's leases and membership go together.
  await releaseLeases(db.sql, 'cap-d');
  expect(await countMembers(db.sql, 'cap-c', 'pool-2', 60_000)).toEqual({
    others: 0,
    elsewhere: 0,
    peers: [],
    followedElsewhere: [],
    takersElsewhere: 0,
  });
  expect(await db.sql`SELECT 1 FROM endpoint_leases WHERE owner = 'cap-d'`).toEqual([]);
  await db.sql`DELETE FROM endpoint_leases WHERE owner LIKE 'cap-%'`;
  await db.sql`DELETE FROM controller_members WHERE owner LIKE 'cap-%'`;

  // Which replicas' pools the members of other sharded pools follow, and which other members might take what is
  // handed back: every member of another pool but those of sharded pools that follow another node.
  const member = (owner: string, pool: string, node: string | null) => db.sql`
    INSERT INTO controller_members (owner, pool, node, joined_at, expires_at)
    VALUES (${owner}, ${pool}, ${node}, now() - interval '1 hour', now() + interval '1 minute')`;
  await member('cap-other-ns', 'kubernetes:x/ns-a#shards', 'kubernetes/ns-a');
  await member('cap-other-ns-2', 'kubernetes:x/ns-a#shards', 'kubernetes/ns-a');
  await member('cap-earlier', 'kubernetes:x/ns-c#shards', null);
  await member('cap-by-count', 'kubernetes:x/ns-d', 'kubernetes/ns-d');
  await member('cap-same-pool', 'kubernetes:x/ns-b#shards', 'kubernetes/ns-b');
  await member('cap-same-ns', 'kubernetes:y/ns-b#shards', 'kubernetes/ns-b');
  expect(await countMembers(db.sql, 'cap-me', 'kubernetes:x/ns-b#shards', 60_000, 'kubernetes/ns-b')).toEqual({
    others: 6,
    elsewhere: 5,
    peers: ['cap-same-pool'],
    followedElsewhere: ['kubernetes/ns-a', 'kubernetes/ns-b'],
    takersElsewhere: 3,
  });
  await db.sql`DELETE FROM controller_members WHERE owner LIKE 'cap-%'`;
});

/** Each endpoint's holder (a live lease), by owner. */
async function holders(ids: readonly string[]): Promise<Map<string, string[]>> {
  const rows = await db.sql<{ endpoint_id: string; owner: string }[]>`
    SELECT endpoint_id, owner FROM endpoint_leases WHERE endpoint_id = ANY(${ids as string[]}) AND expires_at > now()`;
  const by = new Map<string, string[]>();
  for (const r of rows) by.set(r.owner, [...(by.get(r.owner) ?? []), r.endpoint_id]);
  return by;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const ends = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > ends) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/**
 * Real reconcile loops on the test database, their passes recorded: which owner passed which endpoint, and any two
 * passes at once on one endpoint (two controllers acting on it); what each logged and was told to forget.
 */
function loops() {
  /** Passes running now, by endpoint: two at once on one endpoint would be two controllers acting on it. */
  const inPass = new Map<string, string>();
  const overlaps: string[] = [];
  const passesBy = new Map<string, Set<string>>();
  const logged: string[] = [];
  /** The endpoints each loop told its controller to forget (it no longer holds them). */
  const forgotten = new Map<string, string[]>();
  const loop = (owner: string, pool: string, more: Partial<ReconcileLoopOptions> = {}) => {
    const l = new ReconcileLoop({
      sql: db.sql,
      owner,
      pool,
      intervalMs: 50,
      // At rest after its first pass: the endpoint is passed again only when handed over, or after 10 minutes.
      restIntervalMs: 600_000,
      leaseTtlMs: LEASE_TTL_MS,
      reconcile: async (id) => {
        if (inPass.has(id)) overlaps.push(`${id}: ${inPass.get(id)} and ${owner}`);
        inPass.set(id, owner);
        passesBy.set(owner, (passesBy.get(owner) ?? new Set()).add(id));
        try {
          await sleep(5);
          return (await readPassState(db.sql, id, QUEUE_DEPTH_STALE_MS))?.stamp;
        } finally {
          inPass.delete(id);
        }
      },
      log: (message) => logged.push(`${owner}: ${message}`),
      forget: (ids) => forgotten.set(owner, [...(forgotten.get(owner) ?? []), ...ids]),
      ...more,
    });
    l.start();
    onCleanup(() => l.stop());
    return l;
  };
  return { loop, overlaps, passesBy, logged, forgotten };
}

test('gateways share the endpoints: one alone takes all, one that joins gets half handed over, one in another pool gets only new ones, one that stops hands its own back', async () => {
  await db.sql`DELETE FROM endpoint_leases`;
  await db.sql`DELETE FROM controller_members`;
  await db.sql`UPDATE endpoints SET cleaned_at = now()`;
  const ids = await createEndpoints(12, 'loop');
  const { loop, overlaps, passesBy, logged, forgotten } = loops();
  const count = async (owner: string) => (await holders(ids)).get(owner)?.length ?? 0;

  const a = loop('gw-a', 'cluster');
  await until('gw-a holds all 12', async () => (await count('gw-a')) === 12);
  expect(passesBy.get('gw-a')?.size).toBe(12);

  // B joins, placing replicas where A does: A hands half over at its next renewal; B passes each endpoint it took.
  const b = loop('gw-b', 'cluster');
  await until('6 each', async () => (await count('gw-a')) === 6 && (await count('gw-b')) === 6);
  const ofB = (await holders(ids)).get('gw-b')!;
  for (const id of ofB) expect(passesBy.get('gw-b')?.has(id)).toBe(true);
  // A forgot what it handed over (its controller's memory of them goes), and nothing it still holds.
  for (const id of ofB) expect(forgotten.get('gw-a')).toContain(id);
  for (const id of (await holders(ids)).get('gw-a')!) expect(forgotten.get('gw-a') ?? []).not.toContain(id);
  expect(logged.some((line) => /^gw-a: handed 6 endpoint\(s\) over to the 1 other gateway\(s\)/.test(line))).toBe(true);
  // It stays so: no endpoint goes back and forth.
  await sleep(1200);
  expect(await count('gw-a')).toBe(6);
  expect(await count('gw-b')).toBe(6);

  // C places replicas elsewhere (another machine's local runtime): nothing is handed to it, but it takes its share of
  // new endpoints (16 endpoints, 3 members: 6 each at most; A and B hold 6 already).
  const c = loop('gw-c', 'machine-2');
  // Counted by the others once it has run for a lease's TTL.
  await sleep(LEASE_TTL_MS + 700);
  expect(await count('gw-c')).toBe(0);
  const fresh = await createEndpoints(4, 'new');
  ids.push(...fresh);
  await until('C takes the new ones', async () => (await count('gw-c')) === 4);
  expect((await count('gw-a')) + (await count('gw-b'))).toBe(12);

  // B stops: it hands its leases back, and its membership; A and C take them (each up to its share of two members).
  await b.stop();
  await until('A and C hold all 16', async () => (await count('gw-a')) + (await count('gw-c')) === 16);
  expect(await count('gw-a')).toBeLessThanOrEqual(8);
  expect(await count('gw-c')).toBeLessThanOrEqual(8);
  await a.stop();
  await c.stop();
  expect(overlaps).toEqual([]);
  expect(await db.sql`SELECT owner FROM controller_members`).toEqual([]);
}, 60_000);

test('a gateway forgets what it no longer holds: a lease another gateway took, an endpoint cleaned up (its lease released too)', async () => {
  await db.sql`DELETE FROM endpoint_leases`;
  await db.sql`DELETE FROM controller_members`;
  await db.sql`UPDATE endpoints SET cleaned_at = now()`;
  const [kept, stolen, cleaned] = await createEndpoints(3, 'forget');
  const forgotten: string[] = [];
  const loop = new ReconcileLoop({
    sql: db.sql,
    owner: 'gw-forget',
    intervalMs: 50,
    restIntervalMs: 600_000,
    leaseTtlMs: LEASE_TTL_MS,
    reconcile: async (id) => (await readPassState(db.sql, id, QUEUE_DEPTH_STALE_MS))?.stamp,
    forget: (ids) => forgotten.push(...ids),
    log: () => {},
  });
  loop.start();
  onCleanup(() => loop.stop());
  await until('it holds all three', async () => (await holders([kept!, stolen!, cleaned!])).get('gw-forget')?.length === 3);
  await db.sql`UPDATE endpoint_leases SET owner = 'thief', expires_at = now() + interval '1 hour' WHERE endpoint_id = ${stolen!}`;
  await db.sql`UPDATE endpoints SET cleaned_at = now() WHERE id = ${cleaned!}`;
  await until('both forgotten', async () => forgotten.includes(stolen!) && forgotten.includes(cleaned!));
  expect(loop.holds(kept!)).toBe(true);
  expect(loop.holds(stolen!)).toBe(false);
  expect(forgotten).not.toContain(kept);
  await until(
    'the cleaned-up endpoint’s lease released',
    async () => (await db.sql`SELECT 1 FROM endpoint_leases WHERE endpoint_id = ${cleaned!}`).length === 0,
  );
  expect((await holders([stolen!])).get('thief')).toEqual([stolen]);
  await loop.stop();
});

test('with shards, gateways divide the shards: each takes its own shards endpoints, hands back the others once settled, and follows the shards of all it holds', async () => {
  await db.sql`DELETE FROM endpoint_leases`;
  await db.sql`DELETE FROM controller_members`;
  await db.sql`UPDATE endpoints SET cleaned_at = now()`;
  const ids = await createEndpoints(24, 'shard');
  const { loop, overlaps, logged } = loops();
  /** The shards each loop last told its runtime to follow. */
  const following = new Map<string, number[]>();
  const busy = new Set<string>();
  const sharded = (owner: string) =>
    loop(owner, 'cluster', {
      watchShards: (shards) =>
        following.set(
          owner,
          [...shards].sort((x, y) => x - y),
        ),
      busy: (id) => busy.has(id),
    });
  const held = async (owner: string) => ((await holders(ids)).get(owner) ?? []).sort();
  const of = (shards: ReadonlySet<number>) => ids.filter((id) => shards.has(shardOf(id))).sort();
  const all = Array.from({ length: SHARD_COUNT }, (_, i) => i);

  const a = sharded('gw-sa');
  await until('gw-sa holds all 24', async () => (await held('gw-sa')).length === 24);
  expect(following.get('gw-sa')).toEqual(all);

  // B joins. One endpoint of a shard that becomes B's has a start step running in A (busy): A keeps it meanwhile.
  const shardsOfA = assignShards(['gw-sb'], 'gw-sa');
  const shardsOfB = assignShards(['gw-sa'], 'gw-sb');
  expect([...shardsOfA].filter((s) => shardsOfB.has(s))).toEqual([]);
  expect(shardsOfA.size + shardsOfB.size).toBe(SHARD_COUNT);
  const kept = of(shardsOfB)[0]!;
  busy.add(kept);
  const b = sharded('gw-sb');
  const others = of(shardsOfB).filter((id) => id !== kept);
  await until('B holds the endpoints of its shards but the busy one', async () => (await held('gw-sb')).join() === others.join());
  expect(await held('gw-sa')).toEqual([...of(shardsOfA), kept].sort());
  // A follows its own shards and the busy endpoint's; B its own.
  await until(
    'A follows its shards and the kept one',
    async () => following.get('gw-sa')?.join() === [...new Set([...shardsOfA, shardOf(kept)])].sort((x, y) => x - y).join(),
  );
  expect(following.get('gw-sb')).toEqual([...shardsOfB].sort((x, y) => x - y));
  expect(logged.some((line) => /^gw-sa: handed \d+ endpoint\(s\) over to the other gateway\(s\) of the pool/.test(line))).toBe(true);

  // Its start done, the kept endpoint goes to B, and A stops following B's shards.
  busy.delete(kept);
  await until('B holds every endpoint of its shards', async () => (await held('gw-sb')).join() === of(shardsOfB).join());
  await until('A follows its own shards alone', async () => following.get('gw-sa')?.join() === [...shardsOfA].sort((x, y) => x - y).join());
  expect(await held('gw-sa')).toEqual(of(shardsOfA));

  // B stops: A holds every shard again, and takes every endpoint.
  await b.stop();
  await until('A holds all 24 again', async () => (await held('gw-sa')).length === 24);
  expect(following.get('gw-sa')).toEqual(all);
  await a.stop();
  expect(overlaps).toEqual([]);
}, 60_000);

test('a gateway sharing by count (an earlier version, in a rolling update) beside one dividing shards: each counts the other as another pool, neither hands endpoints over, and every endpoint stays held', async () => {
  await db.sql`DELETE FROM endpoint_leases`;
  await db.sql`DELETE FROM controller_members`;
  await db.sql`UPDATE endpoints SET cleaned_at = now()`;
  const ids = await createEndpoints(24, 'mixed');
  const { loop, overlaps } = loops();
  const held = async (owner: string) => (await holders(ids)).get(owner)?.length ?? 0;
  // The earlier version's gateway, alone, holds every endpoint.
  const old = loop('gw-old', 'cluster');
  await until('the old gateway holds all 24', async () => (await held('gw-old')) === 24);
  // The new version's joins: a pool apart (the controller names it so: see controller.ts).
  const fresh = loop('gw-new', 'cluster#shards', { watchShards: () => {} });
  // Both count each other (after a lease's TTL) and renew a few times: nothing moves, nothing is dropped.
  await sleep(LEASE_TTL_MS + 1500);
  expect(await held('gw-old')).toBe(24);
  expect(await held('gw-new')).toBe(0);
  // New endpoints: the old gateway holds more than a count share, so the new one (every shard of its pool) takes them.
  ids.push(...(await createEndpoints(8, 'mixed-new')));
  await until('every endpoint held', async () => (await held('gw-old')) + (await held('gw-new')) === 32);
  expect(await held('gw-new')).toBe(8);
  // A second new gateway joins while the old one runs: the first hands it nothing (a gateway of another pool could take
  // what is handed back), and nothing is dropped.
  const second = loop('gw-new2', 'cluster#shards', { watchShards: () => {} });
  await sleep(LEASE_TTL_MS + 1500);
  expect([await held('gw-old'), await held('gw-new'), await held('gw-new2')]).toEqual([24, 8, 0]);
  // The old gateway stops (the update done): the new ones divide everything by their shards.
  await old.stop();
  const ofNew = assignShards(['gw-new2'], 'gw-new');
  const mine = (owner: string, shards: ReadonlySet<number>) => async () =>
    ((await holders(ids)).get(owner) ?? []).sort().join() ===
    ids
      .filter((id) => shards.has(shardOf(id)))
      .sort()
      .join();
  await until('gw-new holds its shards', mine('gw-new', ofNew));
  await until('gw-new2 holds its shards', mine('gw-new2', assignShards(['gw-new'], 'gw-new2')));
  await Promise.all([fresh.stop(), second.stop()]);
  expect(overlaps).toEqual([]);
}, 60_000);

test("two installations (pools dividing shards, each following its namespace's replicas): neither takes an endpoint whose replicas all run in the other's namespace while one of its gateways lives, and hands back those it took while none did", async () => {
  await db.sql`DELETE FROM endpoint_leases`;
  await db.sql`DELETE FROM controller_members`;
  await db.sql`UPDATE endpoints SET cleaned_at = now()`;
  const ids = await createEndpoints(12, 'install');
  // Four run in A's namespace, four in B's, four have no replica (asleep, or new): live rows, one or two each.
  const replicaIn = async (id: string, node: string, n: number) => {
    for (let i = 0; i < n; i++)
      await db.sql`
        INSERT INTO replicas (id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state)
        VALUES (${`rep_${id}_${i}`}, ${id}, 1, 'kubernetes', ${node}, 'H100', 1, 'READY')`;
  };
  const [inA, inB, none] = [ids.slice(0, 4), ids.slice(4, 8), ids.slice(8)];
  for (const [i, id] of inA.entries()) await replicaIn(id, 'kubernetes/ns-a', 1 + (i % 2));
  for (const [i, id] of inB.entries()) await replicaIn(id, 'kubernetes/ns-b', 1 + (i % 2));
  const { loop, overlaps, logged } = loops();
  const held = async (owner: string) => ((await holders(ids)).get(owner) ?? []).sort();
  const sorted = (list: string[]) => [...list].sort();
  const gateway = (owner: string, ns: string) =>
    loop(owner, `kubernetes:cluster/${ns}#shards`, { node: `kubernetes/${ns}`, watchShards: () => {} });

  // B's gateway alone (A's all stopped): it holds everything, A's endpoints too (as a takeover does).
  const b = gateway('gw-b', 'ns-b');
  await until('B holds all 12', async () => (await held('gw-b')).length === 12);
  // A's gateway starts: once each counts the other, B hands A's endpoints back, and A takes them; B keeps its own and
  // those without replicas (neither hands those to the other).
  const a = gateway('gw-a', 'ns-a');
  await until('A holds its namespace’s endpoints', async () => (await held('gw-a')).join() === sorted(inA).join());
  expect(await held('gw-b')).toEqual(sorted([...inB, ...none]));
  expect(logged.some((line) => /^gw-b: handed 4 endpoint\(s\) back to the gateway\(s\) of another pool/.test(line))).toBe(true);
  // B's leases lapse while its gateway lives (a late renewal): A, every shard of its pool its own, takes none of B's
  // namespace's endpoints (an earlier version took them within its next interval), and B's renewal keeps them.
  for (let round = 0; round < 4; round++) {
    await db.sql`UPDATE endpoint_leases SET expires_at = now() - interval '1 second' WHERE endpoint_id = ANY(${inB}) AND owner = 'gw-b'`;
    await sleep(200);
    const byA = await held('gw-a');
    for (const id of inB) expect(byA).not.toContain(id);
  }
  await until('B holds its own again', async () => (await held('gw-b')).join() === sorted([...inB, ...none]).join());
  // B's gateway stops (its membership goes with it): A takes everything, as a takeover does; B starts again, and A
  // hands B's namespace's endpoints back to it.
  await b.stop();
  await until('A holds all 12', async () => (await held('gw-a')).length === 12);
  gateway('gw-b2', 'ns-b');
  await until('B holds its namespace’s endpoints again', async () => (await held('gw-b2')).join() === sorted(inB).join(), 20_000);
  expect(await held('gw-a')).toEqual(sorted([...inA, ...none]));
  // A second gateway of B joins: its pool's own hand-back still runs beside the other installation (which takes none
  // of B's namespace's endpoints): the two divide them by their shards.
  gateway('gw-b3', 'ns-b');
  const ofB3 = assignShards(['gw-b2'], 'gw-b3');
  await until(
    'B’s two gateways hold their shards’ endpoints',
    async () =>
      (await held('gw-b3')).join() === sorted(inB.filter((id) => ofB3.has(shardOf(id)))).join() &&
      (await held('gw-b2')).join() === sorted(inB.filter((id) => !ofB3.has(shardOf(id)))).join(),
    20_000,
  );
  expect(await held('gw-a')).toEqual(sorted([...inA, ...none]));
  await a.stop();
  expect(overlaps).toEqual([]);
}, 60_000);

test('two pools dividing shards that follow the same namespace (an API server reached at another address, in a rolling update): neither takes the other’s namespace for another installation’s, and every endpoint stays held', async () => {
  await db.sql`DELETE FROM endpoint_leases`;
  await db.sql`DELETE FROM controller_members`;
  await db.sql`UPDATE endpoints SET cleaned_at = now()`;
  const ids = await createEndpoints(6, 'same-ns');
  for (const id of ids)
    await db.sql`
      INSERT INTO replicas (id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state)
      VALUES (${`rep_${id}`}, ${id}, 1, 'kubernetes', 'kubernetes/ns', 'H100', 1, 'READY')`;
  const { loop, overlaps, logged } = loops();
  const all = async () => [...(await holders(ids)).values()].flat().length;
  loop('gw-x', 'kubernetes:x/ns#shards', { node: 'kubernetes/ns', watchShards: () => {} });
  await until('x holds all 6', async () => (await all()) === 6);
  loop('gw-y', 'kubernetes:y/ns#shards', { node: 'kubernetes/ns', watchShards: () => {} });
  // Both count each other, and renew a few times: nothing is handed back, nothing is dropped.
  for (let i = 0; i < 8; i++) {
    await sleep(LEASE_TTL_MS / 4);
    expect(await all()).toBe(6);
  }
  expect(logged.some((line) => /another pool that follow/.test(line))).toBe(false);
  expect(overlaps).toEqual([]);
}, 60_000);
