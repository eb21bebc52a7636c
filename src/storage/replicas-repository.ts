/** SQL for replicas, the guarded lock of a leased endpoint, and the local runtime's count of a machine's capacity. */
import type { GpuType } from '../domain/instance-catalog.js';
import type { ReplicaRecord, ReplicaState } from '../domain/replica.js';
import { replicaStatesBefore } from '../domain/replica-transitions.js';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { Queryable } from './database.js';
import { CURRENT_VERSION_JOIN, ENDPOINT_COLUMNS, toEndpoint, type EndpointRow } from './endpoint-rows.js';
import { ENDED_STATES, LIVE_STATES } from './replica-states-sql.js';

export interface ReplicaRow {
  id: string;
  endpoint_id: string;
  version_index: number;
  runtime: string;
  node: string;
  gpu_type: GpuType;
  num_gpu: number;
  state: ReplicaState;
  address: string | null;
  locator: string | null;
  engine_token: string | null;
  last_error: string | null;
  created_at: Date;
  ready_at: Date | null;
}

export const REPLICA_COLUMNS =
  'id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state, address, locator, engine_token, last_error, created_at, ready_at';

export const toReplica = (r: ReplicaRow): ReplicaRecord => ({
  id: r.id,
  endpointId: r.endpoint_id,
  versionIndex: r.version_index,
  runtime: r.runtime,
  node: r.node,
  gpuType: r.gpu_type,
  numGpu: r.num_gpu,
  state: r.state,
  address: r.address,
  locator: r.locator,
  token: r.engine_token,
  lastError: r.last_error,
  createdAt: r.created_at,
  readyAt: r.ready_at,
});

export async function liveReplicas(db: Queryable, endpointId: string): Promise<ReplicaRecord[]> {
  const rows = await db<ReplicaRow[]>`
    SELECT ${db.unsafe(REPLICA_COLUMNS)} FROM replicas
    WHERE endpoint_id = ${endpointId} AND state IN ${db.unsafe(LIVE_STATES)} ORDER BY created_at, id`;
  return rows.map(toReplica);
}

/** Ready replicas of many endpoints, for the router. */
export async function readyReplicas(db: Queryable, endpointIds: readonly string[]): Promise<ReplicaRecord[]> {
  const rows = await db<ReplicaRow[]>`
    SELECT ${db.unsafe(REPLICA_COLUMNS)} FROM replicas
    WHERE endpoint_id = ANY(${endpointIds as string[]}) AND state = 'READY' ORDER BY created_at, id`;
  return rows.map(toReplica);
}

export async function liveReplicaIdsOnNode(db: Queryable, node: string): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    SELECT id FROM replicas WHERE node = ${node} AND state IN ${db.unsafe(LIVE_STATES)}`;
  return rows.map((r) => r.id);
}

/**
 * Replicas of the endpoint that failed with `lastError` since `since`, and since the endpoint's last status change
 * caused by one of `resets` (a user's restart, say, which starts the count anew): how many, and when the last one
 * did (milliseconds since the epoch). The crash-loop count.
 */
export async function failuresSince(
  db: Queryable,
  endpointId: string,
  since: Date,
  lastError: string,
  resets: readonly string[] = [],
): Promise<{ count: number; lastAt: number | null }> {
  const [row] = await db<{ n: number; last: Date | null }[]>`
    WITH reset AS (
      SELECT coalesce(max(created_at), '-infinity') AS at FROM endpoint_events
      WHERE endpoint_id = ${endpointId} AND type = 'STATUS_CHANGED' AND cause = ANY(${resets as string[]}::text[])
    )
    SELECT count(*)::int AS n, max(coalesce(r.stopped_at, r.created_at)) AS last FROM replicas r, reset
    WHERE r.endpoint_id = ${endpointId} AND r.state = 'FAILED' AND r.last_error = ${lastError}
      AND coalesce(r.stopped_at, r.created_at) >= ${since} AND coalesce(r.stopped_at, r.created_at) > reset.at`;
  return { count: row!.n, lastAt: row!.last ? row!.last.getTime() : null };
}

/**
 * GPUs (or CPU-backed slots) of a kind that live replicas hold in a pool (a machine), counted under a per-pool,
 * per-kind transaction lock: the count and the insert of the replica that follows it (`insertReplica`, in the same
 * transaction) are atomic across gateway processes.
 */
export async function lockedUse(db: Queryable, node: string, gpuType: GpuType): Promise<number> {
  await db`SELECT pg_advisory_xact_lock(hashtext(${`capacity:${node}:${gpuType}`}))`;
  return (await requestedGpus(db, node, gpuType))[gpuType] ?? 0;
}

/** GPUs (or CPU-backed slots) of each kind (or of `gpuType` alone) that the live replicas of a pool request. */
export async function requestedGpus(db: Queryable, node: string, gpuType?: GpuType): Promise<Partial<Record<GpuType, number>>> {
  const rows = await db<{ gpu_type: GpuType; n: number }[]>`
    SELECT gpu_type, sum(num_gpu)::int AS n FROM replicas
    WHERE node = ${node} ${gpuType ? db`AND gpu_type = ${gpuType}` : db``} AND state IN ${db.unsafe(LIVE_STATES)}
    GROUP BY gpu_type`;
  return Object.fromEntries(rows.map((r) => [r.gpu_type, r.n]));
}

/** A new replica, as its row records it: where its runtime admitted it, and what it holds there. */
export type NewReplica = Pick<ReplicaRecord, 'id' | 'endpointId' | 'versionIndex' | 'runtime' | 'node' | 'gpuType' | 'numGpu'>;

/** A new replica's row, STARTING, in the pool its runtime admitted it to. */
export async function insertReplica(db: Queryable, replica: NewReplica): Promise<void> {
  await insertReplicas(db, [replica]);
}

/** New replicas' rows, STARTING, in one statement. */
export async function insertReplicas(db: Queryable, replicas: readonly NewReplica[]): Promise<void> {
  if (replicas.length === 0) return;
  await db`
    INSERT INTO replicas ${db(
      replicas.map((r) => ({
        id: r.id,
        endpoint_id: r.endpointId,
        version_index: r.versionIndex,
        runtime: r.runtime,
        node: r.node,
        gpu_type: r.gpuType,
        num_gpu: r.numGpu,
        state: 'STARTING',
      })),
    )}`;
}

/** A move of a replica's row: to `state`, with what else the row records (a value left out keeps the row's). */
export interface ReplicaMove {
  state: ReplicaState;
  address?: string | null;
  locator?: string | null;
  token?: string;
  lastError?: string;
  /** What its start resolved the version's model to (JSON). */
  model?: unknown;
}

/**
 * Moves a replica to `change.state`, only from the states replica-transitions.ts allows: of two writers acting on
 * the same snapshot the first applies and the second changes nothing (a STOPPED or FAILED replica stays so). True
 * when the move applied.
 */
export async function markReplica(db: Queryable, id: string, change: ReplicaMove): Promise<boolean> {
  return (await markReplicas(db, [{ id, ...change }])).has(id);
}

/** PostgreSQL's type id of `text`: the moves' columns are sent as text arrays, nulls included. */
const TEXT = 25;

/**
 * Moves several replicas, each as `markReplica` does, in one statement; answers the ids whose move applied. Each
 * replica appears once (the caller splits repeated ones into successive calls); the rows are locked in id order. The
 * ids are also given as a list the primary key's index can look up (a generic plan of the join alone scans the table).
 */
export async function markReplicas(db: Queryable, moves: readonly (ReplicaMove & { id: string })[]): Promise<Set<string>> {
  if (moves.length === 0) return new Set();
  const sorted = [...moves].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const column = (value: (m: ReplicaMove & { id: string }) => string | null | undefined) =>
    db.array(sorted.map((m) => value(m) ?? null) as string[], TEXT);
  const ids = column((m) => m.id);
  const rows = await db<{ id: string }[]>`
    UPDATE replicas r SET
      state = m.state,
      address = coalesce(m.address, r.address),
      locator = coalesce(m.locator, r.locator),
      engine_token = coalesce(m.token, r.engine_token),
      last_error = coalesce(m.last_error, r.last_error),
      model = coalesce(m.model::jsonb, r.model),
      ready_at = CASE WHEN m.state = 'READY' THEN now() ELSE r.ready_at END,
      stopped_at = CASE WHEN m.state IN ${db.unsafe(ENDED_STATES)} THEN now() ELSE r.stopped_at END
    FROM unnest(${ids}::text[], ${column((m) => m.state)}::text[], ${column((m) => m.address)}::text[],
      ${column((m) => m.locator)}::text[], ${column((m) => m.token)}::text[], ${column((m) => m.lastError)}::text[],
      ${column((m) => (m.model == null ? null : JSON.stringify(m.model)))}::text[], ${column((m) => replicaStatesBefore(m.state).join(','))}::text[])
      AS m(id, state, address, locator, token, last_error, model, from_states)
    WHERE r.id = m.id AND r.id = ANY(${ids}::text[])
      AND (r.state = ANY(string_to_array(m.from_states, ',')) OR (r.state = m.state AND m.state IN ('STARTING', 'DRAINING')))
    RETURNING r.id`;
  return new Set(rows.map((r) => r.id));
}

/** The replica's state now (undefined when it has no row). */
export async function replicaState(db: Queryable, id: string): Promise<ReplicaState | undefined> {
  const [row] = await db<{ state: ReplicaState }[]>`SELECT state FROM replicas WHERE id = ${id}`;
  return row?.state;
}

/**
 * Hands a ready (or starting) replica from one version to another (that it serves as it is); false when it was no
 * longer on `from`, in that state.
 */
export async function retagReplica(
  db: Queryable,
  id: string,
  from: number,
  to: number,
  state: 'READY' | 'STARTING' = 'READY',
): Promise<boolean> {
  const rows = await db`
    UPDATE replicas SET version_index = ${to}
    WHERE id = ${id} AND version_index = ${from} AND state = ${state}
    RETURNING id`;
  return rows.length === 1;
}

/**
 * The endpoint `e` under `owner`'s live lease, its row locked for a write and the lease's row share-locked, in SQL;
 * `running`: only while the endpoint wants to run (checked on the row as locked).
 */
const leasedAndLocked = (db: Queryable, endpointId: string, owner: string, running = false) => db`
  JOIN endpoint_leases l ON l.endpoint_id = e.id
  WHERE e.id = ${endpointId} AND l.owner = ${owner} AND l.expires_at > now()
    ${running ? db`AND e.desired_state = 'RUNNING'` : db``}
  FOR UPDATE OF e FOR SHARE OF l`;

/**
 * New replicas of one endpoint (`ids`, each as `replica`), STARTING, written in one statement while `owner` holds the
 * endpoint's lease and the endpoint wants to run, both checked on its row as locked (as lockLeasedEndpoint locks it):
 * for a runtime that admits every replica. The ids written: all of them, or none when the lease is lost, the endpoint
 * gone or no longer wanted running.
 */
export async function claimReplicas(
  db: Queryable,
  owner: string,
  replica: Omit<NewReplica, 'id'>,
  ids: readonly string[],
): Promise<string[]> {
  const { endpointId, versionIndex, runtime, node, gpuType, numGpu } = replica;
  const rows = await db<{ id: string }[]>`
    WITH target AS (SELECT e.id FROM endpoints e ${leasedAndLocked(db, endpointId, owner, true)})
    INSERT INTO replicas (id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state)
    SELECT n.id, target.id, ${versionIndex}::int, ${runtime}, ${node}, ${gpuType}, ${numGpu}::int, 'STARTING'
    FROM target CROSS JOIN unnest(${ids as string[]}::text[]) AS n(id)
    RETURNING id`;
  return rows.map((r) => r.id);
}

/**
 * Locks the endpoint's row for a write (FOR UPDATE) when `owner` still holds its lease, whose row is share-locked
 * with it (no other process takes the lease meanwhile); false when the lease is lost or the endpoint gone. One
 * statement: the endpoint is read afresh after it (a row locked here may have changed while this waited).
 */
export async function lockLeasedEndpoint(db: Queryable, endpointId: string, owner: string): Promise<boolean> {
  const rows = await db`SELECT 1 FROM endpoints e ${leasedAndLocked(db, endpointId, owner)}`;
  return rows.length > 0;
}

/**
 * Locks the endpoint's row as lockLeasedEndpoint does and reads it with its current version, in one statement;
 * undefined when the lease is lost, the endpoint gone, or the row changed to another version while the lock was
 * awaited (the statement's re-check of the locked row joins the version its snapshot saw): the caller then locks,
 * and reads afresh.
 */
export async function lockAndReadLeasedEndpoint(db: Queryable, endpointId: string, owner: string): Promise<EndpointRecord | undefined> {
  const [row] = await db<EndpointRow[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)} FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    ${leasedAndLocked(db, endpointId, owner)}`;
  return row ? toEndpoint(row) : undefined;
}
