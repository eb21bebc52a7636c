/**
 * What a group of summed minutes means on a chart: counts, token sums,
 * throughput, averages and percentiles (from the summed latency buckets) and
 * replica counts. Shared by the series (`Endpoint.metrics`) and the live
 * figures of the current minute (`endpointMetrics`).
 */
import { quantile } from '../domain/latency-histogram.js';
import type { MinuteSums } from '../storage/metrics-repository.js';

export const COUNT_METRICS = ['requests', 'errors4xx', 'errors5xx', 'errorsCut', 'cancelled', 'promptTokens', 'completionTokens'] as const;
export const RATE_METRICS = ['requestsPerSecond', 'completionTokensPerSecond'] as const;
/** Milliseconds, or replica counts: null where nothing was measured. */
export const OPTIONAL_METRICS = [
  'durationAvgMs',
  'ttftAvgMs',
  'ttftP50Ms',
  'ttftP95Ms',
  'ttftP99Ms',
  'tpotAvgMs',
  'tpotP50Ms',
  'tpotP95Ms',
  'tpotP99Ms',
  'queueWaitAvgMs',
  'queueWaitP95Ms',
  'queueWaitMaxMs',
  'replicasCurrent',
  'replicasDesired',
  'replicasUpdated',
] as const;

export type CountMetric = (typeof COUNT_METRICS)[number] | (typeof RATE_METRICS)[number];
export type OptionalMetric = (typeof OPTIONAL_METRICS)[number];
export type MetricFigures = Record<CountMetric, number> & Record<OptionalMetric, number | null>;

const avg = (sum: number, count: number) => (count > 0 ? sum / count : null);

/** The figures of summed minutes (none: an empty step) over a step of `seconds`. */
export function figuresOf(s: MinuteSums | undefined, seconds: number): MetricFigures {
  const n = (v: number | null | undefined) => Number(v ?? 0);
  const hist = (h: number[] | null | undefined) => (h ?? []).map(Number);
  return {
    requests: n(s?.requests),
    errors4xx: n(s?.errors_4xx),
    errors5xx: n(s?.errors_5xx),
    errorsCut: n(s?.errors_cut),
    cancelled: n(s?.cancelled),
    promptTokens: n(s?.prompt_tokens),
    completionTokens: n(s?.completion_tokens),
    requestsPerSecond: n(s?.requests) / seconds,
    completionTokensPerSecond: n(s?.completion_tokens) / seconds,
    // Every served request waits in the queue (if only 0 ms): queue_count counts them.
    durationAvgMs: avg(n(s?.duration_sum_ms), n(s?.queue_count)),
    ttftAvgMs: avg(n(s?.ttft_sum_ms), n(s?.ttft_count)),
    ttftP50Ms: quantile(hist(s?.ttft_hist), 0.5, s?.ttft_max_ms),
    ttftP95Ms: quantile(hist(s?.ttft_hist), 0.95, s?.ttft_max_ms),
    ttftP99Ms: quantile(hist(s?.ttft_hist), 0.99, s?.ttft_max_ms),
    tpotAvgMs: avg(n(s?.tpot_sum_ms), n(s?.tpot_count)),
    tpotP50Ms: quantile(hist(s?.tpot_hist), 0.5, s?.tpot_max_ms),
    tpotP95Ms: quantile(hist(s?.tpot_hist), 0.95, s?.tpot_max_ms),
    tpotP99Ms: quantile(hist(s?.tpot_hist), 0.99, s?.tpot_max_ms),
    queueWaitAvgMs: avg(n(s?.queue_sum_ms), n(s?.queue_count)),
    queueWaitP95Ms: quantile(hist(s?.queue_hist), 0.95, s?.queue_max_ms),
    queueWaitMaxMs: s?.queue_max_ms ?? null,
    replicasCurrent: s?.replicas_current ?? null,
    replicasDesired: s?.replicas_desired ?? null,
    replicasUpdated: s?.replicas_updated ?? null,
  };
}
