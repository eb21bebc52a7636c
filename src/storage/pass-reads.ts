/**
 * What the controller reads: one pass's read of an endpoint, in one
 * statement (the endpoint with its current version, its live replicas, and
 * the requests waiting for it in every gateway process's admission queue,
 * the demand the autoscaler adds to the engines' load), and the interval's
 * listing of the endpoints to reconcile. Both give each endpoint's stamp: a
 * pass that finds the endpoint at rest records the stamp it read, and the
 * listing shows whether it changed since.
 */
import { shardSql } from '../domain/shards.js';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { Queryable } from './database.js';
import { CURRENT_VERSION_JOIN, ENDPOINT_COLUMNS, toEndpoint, type EndpointRow } from './endpoint-rows.js';
import { REPLICA_COLUMNS, toReplica, type ReplicaRow } from './replicas-repository.js';
import { LIVE_STATES } from './replica-states-sql.js';

/**
 * An endpoint's stamp, in SQL over its row `e` and the counts of its live replicas (`live`) and of its ready ones
 * (`ready`): changes with every write to the row (each sets updated_at) and with either count.
 */
const stampSql = (live: string, ready: string) => `e.updated_at::text || '/' || ${live} || '/' || ${ready}`;

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
 * The endpoint's live replicas in one scan, over the endpoint `e` (a lateral subquery): oldest first as one JSON array
 * (`replicas`: one row per pass, not one per replica, so the endpoint's columns, its version's spec among them, are
 * sent and parsed once), and how many there are and are ready (`live`, `ready`: its stamp's counts).
 */
const LIVE_REPLICAS = `LATERAL (SELECT coalesce(json_agg(json_build_object(${REPLICA_COLUMNS.split(',')
  .map((column) => `'${column.trim()}', r.${column.trim()}`)
  .join(', ')}, 'model', CASE WHEN r.state = 'STARTING' THEN r.model END) ORDER BY r.created_at, r.id), '[]'::json) AS replicas,
    count(*) AS live, count(*) FILTER (WHERE r.state = 'READY') AS ready
  FROM replicas r WHERE r.endpoint_id = e.id AND r.state IN ${LIVE_STATES})`;

/** A replica as JSON gives it: its times as text. */
type ReplicaJson = Omit<ReplicaRow, 'created_at' | 'ready_at'> & { created_at: string; ready_at: string | null; model: unknown };

/** The endpoint's pass state, or undefined when it does not exist. `staleMs`: queue counts older than this are a dead process's. */
export async function readPassState(db: Queryable, endpointId: string, staleMs: number): Promise<PassState | undefined> {
  return (await readPassStates(db, [endpointId], staleMs)).get(endpointId);
}

/** The pass states of several endpoints in one statement, by id (an id that does not exist has none). */
export async function readPassStates(db: Queryable, endpointIds: readonly string[], staleMs: number): Promise<Map<string, PassState>> {
  const rows = await db<(EndpointRow & { pass_replicas: ReplicaJson[]; queued_demand: number; pass_stamp: string })[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)}, c.replicas AS pass_replicas,
      ${queuedSql(db, staleMs)} AS queued_demand, ${db.unsafe(stampSql('c.live', 'c.ready'))} AS pass_stamp
    FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)} CROSS JOIN ${db.unsafe(LIVE_REPLICAS)} c
    WHERE e.id = ANY(${endpointIds as string[]})`;
  return new Map(
    rows.map((row) => [
      row.id,
      {
        endpoint: toEndpoint(row),
        replicas: row.pass_replicas.map(({ model, ...r }) => ({
          ...toReplica({ ...r, created_at: new Date(r.created_at), ready_at: r.ready_at === null ? null : new Date(r.ready_at) }),
          ...(model == null ? {} : { model }),
        })),
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
  /**
   * Whether its replicas run in the listing's `awayNodes`: every serving (READY) one, when one serves; else every live
   * one, when it has any.
   */
  away: boolean;
}

/**
 * Endpoints the controller still has to look after: all but deleted ones already cleaned up, the oldest first; with
 * `shards`, those of these shards alone (src/domain/shards.ts: a gateway lists the shards it follows). Every
 * gateway lists them every interval. The live replicas are joined to their endpoints and counted per endpoint, the
 * queued requests grouped once: whatever plan PostgreSQL picks, its work is linear in the endpoints and replicas.
 * Grouping the replicas first and joining the groups was a little faster with fresh statistics (5.9 against 7.3 ms
 * at 1,000 endpoints), but on tables not yet analyzed (a fleet created at once) the planner estimated one endpoint
 * and regrouped every replica for each: 100 to 550 ms a listing, twice a second (BENCHMARKS.md, session 36).
 * `awayNodes`: replicas' pools (`node`) another gateway follows (see EndpointToReconcile.away).
 */
export async function endpointsToReconcile(
  db: Queryable,
  queueStaleMs: number,
  shards?: readonly number[],
  awayNodes: readonly string[] = [],
): Promise<EndpointToReconcile[]> {
  return db<EndpointToReconcile[]>`
    SELECT e.id, ${db.unsafe(stampSql('count(r.id)', "count(r.id) FILTER (WHERE r.state = 'READY')"))} AS stamp, coalesce(q.queued, 0)::int AS queued,
      CASE WHEN count(r.id) FILTER (WHERE r.state = 'READY') > 0
        THEN count(r.id) FILTER (WHERE r.state = 'READY') = count(r.id) FILTER (WHERE r.state = 'READY' AND r.node = ANY(${awayNodes as string[]}::text[]))
        ELSE count(r.id) > 0 AND count(r.id) = count(r.id) FILTER (WHERE r.node = ANY(${awayNodes as string[]}::text[]))
      END AS away
    FROM endpoints e
    LEFT JOIN replicas r ON r.endpoint_id = e.id AND r.state IN ${db.unsafe(LIVE_STATES)}
    LEFT JOIN (SELECT endpoint_id, sum(queued) AS queued FROM gateway_queue_depth
      WHERE updated_at > now() - ${queueStaleMs} * interval '1 millisecond' GROUP BY endpoint_id) q ON q.endpoint_id = e.id
    WHERE e.cleaned_at IS NULL ${shards ? db`AND ${db.unsafe(shardSql('e.id'))} = ANY(${shards as number[]}::int[])` : db``}
    GROUP BY e.id, q.queued
    ORDER BY e.seq`;
}
