/**
 * Two installations on one database (src/controller/reconcile-loop.ts, `away`): pools of gateways dividing shards,
 * each following its own namespace's replicas, keep their endpoints; pools that follow one namespace (an API server
 * reached at two addresses) take nothing for another installation's. Real reconcile loops on a real database.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import { assignShards, shardOf } from '../../src/domain/shards.js';
import { LEASE_TTL_MS, useLeaseLoops } from '../support/lease-loops.js';

const { db, createEndpoints, holders, until, loops } = useLeaseLoops('installations');

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
  // Both count each other, and renew a few times: nothing is handed back (a lease renewed late on a loaded machine may
  // lapse for a moment: it is taken again), and every endpoint is held.
  await sleep(LEASE_TTL_MS * 2);
  expect(logged.some((line) => /another pool that follow/.test(line))).toBe(false);
  await until('all 6 held', async () => (await all()) === 6, 5_000);
  expect(overlaps).toEqual([]);
}, 60_000);
