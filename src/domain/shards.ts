/**
 * Shards: the unit in which gateways divide the endpoints of one pool (the Kubernetes runtime's cluster and
 * namespace) and what each watches of it. Each endpoint belongs to one of `SHARD_COUNT` shards, by a hash of its id;
 * its pods carry the shard as a label, so that a gateway watches only the pods of the shards it holds
 * (`KubernetesRuntime.watchShards`), not every pod of the cluster.
 *
 * The count and the hash are part of the pods' labels: changing either would leave running pods labelled with a
 * shard their endpoint no longer maps to (no gateway would watch them where it looks). Both are fixed.
 */

/** Shards of a pool: more than the gateways a pool runs, few enough that a gateway alone keeps a watch on each. */
export const SHARD_COUNT = 16;

/** FNV-1a (32 bits) over the string's UTF-16 code units: stable across versions and processes, fast, no allocation. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** MurmurHash3's finalizer: every bit of the input moves every bit of the output (FNV-1a alone barely mixes its last characters). */
function mix(hash: number): number {
  hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b) >>> 0;
  hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35) >>> 0;
  return (hash ^ (hash >>> 16)) >>> 0;
}

/** The shard an endpoint belongs to. */
export const shardOf = (endpointId: string): number => mix(fnv1a(endpointId)) % SHARD_COUNT;

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
