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
  startedAt: Date;
}

export async function insertRequestLog(db: Queryable, entries: readonly RequestLogEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const rows = entries.map((e) => ({
    endpoint_id: e.endpointId,
    replica_id: e.replicaId,
    team_id: e.teamId,
    user_id: e.userId,
    stream: e.stream,
    http_status: e.httpStatus,
    prompt_tokens: e.promptTokens,
    completion_tokens: e.completionTokens,
    ttft_ms: e.ttftMs,
    duration_ms: e.durationMs,
    queued_ms: e.queuedMs,
    finish_reason: e.finishReason,
    cancelled: e.cancelled,
    started_at: e.startedAt,
  }));
  await db`INSERT INTO request_log ${db(rows)}`;
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
