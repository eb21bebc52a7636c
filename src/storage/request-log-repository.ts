/** SQL for the request log, the opt-in content logs, request activity and the endpoints' last-request time. */
import { storableText } from '../domain/field-checker.js';
import type { Queryable } from './database.js';

export interface RequestLogEntry {
  endpointId: string;
  replicaId: string | null;
  teamId: string;
  userId: string;
  stream: boolean;
  httpStatus: number;
  promptTokens: number | null;
  completionTokens: number | null;
  ttftMs: number | null;
  durationMs: number;
  queuedMs: number;
  finishReason: string | null;
  cancelled: boolean;
  /** Why the answer is incomplete when the gateway knows (e.g. 'upstream_disconnected'); null otherwise. */
  errorCode?: string | null;
  startedAt: Date;
}

/** The longest finish reason kept: the known ones ('stop', 'length', 'tool_calls', 'content_filter') are far shorter. */
export const FINISH_REASON_MAX = 64;

/**
 * A finish reason as the engine gave it, as stored: a string (cut to FINISH_REASON_MAX characters), or none. An
 * external engine's answer is read as it came: its `finish_reason` may be a number, an object or a megabyte of text,
 * and none of those may cost a batch of log rows or the database's room.
 */
const storedReason = (reason: unknown): string | null => (typeof reason === 'string' ? reason.slice(0, FINISH_REASON_MAX) : null);

/** PostgreSQL type OIDs of the columns' element types. */
const [TEXT, BOOL, INT4, FLOAT8, TIMESTAMPTZ] = [25, 16, 23, 701, 1184];

/**
 * Appends a batch of entries in one statement and returns their ids, in the
 * entries' order. The rows travel as one array
 * per column, so the statement's text is the same for every batch size and
 * PostgreSQL plans it once per connection (a multi-row VALUES would be a new
 * statement for each row count).
 */
export async function insertRequestLog(db: Queryable, entries: readonly RequestLogEntry[]): Promise<string[]> {
  if (entries.length === 0) return [];
  /** One column as an array parameter of the given element type. */
  const column = (type: number, of: (e: RequestLogEntry) => string | number | boolean | null) => db.array(entries.map(of) as never[], type);
  const rows = await db<{ id: string }[]>`
    INSERT INTO request_log (endpoint_id, replica_id, team_id, user_id, stream, http_status, prompt_tokens, completion_tokens,
      ttft_ms, duration_ms, queued_ms, finish_reason, cancelled, started_at, error_code)
    SELECT c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15 FROM unnest(
      ${column(TEXT, (e) => e.endpointId)}::text[], ${column(TEXT, (e) => e.replicaId)}::text[], ${column(TEXT, (e) => e.teamId)}::text[],
      ${column(TEXT, (e) => e.userId)}::text[], ${column(BOOL, (e) => e.stream)}::boolean[], ${column(INT4, (e) => e.httpStatus)}::int[],
      ${column(INT4, (e) => e.promptTokens)}::int[], ${column(INT4, (e) => e.completionTokens)}::int[], ${column(FLOAT8, (e) => e.ttftMs)}::float8[],
      ${column(FLOAT8, (e) => e.durationMs)}::float8[], ${column(FLOAT8, (e) => e.queuedMs)}::float8[], ${column(TEXT, (e) => storedReason(e.finishReason))}::text[],
      ${column(BOOL, (e) => e.cancelled)}::boolean[], ${column(TIMESTAMPTZ, (e) => e.startedAt.toISOString())}::timestamptz[],
      ${column(TEXT, (e) => e.errorCode ?? null)}::text[]) WITH ORDINALITY AS u(c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, n)
    ORDER BY n
    RETURNING id`;
  return rows.map((r) => String(r.id));
}

/**
 * Moves the endpoints' last-request times forward (never back). Only the rows that move are written, locked in id
 * order, as the other statements that lock several endpoints lock them (insertContent below, the counts' batched
 * refresh): two never wait for each other in a cycle.
 */
export async function touchEndpoints(db: Queryable, lastRequest: ReadonlyMap<string, Date>): Promise<void> {
  if (lastRequest.size === 0) return;
  const ids = [...lastRequest.keys()];
  const times = ids.map((id) => lastRequest.get(id)!.toISOString());
  await db`
    WITH touched AS (
      -- Never later than the database's clock: a gateway whose clock runs fast would otherwise keep the endpoint
      -- awake (the autoscaler reads this against the controller's clock) for as long as it is ahead.
      SELECT e.id, least(t.at, now()) AS at FROM endpoints e
      JOIN unnest(${ids}::text[], ${times}::timestamptz[]) AS t(id, at) ON t.id = e.id
      WHERE e.id = ANY(${ids}::text[]) AND (e.last_request_at IS NULL OR e.last_request_at < least(t.at, now()))
      ORDER BY e.id FOR UPDATE OF e
    )
    UPDATE endpoints e SET last_request_at = greatest(e.last_request_at, t.at)
    FROM touched t
    WHERE e.id = t.id`;
}

/** One request's captured content, as stored (see router/content-capture.ts). */
export interface ContentRow {
  requestLogId: string;
  endpointId: string;
  versionIndex: number;
  messages: unknown;
  response: unknown;
}

/**
 * Captured content as jsonb text. jsonb cannot hold NUL (`\u0000`) or an
 * unpaired surrogate (`\ud800`), and one such string would fail the whole
 * batch: a client's messages are refused with them (chat-request.ts), but a
 * model's answer may hold them, so every string is stored with them replaced
 * by U+FFFD (field-checker.ts, storableText).
 */
function storableJson(value: unknown): string {
  return JSON.stringify(value, (_key, member: unknown) => (typeof member === 'string' ? storableText(member) : member));
}

/**
 * Stores captured content, but only for endpoints that are not deleted and
 * whose current version still has content logging on (turning it off stops
 * capture at once, even for answers finished just before). The endpoint row
 * is locked for share, so a delete running at the same time either waits for
 * this insert (and its trigger then deletes the rows) or is seen by it.
 */
export async function insertContent(db: Queryable, rows: readonly ContentRow[]): Promise<number> {
  if (rows.length === 0) return 0;
  const inserted = await db`
    INSERT INTO request_content (request_log_id, endpoint_id, version_index, messages, response)
    SELECT c.id::bigint, c.endpoint_id, c.version_index, c.messages::jsonb, c.response::jsonb
    FROM unnest(${rows.map((r) => r.requestLogId)}::text[], ${rows.map((r) => r.endpointId)}::text[],
      ${rows.map((r) => r.versionIndex)}::int[], ${rows.map((r) => storableJson(r.messages))}::text[],
      ${rows.map((r) => storableJson(r.response))}::text[]) AS c(id, endpoint_id, version_index, messages, response)
    JOIN endpoints e ON e.id = c.endpoint_id AND e.deleted_at IS NULL
    JOIN endpoint_versions v ON v.endpoint_id = e.id AND v.version_index = e.current_version AND v.enable_content_logging
    ORDER BY e.id
    FOR SHARE OF e
    ON CONFLICT (request_log_id) DO NOTHING`;
  return inserted.count;
}

export interface ActivityRow {
  id: string;
  endpoint_id: string;
  replica_id: string | null;
  user_id: string;
  stream: boolean;
  http_status: number;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  ttft_ms: number | null;
  duration_ms: number;
  queued_ms: number;
  finish_reason: string | null;
  cancelled: boolean;
  error_code: string | null;
  started_at: Date;
  messages: unknown;
  response: unknown;
}

export interface ActivityFilter {
  /** Only these HTTP statuses. */
  statuses?: readonly number[];
  /** Only requests that failed (a status of 400 or more, or an error code). */
  errorsOnly?: boolean;
  userId?: string;
  from?: Date;
  to?: Date;
}

/** A page of an endpoint's requests, newest first, after the row id `before` (exclusive); limit + 1 rows. */
export async function listActivity(
  db: Queryable,
  endpointId: string,
  page: { before: number; limit: number },
  filter: ActivityFilter,
): Promise<ActivityRow[]> {
  return db<ActivityRow[]>`
    SELECT r.id::text AS id, r.endpoint_id, r.replica_id, r.user_id, r.stream, r.http_status, r.prompt_tokens, r.completion_tokens,
      r.ttft_ms, r.duration_ms, r.queued_ms, r.finish_reason, r.cancelled, r.error_code, r.started_at, c.messages, c.response
    FROM request_log r LEFT JOIN request_content c ON c.request_log_id = r.id
    WHERE r.endpoint_id = ${endpointId} AND r.id < ${page.before}
      ${filter.statuses && filter.statuses.length > 0 ? db`AND r.http_status = ANY(${filter.statuses as number[]}::int[])` : db``}
      ${filter.errorsOnly ? db`AND (r.http_status >= 400 OR r.error_code IS NOT NULL)` : db``}
      ${filter.userId ? db`AND r.user_id = ${filter.userId}` : db``}
      ${filter.from ? db`AND r.started_at >= ${filter.from}` : db``}
      ${filter.to ? db`AND r.started_at < ${filter.to}` : db``}
    ORDER BY r.id DESC
    LIMIT ${page.limit + 1}`;
}

/** Deletes request-log rows (and their content) older than `before`, at most `batch` of each per call. */
export async function deleteOldRequests(db: Queryable, before: Date, batch = 10_000): Promise<number> {
  const content = await db`
    DELETE FROM request_content WHERE request_log_id IN (
      SELECT request_log_id FROM request_content WHERE created_at < ${before} LIMIT ${batch})`;
  const log = await db`
    DELETE FROM request_log WHERE id IN (SELECT id FROM request_log WHERE started_at < ${before} LIMIT ${batch})`;
  return content.count + log.count;
}
