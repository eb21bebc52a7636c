/**
 * Shards: the unit in which gateways divide the endpoints of one pool (the Kubernetes runtime's cluster and
 * namespace) and what each watches of it. Each endpoint belongs to one of `SHARD_COUNT` shards, by a hash of its id;
 * its pods carry the shard as a label, so that a gateway watches only the pods of the shards it holds
 * (`KubernetesRuntime.watchShards`), not every pod of the cluster.
 *
 * The count and the hash are part of the pods' labels: changing either would leave running pods labelled with a
 * shard their endpoint no longer maps to (no gateway would watch them where it looks). Both are fixed, and the
 * hash is one PostgreSQL computes the same (`shardSql`).
 */

import { createHash } from 'node:crypto';

/** Shards of a pool (a power of two): more than the gateways a pool runs, few enough that a gateway alone keeps a watch on each. */
export const SHARD_COUNT = 16;

/** FNV-1a (32 bits) over the string's UTF-16 code units: a member's rank for a shard (`assignShards`), computed often. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/**
 * The shard an endpoint belongs to: the first 32 bits of the MD5 of its id, modulo the count (a power of two: the low
 * bits). MD5 because PostgreSQL computes the same (`shardSql`), so that a gateway lists only its shards' endpoints.
 */
export function shardOf(endpointId: string): number {
  let shard = known.get(endpointId);
  if (shard === undefined) {
    // Remembered: the controller asks for every endpoint it lists, twice a second.
    if (known.size >= KNOWN_MAX) known.clear();
    shard = createHash('md5').update(endpointId).digest().readUInt32BE(0) % SHARD_COUNT;
    known.set(endpointId, shard);
  }
  return shard;
}
const known = new Map<string, number>();
const KNOWN_MAX = 100_000;

/**
 * `shardOf` in SQL, over a text column or expression (trusted SQL, never a value): the first 8 hex digits of the MD5
 * as a 32-bit integer (signed there, the same low bits), masked to the count.
 */
export const shardSql = (column: string): string => `(('x' || left(md5(${column}), 8))::bit(32)::int & ${SHARD_COUNT - 1})`;

/** MurmurHash3's finalizer: every bit of the input moves every bit of the output (FNV-1a alone barely mixes its last characters). */
function mix(hash: number): number {
  hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b) >>> 0;
  hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35) >>> 0;
  return (hash ^ (hash >>> 16)) >>> 0;
}

/**
 * The shards `self` holds among `members` (the live gateways of its pool, itself included or not): each shard goes
 * to the member that ranks it highest (rendezvous hashing: a member that joins or leaves moves few shards), among
 * those that do not hold their even share yet (the shards divided by the members, rounded down; the remainder's
 * shards, one each, to the first members that reach it), so that the shards, and the endpoints, divide evenly.
 * Every member computes the same answer from the same member list.
 */
export function assignShards(members: Iterable<string>, self: string): Set<number> {
  const all = [...new Set([...members, self])].sort();
  const even = Math.floor(SHARD_COUNT / all.length);
  let extra = SHARD_COUNT % all.length;
  const load = new Map(all.map((member) => [member, 0]));
  const held = new Set<number>();
  for (let shard = 0; shard < SHARD_COUNT; shard++) {
    const ranked = all
      .map((member) => ({ member, rank: mix(fnv1a(`${member}/${shard}`)) }))
      .sort((a, b) => b.rank - a.rank || (a.member < b.member ? -1 : 1));
    const owner = ranked.find(({ member }) => load.get(member)! < even || (load.get(member) === even && extra > 0))!.member;
    if (load.get(owner) === even) extra--;
    load.set(owner, load.get(owner)! + 1);
    if (owner === self) held.add(shard);
  }
  return held;
}
