/**
 * Several gateways share the endpoints (src/controller/lease-share.ts): each takes no more than its share, and one
 * that holds too many hands the excess back when the others place replicas where it does. The rule alone, the capped
 * take in SQL, then real reconcile loops on a real database (their passes recorded: the loop is what is tested here).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import { leaseShare } from '../../src/controller/lease-share.js';
import { assignShards, SHARD_COUNT, shardOf } from '../../src/domain/shards.js';
import { ReconcileLoop } from '../../src/controller/reconcile-loop.js';
import { acquireLeases, countMembers, heartbeat, releaseLeases } from '../../src/storage/leases-repository.js';
import { readPassState } from '../../src/storage/pass-reads.js';
import { QUEUE_DEPTH_STALE_MS } from '../../src/storage/queue-depth-repository.js';
import { onCleanup } from '../support/cleanup.js';
import { LEASE_TTL_MS, useLeaseLoops } from '../support/lease-loops.js';

const { db, createEndpoints, holders, until, loops } = useLeaseLoops('share');

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
