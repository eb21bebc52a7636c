/**
 * Reading an endpoint's metrics and request activity: series over a range
 * (from the per-minute roll-ups), pages of its requests (with their content
 * when it was logged), and live figures of the current minute. Callers pass
 * an endpoint the principal may see (`visibleTo`, as the GraphQL `Endpoint`
 * is only ever reached through it).
 */
import { fail, invalidArgument, ok, type FieldViolation, type Result } from '../domain/result.js';
import { parsePageRequest, toPage, type Page } from '../domain/pagination.js';
import type { Queryable } from '../storage/database.js';
import { readMinute, readRange } from '../storage/metrics-repository.js';
import { listActivity, type ActivityFilter, type ActivityRow } from '../storage/request-log-repository.js';
import { figuresOf, type MetricFigures } from './metrics-figures.js';
import { LiveMetrics } from './live-metrics.js';

/** Most points one series may have. */
export const MAX_POINTS = 1500;
/** The largest request-log id a cursor may name (its encoding holds 15 digits). */
const MAX_ACTIVITY_POSITION = 999_999_999_999_999;

export interface MetricsSeries {
  from: Date;
  to: Date;
  stepSeconds: number;
  /** The start of each step. */
  timestamps: Date[];
  values: { [K in keyof MetricFigures]: MetricFigures[K][] };
}

export interface ActivityEntry {
  id: string;
  endpointId: string;
  startedAt: Date;
  httpStatus: number;
  latencyMs: number;
  ttftMs: number | null;
  queuedMs: number;
  promptTokens: number | null;
  completionTokens: number | null;
  userId: string;
  replicaId: string | null;
  stream: boolean;
  cancelled: boolean;
  finishReason: string | null;
  errorCode: string | null;
  /** Present only for a request served with content logging on. */
  content: { messages: unknown; response: unknown } | null;
}

export class MetricsService {
  readonly live: LiveMetrics;

  constructor(private readonly db: Queryable) {
    this.live = new LiveMetrics((ids, minute) => readMinute(db, ids, minute));
  }

  /**
   * An endpoint's series over [from, to): `from` is rounded down to its
   * minute, `step` (seconds, a multiple of 60; default: what gives at most
   * 120 points) groups minutes; a step without data reads as zero counts and
   * null latencies.
   */
  async series(endpointId: string, args: { from: Date; to?: Date | null; step?: number | null }): Promise<Result<MetricsSeries>> {
    const to = args.to ?? new Date();
    const from = new Date(Math.floor(args.from.getTime() / 60_000) * 60_000);
    const fields: FieldViolation[] = [];
    if (Number.isNaN(to.getTime()) || to.getTime() <= from.getTime()) fields.push({ field: 'to', message: 'must be after from' });
    const span = (to.getTime() - from.getTime()) / 1000;
    const step = args.step ?? Math.max(60, Math.ceil(span / 120 / 60) * 60);
    if (!Number.isInteger(step) || step < 60 || step % 60 !== 0)
      fields.push({ field: 'step', message: 'must be a whole number of minutes, in seconds (60, 300, 3600, …)' });
    else if (span / step > MAX_POINTS)
      fields.push({ field: 'step', message: `gives more than ${MAX_POINTS} points for this range: use a larger step` });
    if (fields.length > 0) return fail(invalidArgument(fields));
    const rows = await readRange(this.db, endpointId, from, to, step);
    const byBucket = new Map(rows.map((r) => [r.bucket, r]));
    const points = Math.ceil(span / step);
    const timestamps: Date[] = [];
    const values = {} as MetricsSeries['values'];
    for (let i = 0; i < points; i++) {
      timestamps.push(new Date(from.getTime() + i * step * 1000));
      const figures = figuresOf(byBucket.get(i), step);
      for (const [key, value] of Object.entries(figures) as [keyof MetricFigures, number | null][]) {
        ((values[key] ??= []) as (number | null)[]).push(value);
      }
    }
    if (points === 0) for (const key of Object.keys(figuresOf(undefined, step)) as (keyof MetricFigures)[]) values[key] = [];
    return ok({ from, to, stepSeconds: step, timestamps, values });
  }

  /** A page of an endpoint's requests, newest first; `after` is the previous page's end cursor. */
  async activity(
    endpointId: string,
    args: { first?: number | null; after?: string | null; filter?: ActivityFilter },
    names = { cursor: 'after', limit: 'first' },
  ): Promise<Result<Page<ActivityEntry>>> {
    const request = parsePageRequest('req', { cursor: args.after, limit: args.first }, names, MAX_ACTIVITY_POSITION, MAX_ACTIVITY_POSITION);
    if (request.type === 'error') return request;
    const rows = await listActivity(this.db, endpointId, { before: request.value.after, limit: request.value.limit }, args.filter ?? {});
    return ok(toPage('req', rows.map(entryOf), request.value.limit, (e) => Number(e.id)));
  }
}

function entryOf(r: ActivityRow): ActivityEntry {
  return {
    id: r.id,
    endpointId: r.endpoint_id,
    startedAt: r.started_at,
    httpStatus: r.http_status,
    latencyMs: r.duration_ms,
    ttftMs: r.ttft_ms,
    queuedMs: r.queued_ms,
    promptTokens: r.prompt_tokens,
    completionTokens: r.completion_tokens,
    userId: r.user_id,
    replicaId: r.replica_id,
    stream: r.stream,
    cancelled: r.cancelled,
    finishReason: r.finish_reason,
    errorCode: r.error_code,
    content: r.messages === null || r.messages === undefined ? null : { messages: r.messages, response: r.response },
  };
}
