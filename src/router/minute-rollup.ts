/**
 * Turns a batch of request outcomes into per-endpoint, per-minute deltas of
 * the roll-ups: counts, token sums, errors by class and latency histograms. A
 * request counts in the minute it finished.
 */
import { bucketOf, emptyHistogram } from '../domain/latency-histogram.js';
import type { LatencyDelta, MinuteDelta } from '../storage/metrics-repository.js';
import type { RequestLogEntry } from '../storage/request-log-repository.js';

export const UPSTREAM_CUT_CODE = 'upstream_disconnected';

export type ErrorClass = '4xx' | '5xx' | 'cut' | null;

/**
 * How a request failed, if it did: the replica's answer cut short, or its
 * HTTP status class. A client that left is not an error (it counts as
 * cancelled).
 */
export function errorClassOf(entry: Pick<RequestLogEntry, 'httpStatus' | 'errorCode'>): ErrorClass {
  if (entry.errorCode === UPSTREAM_CUT_CODE) return 'cut';
  if (entry.errorCode === 'client_closed') return null;
  if (entry.httpStatus >= 500) return '5xx';
  if (entry.httpStatus >= 400) return '4xx';
  return null;
}

/** Time per output token after the first, for a streamed answer of two tokens or more. */
export function timePerOutputTokenMs(entry: RequestLogEntry): number | null {
  if (!entry.stream || entry.ttftMs === null || entry.completionTokens === null || entry.completionTokens < 2) return null;
  return Math.max(0, entry.durationMs - entry.ttftMs) / (entry.completionTokens - 1);
}

export function minuteOf(ms: number): Date {
  return new Date(Math.floor(ms / 60_000) * 60_000);
}

function latency(): LatencyDelta {
  return { count: 0, sumMs: 0, maxMs: null, hist: emptyHistogram() };
}

function observe(into: LatencyDelta, ms: number): void {
  into.count++;
  into.sumMs += ms;
  into.maxMs = into.maxMs === null ? ms : Math.max(into.maxMs, ms);
  into.hist[bucketOf(ms)]!++;
}

/** Refused requests (never served) count as requests and errors; their latencies are not a replica's and are left out. */
export function rollUp(entries: readonly (RequestLogEntry & { refused?: boolean })[]): MinuteDelta[] {
  const deltas = new Map<string, MinuteDelta>();
  for (const entry of entries) {
    const minute = minuteOf(entry.startedAt.getTime() + entry.durationMs);
    const key = `${entry.endpointId}\n${minute.getTime()}`;
    let d = deltas.get(key);
    if (!d) {
      d = {
        endpointId: entry.endpointId,
        minute,
        requests: 0,
        errors4xx: 0,
        errors5xx: 0,
        errorsCut: 0,
        cancelled: 0,
        promptTokens: 0,
        completionTokens: 0,
        durationSumMs: 0,
        durationMaxMs: null,
        ttft: latency(),
        tpot: latency(),
        queue: latency(),
      };
      deltas.set(key, d);
    }
    d.requests++;
    const error = errorClassOf(entry);
    if (error === '4xx') d.errors4xx++;
    else if (error === '5xx') d.errors5xx++;
    else if (error === 'cut') d.errorsCut++;
    else if (entry.cancelled) d.cancelled++;
    d.promptTokens += entry.promptTokens ?? 0;
    d.completionTokens += entry.completionTokens ?? 0;
    if (entry.refused) continue;
    d.durationSumMs += entry.durationMs;
    d.durationMaxMs = d.durationMaxMs === null ? entry.durationMs : Math.max(d.durationMaxMs, entry.durationMs);
    if (entry.ttftMs !== null) observe(d.ttft, entry.ttftMs);
    const tpot = timePerOutputTokenMs(entry);
    if (tpot !== null) observe(d.tpot, tpot);
    observe(d.queue, entry.queuedMs);
  }
  return [...deltas.values()];
}
