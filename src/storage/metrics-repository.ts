/**
 * SQL for the per-endpoint, per-minute roll-ups (table
 * endpoint_metrics_minute): additive upserts from every gateway process,
 * replica-count samples, range reads grouped by a step, and retention.
 */
import type { Queryable } from './database.js';

/** One endpoint's figures for one minute, as one process adds them. */
export interface MinuteDelta {
  endpointId: string;
  minute: Date;
  requests: number;
  errors4xx: number;
  errors5xx: number;
  errorsCut: number;
  cancelled: number;
  promptTokens: number;
  completionTokens: number;
  durationSumMs: number;
  durationMaxMs: number | null;
  ttft: LatencyDelta;
  tpot: LatencyDelta;
  queue: LatencyDelta;
}

export interface LatencyDelta {
  count: number;
  sumMs: number;
  maxMs: number | null;
  hist: number[];
}

/** Adds the deltas to their minutes' rows (created as needed), in one statement. */
export async function addMinutes(db: Queryable, deltas: readonly MinuteDelta[]): Promise<void> {
  if (deltas.length === 0) return;
  const col = <T>(of: (d: MinuteDelta) => T) => deltas.map(of) as never[];
  const hist = (h: number[]) => `{${h.join(',')}}`;
  await db`
    INSERT INTO endpoint_metrics_minute AS m (endpoint_id, minute, requests, errors_4xx, errors_5xx, errors_cut, cancelled,
      prompt_tokens, completion_tokens, duration_sum_ms, duration_max_ms,
      ttft_count, ttft_sum_ms, ttft_max_ms, ttft_hist, tpot_count, tpot_sum_ms, tpot_max_ms, tpot_hist,
      queue_count, queue_sum_ms, queue_max_ms, queue_hist)
    SELECT endpoint_id, minute, requests, e4, e5, cut, cancelled, pt, ct, dsum, dmax,
      tc, ts, tm, th::bigint[], pc, ps, pm, ph::bigint[], qc, qs, qm, qh::bigint[]
    FROM unnest(${col((d) => d.endpointId)}::text[], ${col((d) => d.minute.toISOString())}::timestamptz[],
      ${col((d) => d.requests)}::int[], ${col((d) => d.errors4xx)}::int[], ${col((d) => d.errors5xx)}::int[],
      ${col((d) => d.errorsCut)}::int[], ${col((d) => d.cancelled)}::int[], ${col((d) => d.promptTokens)}::bigint[],
      ${col((d) => d.completionTokens)}::bigint[], ${col((d) => d.durationSumMs)}::float8[], ${col((d) => d.durationMaxMs)}::float8[],
      ${col((d) => d.ttft.count)}::int[], ${col((d) => d.ttft.sumMs)}::float8[], ${col((d) => d.ttft.maxMs)}::float8[],
      ${col((d) => hist(d.ttft.hist))}::text[], ${col((d) => d.tpot.count)}::int[], ${col((d) => d.tpot.sumMs)}::float8[],
      ${col((d) => d.tpot.maxMs)}::float8[], ${col((d) => hist(d.tpot.hist))}::text[], ${col((d) => d.queue.count)}::int[],
      ${col((d) => d.queue.sumMs)}::float8[], ${col((d) => d.queue.maxMs)}::float8[], ${col((d) => hist(d.queue.hist))}::text[])
      AS u(endpoint_id, minute, requests, e4, e5, cut, cancelled, pt, ct, dsum, dmax, tc, ts, tm, th, pc, ps, pm, ph, qc, qs, qm, qh)
    ON CONFLICT (endpoint_id, minute) DO UPDATE SET
      requests = m.requests + EXCLUDED.requests,
      errors_4xx = m.errors_4xx + EXCLUDED.errors_4xx,
      errors_5xx = m.errors_5xx + EXCLUDED.errors_5xx,
      errors_cut = m.errors_cut + EXCLUDED.errors_cut,
      cancelled = m.cancelled + EXCLUDED.cancelled,
      prompt_tokens = m.prompt_tokens + EXCLUDED.prompt_tokens,
      completion_tokens = m.completion_tokens + EXCLUDED.completion_tokens,
      duration_sum_ms = m.duration_sum_ms + EXCLUDED.duration_sum_ms,
      duration_max_ms = greatest(m.duration_max_ms, EXCLUDED.duration_max_ms),
      ttft_count = m.ttft_count + EXCLUDED.ttft_count,
      ttft_sum_ms = m.ttft_sum_ms + EXCLUDED.ttft_sum_ms,
      ttft_max_ms = greatest(m.ttft_max_ms, EXCLUDED.ttft_max_ms),
      ttft_hist = metrics_hist_add(m.ttft_hist, EXCLUDED.ttft_hist),
      tpot_count = m.tpot_count + EXCLUDED.tpot_count,
      tpot_sum_ms = m.tpot_sum_ms + EXCLUDED.tpot_sum_ms,
      tpot_max_ms = greatest(m.tpot_max_ms, EXCLUDED.tpot_max_ms),
      tpot_hist = metrics_hist_add(m.tpot_hist, EXCLUDED.tpot_hist),
      queue_count = m.queue_count + EXCLUDED.queue_count,
      queue_sum_ms = m.queue_sum_ms + EXCLUDED.queue_sum_ms,
      queue_max_ms = greatest(m.queue_max_ms, EXCLUDED.queue_max_ms),
      queue_hist = metrics_hist_add(m.queue_hist, EXCLUDED.queue_hist)`;
}

export interface ReplicaSample {
  endpointId: string;
  current: number;
  desired: number;
  updated: number;
}

/**
 * Records the replica counts of every live endpoint that has or wants
 * replicas into the given minute (the largest seen in the minute); returns
 * the counts read.
 */
export async function sampleReplicas(db: Queryable, minute: Date): Promise<ReplicaSample[]> {
  const rows = await db<{ endpoint_id: string; c: number; d: number; u: number }[]>`
    WITH s AS (
      SELECT id, curr_replica_cnt AS c, desired_replica_cnt AS d, updated_replica_cnt AS u FROM endpoints
      WHERE deleted_at IS NULL AND (curr_replica_cnt > 0 OR desired_replica_cnt > 0 OR updated_replica_cnt > 0)
    ), written AS (
      INSERT INTO endpoint_metrics_minute AS m (endpoint_id, minute, replicas_current, replicas_desired, replicas_updated)
      SELECT id, ${minute}, c, d, u FROM s
      ON CONFLICT (endpoint_id, minute) DO UPDATE SET
        replicas_current = greatest(m.replicas_current, EXCLUDED.replicas_current),
        replicas_desired = greatest(m.replicas_desired, EXCLUDED.replicas_desired),
        replicas_updated = greatest(m.replicas_updated, EXCLUDED.replicas_updated)
    )
    SELECT id AS endpoint_id, c, d, u FROM s`;
  return rows.map((r) => ({ endpointId: r.endpoint_id, current: r.c, desired: r.d, updated: r.u }));
}

/** Summed figures of a group of minutes (histograms as bucket counts). */
export interface MinuteSums {
  bucket: number;
  requests: number;
  errors_4xx: number;
  errors_5xx: number;
  errors_cut: number;
  cancelled: number;
  prompt_tokens: number;
  completion_tokens: number;
  duration_sum_ms: number;
  duration_max_ms: number | null;
  ttft_count: number;
  ttft_sum_ms: number;
  ttft_max_ms: number | null;
  ttft_hist: number[] | null;
  tpot_count: number;
  tpot_sum_ms: number;
  tpot_max_ms: number | null;
  tpot_hist: number[] | null;
  queue_count: number;
  queue_sum_ms: number;
  queue_max_ms: number | null;
  queue_hist: number[] | null;
  replicas_current: number | null;
  replicas_desired: number | null;
  replicas_updated: number | null;
}

const SUMS = (db: Queryable) => db`
  sum(requests)::float8 AS requests, sum(errors_4xx)::float8 AS errors_4xx, sum(errors_5xx)::float8 AS errors_5xx,
  sum(errors_cut)::float8 AS errors_cut, sum(cancelled)::float8 AS cancelled, sum(prompt_tokens)::float8 AS prompt_tokens,
  sum(completion_tokens)::float8 AS completion_tokens, sum(duration_sum_ms) AS duration_sum_ms, max(duration_max_ms) AS duration_max_ms,
  sum(ttft_count)::float8 AS ttft_count, sum(ttft_sum_ms) AS ttft_sum_ms, max(ttft_max_ms) AS ttft_max_ms,
  metrics_hist_sum(ttft_hist)::float8[] AS ttft_hist,
  sum(tpot_count)::float8 AS tpot_count, sum(tpot_sum_ms) AS tpot_sum_ms, max(tpot_max_ms) AS tpot_max_ms,
  metrics_hist_sum(tpot_hist)::float8[] AS tpot_hist,
  sum(queue_count)::float8 AS queue_count, sum(queue_sum_ms) AS queue_sum_ms, max(queue_max_ms) AS queue_max_ms,
  metrics_hist_sum(queue_hist)::float8[] AS queue_hist,
  max(replicas_current) AS replicas_current, max(replicas_desired) AS replicas_desired, max(replicas_updated) AS replicas_updated`;

/** An endpoint's minutes in [from, to), summed per step (bucket i starts at from + i × step). */
export async function readRange(db: Queryable, endpointId: string, from: Date, to: Date, stepSeconds: number): Promise<MinuteSums[]> {
  return db<MinuteSums[]>`
    SELECT floor(extract(epoch FROM minute - ${from}::timestamptz) / ${stepSeconds})::int AS bucket, ${SUMS(db)}
    FROM endpoint_metrics_minute
    WHERE endpoint_id = ${endpointId} AND minute >= ${from} AND minute < ${to}
    GROUP BY 1 ORDER BY 1`;
}

/** The given minute of each endpoint (bucket is 0), for live figures. */
export async function readMinute(
  db: Queryable,
  endpointIds: readonly string[],
  minute: Date,
): Promise<(MinuteSums & { endpoint_id: string })[]> {
  return db<(MinuteSums & { endpoint_id: string })[]>`
    SELECT endpoint_id, 0 AS bucket, ${SUMS(db)}
    FROM endpoint_metrics_minute
    WHERE endpoint_id = ANY(${endpointIds as string[]}::text[]) AND minute = ${minute}
    GROUP BY endpoint_id`;
}

/** Deletes roll-ups older than `before`, at most `batch` per call. */
export async function deleteOldMinutes(db: Queryable, before: Date, batch = 10_000): Promise<number> {
  const deleted = await db`
    DELETE FROM endpoint_metrics_minute WHERE (endpoint_id, minute) IN (
      SELECT endpoint_id, minute FROM endpoint_metrics_minute WHERE minute < ${before} LIMIT ${batch})`;
  return deleted.count;
}
