/** SQL for the endpoints' append-only event log, which live subscribers follow. */
import { EVENT_ID_RULE, parseEventId, type EndpointEventInput, type EndpointEventRecord, type EventScope } from '../domain/endpoint.js';
import { invalidInputError } from '../domain/errors.js';
import type { Queryable } from './database.js';
import { EVENT_COLUMNS, toEvent, type EventRow } from './endpoint-rows.js';

/**
 * The transaction-level lock every appender of an event takes first (`pg_advisory_xact_lock`): see `insertEvent`.
 * A statement that appends events of its own takes it too, after any row lock it needs.
 */
export const EVENT_ORDER_LOCK = 7266431003;

/**
 * Appends an event. Writers take one transaction-level lock first, so event
 * ids are assigned in commit order: a subscriber that has seen event N has
 * seen every event below N, and can resume from N without a gap. The lock
 * and the insert are one statement: the materialized CTE takes the lock
 * before the row (and so its id) is made, and the lock is held from there
 * to commit.
 */
export async function insertEvent(db: Queryable, event: EndpointEventInput): Promise<string> {
  const [row] = await db<{ id: string }[]>`
    WITH ordered AS MATERIALIZED (SELECT pg_advisory_xact_lock(${EVENT_ORDER_LOCK}::bigint))
    INSERT INTO endpoint_events (
      endpoint_id, project_id, team_id, type, status, phase, error_code, version_index, cause, actor_id, detail
    ) SELECT
      ${event.endpointId}, ${event.projectId}, ${event.teamId}, ${event.type}, ${event.status}, ${event.phase},
      ${event.errorCode}, ${event.versionIndex}, ${event.cause}, ${event.actorId},
      ${event.detail ? db.json(event.detail as never) : null}
    FROM ordered
    RETURNING id`;
  return row!.id;
}

const scopeFilter = (db: Queryable, scope: EventScope) =>
  'endpointId' in scope ? db`endpoint_id = ${scope.endpointId}` : db`project_id = ${scope.projectId}`;

/** Events of an endpoint or a project after an event id (`after`, checked here too: never a cast error), oldest first. */
export async function listEvents(db: Queryable, scope: EventScope, afterId = '0', limit = 1000): Promise<EndpointEventRecord[]> {
  if (parseEventId(afterId) === undefined) throw invalidInputError([{ field: 'after', message: EVENT_ID_RULE }]);
  const filter = scopeFilter(db, scope);
  const rows = await db<EventRow[]>`
    SELECT ${db.unsafe(EVENT_COLUMNS)} FROM endpoint_events
    WHERE ${filter} AND id > ${afterId}::bigint ORDER BY id LIMIT ${limit}`;
  return rows.map(toEvent);
}

/** The newest event id of an endpoint or a project ('0' when it has none). */
export async function latestEventId(db: Queryable, scope: EventScope): Promise<string> {
  const [row] = await db<{ id: string | null }[]>`SELECT max(id)::text AS id FROM endpoint_events WHERE ${scopeFilter(db, scope)}`;
  return row?.id ?? '0';
}

export async function findEvents(db: Queryable, ids: readonly string[]): Promise<EndpointEventRecord[]> {
  const rows = await db<EventRow[]>`
    SELECT ${db.unsafe(EVENT_COLUMNS)} FROM endpoint_events WHERE id = ANY(${ids as string[]}::bigint[]) ORDER BY id`;
  return rows.map(toEvent);
}
