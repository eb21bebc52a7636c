/** SQL for the request log and the endpoints' last-request time. */
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

/** PostgreSQL type OIDs of the columns' element types. */
const [TEXT, BOOL, INT4, FLOAT8, TIMESTAMPTZ] = [25, 16, 23, 701, 1184];

/**
 * Appends a batch of entries in one statement. The rows travel as one array
 * per column, so the statement's text is the same for every batch size and
 * PostgreSQL plans it once per connection (a multi-row VALUES would be a new
 * statement for each row count).
 */
export async function insertRequestLog(db: Queryable, entries: readonly RequestLogEntry[]): Promise<void> {
  if (entries.length === 0) return;
  /** One column as an array parameter of the given element type. */
  const column = (type: number, of: (e: RequestLogEntry) => string | number | boolean | null) => db.array(entries.map(of) as never[], type);
  await db`
    INSERT INTO request_log (endpoint_id, replica_id, team_id, user_id, stream, http_status, prompt_tokens, completion_tokens,
      ttft_ms, duration_ms, queued_ms, finish_reason, cancelled, started_at, error_code)
    SELECT * FROM unnest(
      ${column(TEXT, (e) => e.endpointId)}::text[], ${column(TEXT, (e) => e.replicaId)}::text[], ${column(TEXT, (e) => e.teamId)}::text[],
      ${column(TEXT, (e) => e.userId)}::text[], ${column(BOOL, (e) => e.stream)}::boolean[], ${column(INT4, (e) => e.httpStatus)}::int[],
      ${column(INT4, (e) => e.promptTokens)}::int[], ${column(INT4, (e) => e.completionTokens)}::int[], ${column(FLOAT8, (e) => e.ttftMs)}::float8[],
      ${column(FLOAT8, (e) => e.durationMs)}::float8[], ${column(FLOAT8, (e) => e.queuedMs)}::float8[], ${column(TEXT, (e) => e.finishReason)}::text[],
      ${column(BOOL, (e) => e.cancelled)}::boolean[], ${column(TIMESTAMPTZ, (e) => e.startedAt.toISOString())}::timestamptz[],
      ${column(TEXT, (e) => e.errorCode ?? null)}::text[])`;
}

/** Moves the endpoints' last-request times forward (never back). */
export async function touchEndpoints(db: Queryable, lastRequest: ReadonlyMap<string, Date>): Promise<void> {
  if (lastRequest.size === 0) return;
  const ids = [...lastRequest.keys()];
  const times = ids.map((id) => lastRequest.get(id)!.toISOString());
  await db`
    UPDATE endpoints e SET last_request_at = greatest(e.last_request_at, t.at::timestamptz)
    FROM unnest(${ids}::text[], ${times}::text[]) AS t(id, at)
    WHERE e.id = t.id`;
}
