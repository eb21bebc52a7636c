/**
 * Shards (src/domain/shards.ts): which shard an endpoint belongs to is written on its pods, so it may never change
 * (PostgreSQL's computation of it is checked against it in test/storage/pass-reads.test.ts);
 * how the members of a pool divide the shards must give every shard one member, evenly, the same answer in every
 * member, and move few shards when a member joins.
 */
import { expect, test } from 'vitest';
import { assignShards, SHARD_COUNT, shardOf } from '../../src/domain/shards.js';

test("an endpoint's shard is fixed: running pods are labelled with it (these values may never change)", () => {
  expect(SHARD_COUNT).toBe(16);
  expect(['ep_0', 'ep_1', 'ep_11r9jrf7wo5t04', 'ep_zzzzzzzzzzzzzz', ''].map(shardOf)).toEqual([11, 1, 11, 11, 9]);
  // Spread over the shards: 1,600 endpoints, none of the 16 with fewer than 60 or more than 140.
  const counts = new Array<number>(SHARD_COUNT).fill(0);
  for (let i = 0; i < 1600; i++) counts[shardOf(`ep_${i.toString(36)}`)]!++;
  expect(Math.min(...counts)).toBeGreaterThanOrEqual(60);
  expect(Math.max(...counts)).toBeLessThanOrEqual(140);
});

const gateways = (n: number) => Array.from({ length: n }, (_, i) => `gw-${1000 + i}-${(i * 7919).toString(36)}`);
/** Each member's shards, as each computes them from the others' names. */
const division = (members: string[]) =>
  members.map((m) =>
    assignShards(
      members.filter((x) => x !== m),
      m,
    ),
  );

test('the members divide the shards: each shard to exactly one, evenly (one apart at most), the same answer whatever the order', () => {
  for (let n = 1; n <= 20; n++) {
    const members = gateways(n);
    const shares = division(members);
    const all = shares.flatMap((s) => [...s]).sort((a, b) => a - b);
    expect(all).toEqual(Array.from({ length: SHARD_COUNT }, (_, i) => i));
    const sizes = shares.map((s) => s.size);
    expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    // The others named in any order, or with itself among them, change nothing.
    const first = members[0]!;
    expect(assignShards([...members].reverse(), first)).toEqual(shares[0]);
  }
  expect([...assignShards([], 'alone')]).toHaveLength(SHARD_COUNT);
});

test('a member that joins takes shards from the others, and few move between those that stay', () => {
  for (let n = 1; n <= 8; n++) {
    const members = gateways(n);
    const before = division(members);
    const after = division([...members, 'gw-joined']).slice(0, n);
    // What each keeps it held before: a join never moves a shard between two that stayed, beyond a few.
    let moved = 0;
    let gained = 0;
    before.forEach((shards, i) => {
      moved += [...shards].filter((s) => !after[i]!.has(s)).length;
      gained += [...after[i]!].filter((s) => !shards.has(s)).length;
    });
    const joinerShare = Math.floor(SHARD_COUNT / (n + 1));
    expect(moved).toBeGreaterThanOrEqual(joinerShare);
    // The joiner's share, and at most a few more moving between the others to keep the division even.
    expect(moved - gained).toBeGreaterThanOrEqual(joinerShare);
    expect(gained).toBeLessThanOrEqual(4);
  }
});
