/**
 * Reads for users' views of an endpoint's replicas and its event history:
 * what replicas it has and had lately, how many failed, and pages of its
 * events. Only what a user may see is selected (no address, locator or token).
 */
import type { EndpointEventRecord } from '../domain/endpoint.js';
import type { GpuType } from '../domain/instance-catalog.js';
import type { ReplicaState } from '../domain/replica.js';
import type { Queryable } from './database.js';
import { EVENT_COLUMNS, toEvent, type EventRow } from './endpoint-rows.js';
import { ENDED_STATES, LIVE_STATES } from './replica-states-sql.js';

/** A replica as its endpoint's users see it. */
export interface ReplicaView {
  id: string;
  endpointId: string;
  versionIndex: number;
  runtime: string;
  /** The machine or pool it runs in (the runtime's node), never a process or pod id. */
  node: string;
  gpuType: GpuType;
  numGpu: number;
  state: ReplicaState;
  lastError: string | null;
  createdAt: Date;
  readyAt: Date | null;
  stoppedAt: Date | null;
}

interface ReplicaViewRow {
  id: string;
  endpoint_id: string;
  version_index: number;
  runtime: string;
  node: string;
  gpu_type: GpuType;
  num_gpu: number;
  state: ReplicaState;
  last_error: string | null;
  created_at: Date;
  ready_at: Date | null;
  stopped_at: Date | null;
}

const COLUMNS = 'id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state, last_error, created_at, ready_at, stopped_at';

const toView = (r: ReplicaViewRow): ReplicaView => ({
  id: r.id,
  endpointId: r.endpoint_id,
  versionIndex: r.version_index,
  runtime: r.runtime,
  node: r.node,
  gpuType: r.gpu_type,
  numGpu: r.num_gpu,
  state: r.state,
  lastError: r.last_error,
  createdAt: r.created_at,
  readyAt: r.ready_at,
  stoppedAt: r.stopped_at,
});

/** The endpoint's live replicas, then those that ended since `endedSince` (newest first, at most `maxEnded`). */
export async function endpointReplicas(
  db: Queryable,
  endpointId: string,
  options: { endedSince: Date; maxEnded: number },
): Promise<ReplicaView[]> {
  const rows = await db<ReplicaViewRow[]>`
    (SELECT ${db.unsafe(COLUMNS)} FROM replicas
      WHERE endpoint_id = ${endpointId} AND state IN ${db.unsafe(LIVE_STATES)} ORDER BY created_at, id)
    UNION ALL
    (SELECT ${db.unsafe(COLUMNS)} FROM replicas
      WHERE endpoint_id = ${endpointId} AND state IN ${db.unsafe(ENDED_STATES)}
        AND coalesce(stopped_at, created_at) >= ${options.endedSince}
      ORDER BY coalesce(stopped_at, created_at) DESC, id DESC LIMIT ${options.maxEnded})`;
  return rows.map(toView);
}

/** One replica of the endpoint, whatever its state. */
export async function endpointReplica(db: Queryable, endpointId: string, replicaId: string): Promise<ReplicaView | undefined> {
  const rows = await db<ReplicaViewRow[]>`
    SELECT ${db.unsafe(COLUMNS)} FROM replicas WHERE endpoint_id = ${endpointId} AND id = ${replicaId}`;
  return rows[0] && toView(rows[0]);
}

/**
 * The newest replica of the endpoint: a live one first (READY before the others), else the last that ended. Two reads
 * of one row each, one per index (the live replicas', the ended ones'), not a sort of the endpoint's whole history.
 */
export async function newestReplica(db: Queryable, endpointId: string): Promise<ReplicaView | undefined> {
  const rows = await db<ReplicaViewRow[]>`
    SELECT ${db.unsafe(COLUMNS)} FROM (
      (SELECT *, 0 AS rank FROM replicas WHERE endpoint_id = ${endpointId} AND state IN ${db.unsafe(LIVE_STATES)}
        ORDER BY CASE state WHEN 'READY' THEN 0 WHEN 'STARTING' THEN 1 ELSE 2 END, coalesce(stopped_at, created_at) DESC, id DESC
        LIMIT 1)
      UNION ALL
      (SELECT *, 1 AS rank FROM replicas WHERE endpoint_id = ${endpointId} AND state IN ${db.unsafe(ENDED_STATES)}
        ORDER BY coalesce(stopped_at, created_at) DESC, id DESC LIMIT 1)
    ) newest ORDER BY rank LIMIT 1`;
  return rows[0] && toView(rows[0]);
}

/** Replicas of the endpoint that FAILED since `since`: how many, and the last of them. */
export async function failedSince(db: Queryable, endpointId: string, since: Date): Promise<{ count: number; last: ReplicaView | null }> {
  const rows = await db<(ReplicaViewRow & { n: number })[]>`
    SELECT ${db.unsafe(COLUMNS)}, count(*) OVER ()::int AS n FROM replicas
    WHERE endpoint_id = ${endpointId} AND state = 'FAILED' AND coalesce(stopped_at, created_at) >= ${since}
    ORDER BY coalesce(stopped_at, created_at) DESC, id DESC LIMIT 1`;
  return { count: rows[0]?.n ?? 0, last: rows[0] ? toView(rows[0]) : null };
}

/** The endpoint's events after the event id `after` in the page's order: oldest first (ids above it) or newest first (below it). */
export async function eventPage(
  db: Queryable,
  endpointId: string,
  page: { after: number; limit: number; newestFirst: boolean },
): Promise<EndpointEventRecord[]> {
  const rows = page.newestFirst
    ? await db<EventRow[]>`
        SELECT ${db.unsafe(EVENT_COLUMNS)} FROM endpoint_events
        WHERE endpoint_id = ${endpointId} AND id < ${String(page.after)}::bigint ORDER BY id DESC LIMIT ${page.limit}`
    : await db<EventRow[]>`
        SELECT ${db.unsafe(EVENT_COLUMNS)} FROM endpoint_events
        WHERE endpoint_id = ${endpointId} AND id > ${String(page.after)}::bigint ORDER BY id LIMIT ${page.limit}`;
  return rows.map(toEvent);
}

/** Where the runtime placed a replica, in its own terms: for the runtime's calls only, never shown. */
export async function replicaLocator(db: Queryable, replicaId: string): Promise<string | null> {
  const [row] = await db<{ locator: string | null }[]>`SELECT locator FROM replicas WHERE id = ${replicaId}`;
  return row?.locator ?? null;
}
