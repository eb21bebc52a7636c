/**
 * SQL for the controllers' leases on endpoints (exactly one gateway process acts on an endpoint at a time: the
 * holder of its lease) and for the membership that shares the endpoints among the gateways (controller_members:
 * each live gateway's row, renewed with its leases).
 */
import type { Queryable } from './database.js';

const ttl = (db: Queryable, ttlMs: number) => db`now() + ${ttlMs} * interval '1 millisecond'`;

/**
 * Takes or renews the leases on several endpoints in one statement, and answers those this owner holds afterwards.
 * Every lease it holds already is renewed; of the others, free or expired, it takes `limit` at most (null: all).
 * Which ones: each owner's own order (a hash of the endpoint id and the owner), so that gateways taking at once
 * mostly want different endpoints. The rows are written in id order, so that two gateways taking the same ones never
 * wait on each other in a cycle.
 */
export async function acquireLeases(
  db: Queryable,
  endpointIds: readonly string[],
  owner: string,
  ttlMs: number,
  limit: number | null = null,
): Promise<Set<string>> {
  if (endpointIds.length === 0) return new Set();
  const ids = endpointIds as string[];
  const rows = await db<{ endpoint_id: string }[]>`
    INSERT INTO endpoint_leases (endpoint_id, owner, expires_at)
    SELECT id, ${owner}, ${ttl(db, ttlMs)} FROM (
      SELECT c.id FROM unnest(${ids}::text[]) AS c (id) JOIN endpoint_leases l ON l.endpoint_id = c.id
      WHERE l.owner = ${owner}
      UNION ALL
      (SELECT c.id FROM unnest(${ids}::text[]) AS c (id) LEFT JOIN endpoint_leases l ON l.endpoint_id = c.id
       WHERE l.endpoint_id IS NULL OR (l.owner <> ${owner} AND l.expires_at < now())
       ORDER BY md5(c.id || ${owner}) LIMIT ${limit}::int)
    ) AS wanted ORDER BY id
    ON CONFLICT (endpoint_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
      WHERE endpoint_leases.owner = excluded.owner OR endpoint_leases.expires_at < now()
    RETURNING endpoint_id`;
  return new Set(rows.map((r) => r.endpoint_id));
}

/** The other live members, as a gateway counts them (see lease-share.ts). */
export interface Members {
  /** Other live gateways sharing the endpoints, each counted once it has run for a lease's TTL. */
  others: number;
  /** Of them, those whose replicas cannot be adopted where this owner's can (another pool). */
  elsewhere: number;
  /** The others of this owner's pool, by name: they divide the pool's shards (src/domain/shards.ts). */
  peers: string[];
  /**
   * The replicas' pools (`node`) that live members of other pools dividing shards follow (their runtimes watch them):
   * see ReconcileLoop's hand-back to them.
   */
  followedElsewhere: string[];
  /**
   * Of `elsewhere`, those that might take an endpoint with replicas that this owner hands back: all but the members
   * of other sharded pools that follow another `node` (they take no endpoint whose replicas run in this one's).
   */
  takersElsewhere: number;
}

/** What a heartbeat answers: the leases this owner holds (renewed), and the other members. */
export interface Heartbeat extends Members {
  held: Set<string>;
}

/** A pool of gateways that divide its shards, by its name's end (src/controller/controller.ts names them). */
export const SHARDED_POOL_SUFFIX = '#shards';

/** The counts of `Members` over `controller_members`, in SQL: the other owners live now and joined a TTL ago. */
const counted = (db: Queryable, owner: string, pool: string, ttlMs: number, node: string | null) => db`
  SELECT count(*)::int AS others, (count(*) FILTER (WHERE pool <> ${pool}))::int AS elsewhere,
    (count(*) FILTER (
      WHERE pool <> ${pool} AND NOT (
        right(pool, ${SHARDED_POOL_SUFFIX.length}) = ${SHARDED_POOL_SUFFIX} AND node IS NOT NULL AND node IS DISTINCT FROM ${node}::text)
    ))::int AS "takersElsewhere",
    coalesce(array_agg(owner ORDER BY owner) FILTER (WHERE pool = ${pool}), '{}') AS peers,
    coalesce(array_agg(DISTINCT node) FILTER (
      WHERE pool <> ${pool} AND node IS NOT NULL AND right(pool, ${SHARDED_POOL_SUFFIX.length}) = ${SHARDED_POOL_SUFFIX}
    ), '{}') AS "followedElsewhere"
  FROM controller_members
  WHERE owner <> ${owner} AND expires_at > now() AND joined_at <= now() - ${ttlMs} * interval '1 millisecond'`;

/**
 * This owner's lease rows among `endpointIds` (null: all of them), locked in id order, in SQL. A statement that
 * writes several lease rows locks them first this way, as `acquireLeases` writes them: two statements that lock rows
 * in the same order never wait on each other in a cycle. (An UPDATE or DELETE alone locks rows in the order its scan
 * finds them, which is no order: one renewing its rows beside another gateway taking some of them over, expired, in
 * id order, deadlocked, 40P01.) A row taken over while this one waited for it is no longer this owner's and is left
 * out (the condition is checked again on the row as locked).
 */
const ownedLocked = (db: Queryable, owner: string, endpointIds: readonly string[] | null) => db`
  SELECT endpoint_id FROM endpoint_leases
  WHERE owner = ${owner} ${endpointIds === null ? db`` : db`AND endpoint_id = ANY(${endpointIds as string[]}::text[])`}
  ORDER BY endpoint_id FOR UPDATE`;

/**
 * One statement: renews this owner's membership (in `pool`, following the replicas of `node`) and every lease it
 * holds, by `ttlMs` (their rows locked in id order first), forgets members gone for an hour, and counts the others.
 */
export async function heartbeat(db: Queryable, owner: string, pool: string, ttlMs: number, node?: string): Promise<Heartbeat> {
  const [row] = await db<(Members & { held: string[] })[]>`
    WITH member AS (
      INSERT INTO controller_members (owner, pool, node, expires_at) VALUES (${owner}, ${pool}, ${node ?? null}, ${ttl(db, ttlMs)})
      ON CONFLICT (owner) DO UPDATE SET pool = excluded.pool, node = excluded.node, expires_at = excluded.expires_at
    ), gone AS (
      DELETE FROM controller_members WHERE owner <> ${owner} AND expires_at < now() - interval '1 hour'
    ), locked AS MATERIALIZED (${ownedLocked(db, owner, null)}
    ), renewed AS (
      UPDATE endpoint_leases l SET expires_at = ${ttl(db, ttlMs)} FROM locked
      WHERE l.endpoint_id = locked.endpoint_id AND l.owner = ${owner} RETURNING l.endpoint_id
    ), members AS (${counted(db, owner, pool, ttlMs, node ?? null)})
    SELECT (SELECT coalesce(array_agg(endpoint_id), '{}') FROM renewed) AS held, others, elsewhere, peers, "followedElsewhere",
      "takersElsewhere"
    FROM members`;
  const { held, ...members } = row!;
  return { held: new Set(held), ...members };
}

/** The other members now (each interval's pass reads them: a gateway that stopped or died stops counting at once). */
export async function countMembers(db: Queryable, owner: string, pool: string, ttlMs: number, node?: string): Promise<Members> {
  const [row] = await db<Members[]>`${counted(db, owner, pool, ttlMs, node ?? null)}`;
  return row!;
}

/** Hands these endpoints' leases back (another member takes them on its next pass); their rows locked in id order first. */
export async function releaseSomeLeases(db: Queryable, owner: string, endpointIds: readonly string[]): Promise<void> {
  if (endpointIds.length === 0) return;
  await db`
    WITH locked AS MATERIALIZED (${ownedLocked(db, owner, endpointIds)})
    DELETE FROM endpoint_leases l USING locked WHERE l.endpoint_id = locked.endpoint_id AND l.owner = ${owner}`;
}

/** Hands back every lease of this owner (their rows locked in id order first), and its membership, at once: a gateway that stops. */
export async function releaseLeases(db: Queryable, owner: string): Promise<void> {
  await db`
    WITH member AS (DELETE FROM controller_members WHERE owner = ${owner}), locked AS MATERIALIZED (${ownedLocked(db, owner, null)})
    DELETE FROM endpoint_leases l USING locked WHERE l.endpoint_id = locked.endpoint_id AND l.owner = ${owner}`;
}
