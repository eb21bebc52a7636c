/**
 * What the controller reads: one pass's read of an endpoint, in one
 * statement (the endpoint with its current version, its live replicas, and
 * the requests waiting for it in every gateway process's admission queue,
 * the demand the autoscaler adds to the engines' load), and the interval's
 * listing of the endpoints to reconcile. Both give each endpoint's stamp: a
 * pass that finds the endpoint at rest records the stamp it read, and the
 * listing shows whether it changed since.
 */
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { Queryable } from './database.js';
import { CURRENT_VERSION_JOIN, ENDPOINT_COLUMNS, toEndpoint, type EndpointRow } from './endpoint-rows.js';
import { REPLICA_COLUMNS, toReplica, type ReplicaRow } from './replicas-repository.js';

/**
 * An endpoint's stamp, in SQL over its row `e`: changes with every write to the row (each sets updated_at) and with
 * the counts of its live and of its ready replicas.
 */
const STAMP = `e.updated_at::text || (SELECT '/' || count(*) || '/' || count(*) FILTER (WHERE r.state = 'READY')
  FROM replicas r WHERE r.endpoint_id = e.id AND r.state IN ('STARTING', 'READY', 'DRAINING'))`;

/** Whether the endpoint a stamp was read from had every live replica READY (none starting or draining). */
export function settled(stamp: string): boolean {
  const [, live, ready] = /\/(\d+)\/(\d+)$/.exec(stamp) ?? [];
  return live !== undefined && live === ready;
}

/** The requests queued for the endpoint `e` in every gateway process that published within `$staleMs`, in SQL. */
const queuedSql = (db: Queryable, staleMs: number) => db`(SELECT coalesce(sum(q.queued), 0) FROM gateway_queue_depth q
  WHERE q.endpoint_id = e.id AND q.updated_at > now() - ${staleMs} * interval '1 millisecond')::int`;

export interface PassState {
  /** Deleted ones too: the controller stops their replicas. */
  endpoint: EndpointRecord;
  /** STARTING, READY and DRAINING, the oldest first. */
  replicas: ReplicaRecord[];
  /** Requests queued for it over every gateway process that published within the stale window. */
  queued: number;
  /** Its stamp as read. */
  stamp: string;
}

/**
 * The endpoint's live replicas, oldest first, as one JSON array (one row per pass, not one per replica: the endpoint's
 * columns, its version's spec among them, are sent and parsed once).
 */
const REPLICAS_JSON = `(SELECT coalesce(json_agg(json_build_object(${REPLICA_COLUMNS.split(',')
  .map((column) => `'${column.trim()}', r.${column.trim()}`)
  .join(', ')}) ORDER BY r.created_at, r.id), '[]'::json)
  FROM replicas r WHERE r.endpoint_id = e.id AND r.state IN ('STARTING', 'READY', 'DRAINING'))`;

/** A replica as JSON gives it: its times as text. */
type ReplicaJson = Omit<ReplicaRow, 'created_at' | 'ready_at'> & { created_at: string; ready_at: string | null };

/** The endpoint's pass state, or undefined when it does not exist. `staleMs`: queue counts older than this are a dead process's. */
export async function readPassState(db: Queryable, endpointId: string, staleMs: number): Promise<PassState | undefined> {
  return (await readPassStates(db, [endpointId], staleMs)).get(endpointId);
}

/** The pass states of several endpoints in one statement, by id (an id that does not exist has none). */
export async function readPassStates(db: Queryable, endpointIds: readonly string[], staleMs: number): Promise<Map<string, PassState>> {
  const rows = await db<(EndpointRow & { pass_replicas: ReplicaJson[]; queued_demand: number; pass_stamp: string })[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)}, ${db.unsafe(REPLICAS_JSON)} AS pass_replicas,
      ${queuedSql(db, staleMs)} AS queued_demand, ${db.unsafe(STAMP)} AS pass_stamp
    FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    WHERE e.id = ANY(${endpointIds as string[]})`;
  return new Map(
    rows.map((row) => [
      row.id,
      {
        endpoint: toEndpoint(row),
        replicas: row.pass_replicas.map((r) =>
          toReplica({ ...r, created_at: new Date(r.created_at), ready_at: r.ready_at === null ? null : new Date(r.ready_at) }),
        ),
        queued: row.queued_demand,
        stamp: row.pass_stamp,
      },
    ]),
  );
}

/** An endpoint the controller looks after, as the interval's listing shows it. */
export interface EndpointToReconcile {
  id: string;
  stamp: string;
  /** Requests queued for it over every gateway process that published within the stale window. */
  queued: number;
}

/** Endpoints the controller still has to look after: all but deleted ones already cleaned up, the oldest first. */
export async function endpointsToReconcile(db: Queryable, queueStaleMs: number): Promise<EndpointToReconcile[]> {
  return db<EndpointToReconcile[]>`
    SELECT e.id, ${db.unsafe(STAMP)} AS stamp, ${queuedSql(db, queueStaleMs)} AS queued
    FROM endpoints e WHERE e.cleaned_at IS NULL ORDER BY e.seq`;
}
