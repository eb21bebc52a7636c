/**
 * SQL for endpoints: insert, read (always with the current version, in one
 * statement), lock, list, and the state the controller and the API write.
 * Versions are in versions-repository.ts, the event log in
 * events-repository.ts, the row mapping in endpoint-rows.ts.
 */
import type { DownloadProgress, EndpointRecord } from '../domain/endpoint.js';
import type { ProjectRecord, TeamRecord } from '../domain/identity.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { DesiredState, EndpointErrorCode, EndpointPhase, EndpointStatus } from '../domain/lifecycle.js';
import type { Queryable, Sql } from './database.js';
import { CURRENT_VERSION_JOIN, ENDPOINT_COLUMNS, toEndpoint, type EndpointRow } from './endpoint-rows.js';
import { EVENT_ORDER_LOCK } from './events-repository.js';

export async function insertEndpoint(
  db: Queryable,
  e: {
    id: string;
    projectId: string;
    teamId: string;
    creatorId: string;
    status: EndpointStatus;
    phase: EndpointPhase | null;
    desiredState: DesiredState;
    idempotencyKey?: string | null;
  },
): Promise<boolean> {
  // With a key, a concurrent insert of the same key waits for the other to commit, then inserts nothing.
  const rows = await db`
    INSERT INTO endpoints (id, project_id, team_id, creator_id, status, phase, desired_state, idempotency_key)
    VALUES (${e.id}, ${e.projectId}, ${e.teamId}, ${e.creatorId}, ${e.status}, ${e.phase}, ${e.desiredState}, ${e.idempotencyKey ?? null})
    ON CONFLICT (project_id, idempotency_key) WHERE idempotency_key IS NOT NULL AND deleted_at IS NULL DO NOTHING
    RETURNING 1`;
  return rows.length > 0;
}

/** The live endpoint an idempotency key created in a project. */
export async function findEndpointIdByKey(db: Queryable, projectId: string, idempotencyKey: string): Promise<string | undefined> {
  const rows = await db<{ id: string }[]>`
    SELECT id FROM endpoints WHERE project_id = ${projectId} AND idempotency_key = ${idempotencyKey} AND deleted_at IS NULL`;
  return rows[0]?.id;
}

/** Which endpoints a read sees: live ones, or (for the controller, which cleans up after a delete) deleted ones too. */
export interface EndpointVisibility {
  includeDeleted?: boolean;
}

/** Endpoints by id, with their current versions; live ones only unless asked. */
export async function findEndpoints(db: Queryable, ids: readonly string[], options: EndpointVisibility = {}): Promise<EndpointRecord[]> {
  const rows = await db<EndpointRow[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)} FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    WHERE e.id = ANY(${ids as string[]}) ${options.includeDeleted ? db`` : db`AND e.deleted_at IS NULL`}`;
  return rows.map(toEndpoint);
}

export interface EndpointWithOwners {
  endpoint: EndpointRecord;
  project: ProjectRecord;
  team: TeamRecord;
}

/**
 * Live endpoints with their project and team, in one statement: a reader
 * that shows an endpoint's owners needs no second and third round trip.
 */
export async function findEndpointsWithOwners(db: Queryable, ids: readonly string[]): Promise<EndpointWithOwners[]> {
  const rows = await db<(EndpointRow & { project_name: string; project_created_at: Date; team_name: string; team_created_at: Date })[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)}, p.name AS project_name, p.created_at AS project_created_at,
      t.name AS team_name, t.created_at AS team_created_at
    FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    JOIN projects p ON p.id = e.project_id
    JOIN teams t ON t.id = e.team_id
    WHERE e.id = ANY(${ids as string[]}) AND e.deleted_at IS NULL`;
  return rows.map((r) => ({
    endpoint: toEndpoint(r),
    project: { id: r.project_id, teamId: r.team_id, name: r.project_name, createdAt: r.project_created_at },
    team: { id: r.team_id, name: r.team_name, createdAt: r.team_created_at },
  }));
}

/**
 * Row-locks one live endpoint for the rest of the transaction, then reads it.
 * The lock is taken alone first: a locking read that joins the current
 * version would, after waiting on a concurrent writer, re-check the join
 * against a version row its snapshot cannot see, and find nothing. The read
 * that follows is a new statement with a fresh snapshot.
 */
export async function lockEndpoint(db: Queryable, id: string, options: EndpointVisibility = {}): Promise<EndpointRecord | undefined> {
  const locked = await db`
    SELECT 1 FROM endpoints WHERE id = ${id} ${options.includeDeleted ? db`` : db`AND deleted_at IS NULL`} FOR UPDATE`;
  if (locked.length === 0) return undefined;
  const [endpoint] = await findEndpoints(db, [id], options);
  return endpoint;
}

/** One page of live endpoints in creation order, in the given projects or teams. */
export async function listEndpoints(
  db: Queryable,
  scope: { projectIds: readonly string[] } | { teamIds: readonly string[] },
  page: { afterSeq: number; limit: number },
): Promise<EndpointRecord[]> {
  const filter =
    'projectIds' in scope ? db`e.project_id = ANY(${scope.projectIds as string[]})` : db`e.team_id = ANY(${scope.teamIds as string[]})`;
  const rows = await db<EndpointRow[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)} FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    WHERE ${filter} AND e.deleted_at IS NULL AND e.seq > ${page.afterSeq}
    ORDER BY e.seq LIMIT ${page.limit}`;
  return rows.map(toEndpoint);
}

export async function updateEndpointState(
  db: Queryable,
  id: string,
  change: {
    status: EndpointStatus;
    phase: EndpointPhase | null;
    errorCode: EndpointErrorCode | null;
    desiredState: DesiredState;
    currentVersion?: number;
  },
): Promise<void> {
  await db`
    UPDATE endpoints SET
      status = ${change.status},
      phase = ${change.phase},
      error_code = ${change.errorCode},
      desired_state = ${change.desiredState},
      current_version = coalesce(${change.currentVersion ?? null}::int, current_version),
      updated_at = now()
    WHERE id = ${id}`;
}

/**
 * The counts an endpoint shows, from its READY replicas (`ready`): how many, how many of its current version, and
 * `desiredReplicas`. SHOWN_COUNTS below is the same rule in SQL (refreshReplicaCounts and a transition's statement write it).
 */
export function countsOf(endpoint: EndpointRecord, ready: readonly ReplicaRecord[], desiredReplicas: number) {
  return {
    currReplicaCnt: ready.length,
    desiredReplicaCnt: desiredReplicas,
    updatedReplicaCnt: ready.filter((r) => r.versionIndex === endpoint.current.versionIndex).length,
  };
}

/**
 * The desired count a refresh writes: a number, or at least a number (`{ atLeast: 0 }`: the count shown, kept). A
 * step that runs beside the passes (a warm-up) asks for at least what it needs: the passes' scaling decides the rest,
 * and a count read before a scale-out is not written back over it.
 */
export type DesiredCount = number | { readonly atLeast: number };

/** The count shown, kept (a step that does not decide how many replicas are wanted). */
export const KEEP_DESIRED: DesiredCount = Object.freeze({ atLeast: 0 });

/** A refresh of one endpoint's counts: the desired count it writes, and the cause its event names. */
export interface CountsRefresh {
  id: string;
  desired: DesiredCount;
  cause: string;
}

const [TEXT, INT4] = [25, 23];

/**
 * Makes the endpoint show the counts of its replicas now (countsOf above, counted here by the database) and
 * `desired`, with a REPLICAS_CHANGED event (`cause`), in one statement: when they are shown already, it writes
 * nothing and locks nothing. The endpoint's row is locked before the event's order lock is taken, as every writer
 * of the row does. True when they changed.
 */
export async function refreshReplicaCounts(db: Sql, id: string, desired: DesiredCount, cause: string): Promise<boolean> {
  return (await refreshReplicaCountsOf(db, [{ id, desired, cause }])).has(id);
}

/**
 * The counts endpoint `e` should show (countsOf's rule, in SQL), as columns `curr`, `updated` and `desired`: its READY
 * replicas, those of its current version, and the desired count asked, `a.exact`, else at least `a.floor` (the count
 * shown kept otherwise).
 */
export const SHOWN_COUNTS = `
  (SELECT count(*) FROM replicas r WHERE r.endpoint_id = e.id AND r.state = 'READY')::int AS curr,
  (SELECT count(*) FROM replicas r WHERE r.endpoint_id = e.id AND r.state = 'READY' AND r.version_index = e.current_version)::int
    AS updated,
  coalesce(a.exact, greatest(e.desired_replica_cnt, a.floor)) AS desired`;

/**
 * refreshReplicaCounts for several endpoints (each once) in one statement; answers the ids whose counts changed.
 * The rows to write are locked in id order; the event order lock is taken once every one is locked and written (as
 * every writer takes it: after its row locks); the events are appended in the order of the ids.
 *
 * The counts and the desired count are read in the statement's snapshot, taken before a row lock was awaited. A row
 * that changed while this waited (a transition wrote newer counts, an update another desired count) is not written
 * with values from the older snapshot: its refresh is sent again in a transaction that locks the row first (the
 * statement's snapshot is then taken once the row can no longer change).
 */
export async function refreshReplicaCountsOf(db: Sql, refreshes: readonly CountsRefresh[]): Promise<Set<string>> {
  const sorted = [...refreshes].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const { written, raced } = await sendRefreshes(db, sorted);
  if (raced.size === 0) return written;
  const again = sorted.filter((r) => raced.has(r.id));
  const retried = await sendLocked(
    db,
    again.map((r) => r.id),
    (tx) => sendRefreshes(tx, again),
  );
  return new Set([...written, ...retried.written]);
}

/**
 * Refreshes the counts the endpoint shows (its desired count kept) inside a transaction that holds its row (an
 * update's: the newest version's count of ready replicas changes with the version), with its REPLICAS_CHANGED event.
 */
export async function refreshCountsLocked(tx: Queryable, id: string, cause: string): Promise<void> {
  await sendRefreshes(tx, [{ id, desired: { atLeast: 0 }, cause }]);
}

/**
 * Sends a statement (`send`) in a transaction that first locks the endpoints' rows, in id order: its snapshot is taken
 * once they can no longer change (a refresh or transition whose row changed while it waited, sent again). The
 * statement is not awaited inside: the commit goes with it (the event order lock it takes is not held across a round
 * trip). A failed statement fails the transaction, whose commit then rolls back; its error is thrown here. `send`
 * must send its statement before any await.
 */
export async function sendLocked<T>(db: Sql, ids: readonly string[], send: (tx: Queryable) => Promise<T>): Promise<T> {
  const { sent } = await db.begin(async (tx) => {
    await tx`SELECT 1 FROM endpoints WHERE id = ANY(${ids as string[]}) ORDER BY id FOR UPDATE`;
    const sent = send(tx);
    sent.catch(() => undefined);
    return { sent };
  });
  return sent;
}

/**
 * One statement of refreshes (sorted by id): the ids written, and those whose row changed while it waited. It is
 * sent at once, before any await (sendLocked relies on it).
 */
async function sendRefreshes(db: Queryable, sorted: readonly CountsRefresh[]): Promise<{ written: Set<string>; raced: Set<string> }> {
  const column = <T>(of: (r: CountsRefresh) => T, type: number) => db.array(sorted.map(of) as never[], type);
  const ids = column((r) => r.id, TEXT);
  const exact = column((r) => (typeof r.desired === 'number' ? r.desired : null), INT4);
  const floor = column((r) => (typeof r.desired === 'number' ? 0 : r.desired.atLeast), INT4);
  const rows = await db<{ id: string; written: boolean }[]>`
    WITH asked AS (
      SELECT * FROM unnest(${ids}::text[], ${exact}::int[], ${floor}::int[], ${column((r) => r.cause, TEXT)}::text[])
        AS a(id, exact, floor, cause)
    ), counts AS (
      SELECT a.id, a.cause, e.xmin::text AS seen, ${db.unsafe(SHOWN_COUNTS)},
        e.curr_replica_cnt AS shown_curr, e.desired_replica_cnt AS shown_desired, e.updated_replica_cnt AS shown_updated
      FROM asked a JOIN endpoints e ON e.id = a.id
      WHERE e.id = ANY(${ids}::text[])
    ), wanted AS (
      SELECT * FROM counts WHERE (shown_curr, shown_desired, shown_updated) IS DISTINCT FROM (curr, desired, updated)
    ), locked AS (
      -- In id order; re-checked on the row as locked: unchanged since this statement's snapshot.
      SELECT e.id FROM endpoints e JOIN wanted w ON w.id = e.id
      WHERE e.id = ANY(${ids}::text[]) AND e.xmin::text = w.seen
      ORDER BY e.id FOR UPDATE OF e
    ), changed AS (
      UPDATE endpoints e SET curr_replica_cnt = w.curr, updated_replica_cnt = w.updated, desired_replica_cnt = w.desired,
        updated_at = now()
      FROM wanted w JOIN locked k ON k.id = w.id
      WHERE e.id = w.id AND e.id = ANY(${ids}::text[])
      RETURNING e.id, e.project_id, e.team_id, w.curr, w.desired, w.updated, w.cause
    ), done AS MATERIALIZED (SELECT count(*) AS n FROM changed),
    ordered AS MATERIALIZED (SELECT pg_advisory_xact_lock(${EVENT_ORDER_LOCK}::bigint) FROM done WHERE n > 0),
    appended AS (
      INSERT INTO endpoint_events (endpoint_id, project_id, team_id, type, cause, detail)
      SELECT c.id, c.project_id, c.team_id, 'REPLICAS_CHANGED', c.cause,
        jsonb_build_object('currReplicaCnt', c.curr, 'desiredReplicaCnt', c.desired, 'updatedReplicaCnt', c.updated)
      FROM changed c, ordered ORDER BY c.id
      RETURNING endpoint_id
    )
    SELECT w.id, EXISTS (SELECT 1 FROM appended x WHERE x.endpoint_id = w.id) AS written FROM wanted w`;
  return {
    written: new Set(rows.filter((r) => r.written).map((r) => r.id)),
    raced: new Set(rows.filter((r) => !r.written).map((r) => r.id)),
  };
}

/**
 * Two asks for one refresh, the later one `next`: a number decides, and a floor raises what the other asked
 * (a scale-out's 3, then a warm-up's "at least 1": 3).
 */
export function mergeDesired(earlier: DesiredCount, next: DesiredCount): DesiredCount {
  if (typeof next === 'number') return next;
  if (typeof earlier === 'number') return Math.max(earlier, next.atLeast);
  return { atLeast: Math.max(earlier.atLeast, next.atLeast) };
}

export async function setProgress(db: Queryable, id: string, progress: DownloadProgress | null): Promise<void> {
  const rows = await db`
    UPDATE endpoints SET progress = ${progress ? db.json(progress) : null}
    WHERE id = ${id} AND progress IS DISTINCT FROM ${progress ? db.json(progress) : null}::jsonb RETURNING 1`;
  if (progress && rows.length > 0) await db`SELECT pg_notify('endpoint_progress', ${id})`;
}

export async function markEndpointCleaned(db: Queryable, id: string): Promise<void> {
  await db`UPDATE endpoints SET cleaned_at = now() WHERE id = ${id}`;
}

export async function markEndpointDeleted(db: Queryable, id: string): Promise<void> {
  await db`UPDATE endpoints SET deleted_at = now(), desired_state = 'DELETED', updated_at = now() WHERE id = ${id}`;
}

/** Which of `ids` name endpoints that were deleted (or never existed). */
export async function goneEndpoints(db: Queryable, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const live = await db<{ id: string }[]>`SELECT id FROM endpoints WHERE id = ANY(${ids as string[]}::text[]) AND deleted_at IS NULL`;
  const alive = new Set(live.map((r) => r.id));
  return ids.filter((id) => !alive.has(id));
}
