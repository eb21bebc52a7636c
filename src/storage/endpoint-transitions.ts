/**
 * The controller's status transition of an endpoint (src/controller/endpoint-writes.ts), in one statement: the
 * endpoint's row locked under the process's lease and checked against what the transition requires, the status
 * written (the error message with its code; the download's progress and the wait's reason cleared once the phase
 * that shows them is left), the replica counts refreshed with it when asked, and their events appended, counts
 * first. Nothing is written when the check fails. One statement is one transaction: no round trip to this process
 * while the row is locked, and the event order lock (events-repository.ts), taken after the row lock as every writer
 * takes it, is held by the database alone.
 *
 * The counts are read in the statement's snapshot, taken before the row lock was awaited. When the row changed while
 * this waited (a refresh with a newer snapshot wrote its counts), counts from the older snapshot could take them
 * back: then the statement writes nothing, and is sent again in a transaction that locks the row first (its
 * snapshot is then taken once the row can no longer change).
 */
import type { DesiredState, EndpointErrorCode, EndpointPhase, EndpointStatus } from '../domain/lifecycle.js';
import type { Queryable, Sql } from './database.js';
import { sendLocked, SHOWN_COUNTS, type DesiredCount } from './endpoints-repository.js';
import { EVENT_ORDER_LOCK } from './events-repository.js';

export interface TransitionWrite {
  id: string;
  /** The lease holder that writes: nothing is written once its lease is lost. */
  owner: string;
  /** What the row, as locked, must show. */
  requires: { desiredState: DesiredState; statuses?: readonly EndpointStatus[]; currentVersion?: number };
  status: EndpointStatus;
  phase: EndpointPhase | null;
  errorCode: EndpointErrorCode | null;
  desiredState: DesiredState;
  /** The user's message: kept with an error code only. */
  errorMessage: string | null;
  /** The replica counts refreshed in the same statement, wanting this many (refreshReplicaCounts' rule). */
  desiredReplicas?: DesiredCount;
  cause: string;
  detail?: Record<string, unknown>;
}

/** Writes the transition; false when the row did not show what it requires (or the lease was lost, or the endpoint is gone). */
export async function writeTransition(db: Sql, t: TransitionWrite): Promise<boolean> {
  const first = await sendTransition(db, t);
  if (first.applied || !first.found) return first.applied;
  return (await sendLocked(db, [t.id], (tx) => sendTransition(tx, t))).applied;
}

/** Sends its statement at once, before any await (sendLocked relies on it). */
async function sendTransition(db: Queryable, t: TransitionWrite): Promise<{ found: boolean; applied: boolean }> {
  const statuses = t.requires.statuses ? db.array([...t.requires.statuses] as string[], 25) : null;
  const counted = t.desiredReplicas !== undefined;
  const exact = typeof t.desiredReplicas === 'number' ? t.desiredReplicas : null;
  const floor = typeof t.desiredReplicas === 'object' ? t.desiredReplicas.atLeast : 0;
  const message = t.errorCode ? t.errorMessage : null;
  const [row] = await db<{ found: boolean; applied: boolean }[]>`
    WITH target AS (
      SELECT e.id, e.project_id, e.team_id, e.status, e.phase, e.error_code, e.current_version,
        e.curr_replica_cnt, e.desired_replica_cnt, e.updated_replica_cnt,
        -- The row as locked against the row in this statement's snapshot: the same unless it changed meanwhile.
        e.xmin = (SELECT s.xmin FROM endpoints s WHERE s.id = e.id) AS unchanged
      FROM endpoints e JOIN endpoint_leases l ON l.endpoint_id = e.id
      WHERE e.id = ${t.id} AND l.owner = ${t.owner} AND l.expires_at > now()
        AND e.desired_state = ${t.requires.desiredState}
        AND (${statuses}::text[] IS NULL OR e.status = ANY(${statuses}::text[]))
        AND (${t.requires.currentVersion ?? null}::int IS NULL OR e.current_version = ${t.requires.currentVersion ?? null}::int)
      FOR UPDATE OF e FOR SHARE OF l
    ), fresh AS (
      SELECT * FROM target WHERE unchanged OR NOT ${counted}::boolean
    ), counts AS (
      SELECT e.id, ${db.unsafe(SHOWN_COUNTS)}
      FROM fresh t JOIN endpoints e ON e.id = t.id CROSS JOIN (SELECT ${exact}::int AS exact, ${floor}::int AS floor) a
      WHERE ${counted}::boolean
    ), written AS (
      UPDATE endpoints e SET
        status = ${t.status}, phase = ${t.phase}, error_code = ${t.errorCode}, desired_state = ${t.desiredState},
        error_message = ${message},
        progress = CASE WHEN ${t.phase}::text = 'DOWNLOADING_MODEL' THEN e.progress END,
        wait_reason = CASE WHEN ${t.phase}::text = 'REQUESTING_VIRTUAL_MACHINE' THEN e.wait_reason END,
        curr_replica_cnt = coalesce(c.curr, e.curr_replica_cnt),
        updated_replica_cnt = coalesce(c.updated, e.updated_replica_cnt),
        desired_replica_cnt = coalesce(c.desired, e.desired_replica_cnt),
        updated_at = now()
      FROM fresh t LEFT JOIN counts c ON c.id = t.id
      WHERE e.id = t.id
      RETURNING e.id
    ), changes AS (
      SELECT 1 AS k, t.id, t.project_id, t.team_id, 'REPLICAS_CHANGED' AS type, NULL::text AS status, NULL::text AS phase,
        NULL::text AS error_code,
        jsonb_build_object('currReplicaCnt', c.curr, 'desiredReplicaCnt', c.desired, 'updatedReplicaCnt', c.updated) AS detail
      FROM fresh t JOIN counts c ON c.id = t.id
      WHERE (t.curr_replica_cnt, t.desired_replica_cnt, t.updated_replica_cnt) IS DISTINCT FROM (c.curr, c.desired, c.updated)
      UNION ALL
      SELECT 2, t.id, t.project_id, t.team_id, 'STATUS_CHANGED', ${t.status}::text, ${t.phase}::text, ${t.errorCode}::text,
        ${t.detail ? db.json(t.detail as never) : null}::jsonb
      FROM fresh t
      WHERE (t.status, t.phase, t.error_code) IS DISTINCT FROM (${t.status}::text, ${t.phase}::text, ${t.errorCode}::text)
    ), ordered AS MATERIALIZED (SELECT changes.*, pg_advisory_xact_lock(${EVENT_ORDER_LOCK}::bigint) FROM changes),
    appended AS (
      INSERT INTO endpoint_events (endpoint_id, project_id, team_id, type, status, phase, error_code, cause, detail)
      SELECT id, project_id, team_id, type, status, phase, error_code, ${t.cause}, detail FROM ordered ORDER BY k
      RETURNING id
    )
    SELECT EXISTS (SELECT 1 FROM target) AS found, EXISTS (SELECT 1 FROM written) AS applied, (SELECT count(*) FROM appended) AS appended`;
  return { found: row!.found, applied: row!.applied };
}
