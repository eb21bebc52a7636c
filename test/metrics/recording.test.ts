/**
 * Recording's parts without a gateway: the latency buckets and their
 * percentiles, the per-minute roll-up of a batch, and the recorder's bounded
 * buffer, which drops and counts outcomes rather than wait for a slow write.
 */
import { describe, expect, test } from 'vitest';
import { BUCKET_BOUNDS_MS, bucketOf, emptyHistogram, mergeInto, quantile } from '../../src/domain/latency-histogram.js';
import { errorClassOf, rollUp } from '../../src/router/minute-rollup.js';
import { RequestRecorder, type RecordedRequest } from '../../src/router/request-recorder.js';
import type { Sql } from '../../src/storage/database.js';

function entry(overrides: Partial<RecordedRequest> = {}): RecordedRequest {
  return {
    endpointId: 'ep_a',
    replicaId: 'rp_1',
    teamId: 'tm_1',
    userId: 'us_1',
    stream: true,
    httpStatus: 200,
    promptTokens: 10,
    completionTokens: 11,
    ttftMs: 50,
    durationMs: 150,
    queuedMs: 2,
    finishReason: 'length',
    cancelled: false,
    startedAt: new Date(Date.UTC(2026, 10, 24, 10, 0, 30)),
    ...overrides,
  };
}

describe('latency buckets', () => {
  test('each value falls in the bucket whose bounds hold it', () => {
    for (const ms of [0, 0.3, 0.5, 0.51, 1, 7.3, 100, 2500, 59_999, 1e9]) {
      const i = bucketOf(ms);
      if (i < BUCKET_BOUNDS_MS.length) expect(ms).toBeLessThanOrEqual(BUCKET_BOUNDS_MS[i]! + 1e-9);
      if (i > 0) expect(ms).toBeGreaterThan(BUCKET_BOUNDS_MS[i - 1]!);
    }
  });

  test('percentiles of merged histograms are within 25 % of the exact ones, never above the max', () => {
    const values = Array.from({ length: 1000 }, (_, i) => 3 + ((i * 7919) % 1000) * 1.7);
    const a = emptyHistogram();
    const b = emptyHistogram();
    values.forEach((v, i) => (i % 2 ? a : b)[bucketOf(v)]!++);
    const merged = mergeInto(emptyHistogram(), a);
    mergeInto(merged, b);
    const sorted = [...values].sort((x, y) => x - y);
    const max = sorted[sorted.length - 1]!;
    for (const q of [0.5, 0.95, 0.99]) {
      const exact = sorted[Math.ceil(q * sorted.length) - 1]!;
      const estimate = quantile(merged, q, max)!;
      expect(Math.abs(estimate - exact) / exact).toBeLessThan(0.25);
      expect(estimate).toBeLessThanOrEqual(max);
    }
    expect(quantile(emptyHistogram(), 0.5)).toBeNull();
  });
});

describe('the roll-up of a batch', () => {
  test('groups by endpoint and completion minute, classes errors, sums tokens', () => {
    const deltas = rollUp([
      entry(),
      entry({ httpStatus: 400, promptTokens: null, completionTokens: null, ttftMs: null }),
      entry({ httpStatus: 503 }),
      entry({ errorCode: 'upstream_disconnected', cancelled: true }),
      entry({ cancelled: true }),
      entry({ endpointId: 'ep_b' }),
      // Finishes in the next minute.
      entry({ durationMs: 40_000 }),
    ]);
    expect(deltas).toHaveLength(3);
    const a = deltas.find((d) => d.endpointId === 'ep_a' && d.minute.getUTCMinutes() === 0)!;
    expect(a).toMatchObject({
      requests: 5,
      errors4xx: 1,
      errors5xx: 1,
      errorsCut: 1,
      cancelled: 1,
      promptTokens: 40,
      completionTokens: 44,
    });
    expect(a.ttft.count).toBe(4);
    // (150 - 50) / (11 - 1) per token
    expect(a.tpot.maxMs).toBe(10);
    expect(errorClassOf({ httpStatus: 200, errorCode: null })).toBeNull();
  });
});

describe('the recorder', () => {
  test('never waits: past its bound, outcomes are dropped and counted while a write is stuck', async () => {
    let writes = 0;
    // A database whose statements never finish: a recorder that waited for one would never return from it.
    const stuck = Object.assign(() => (writes++, new Promise(() => {})), { array: (values: unknown[]) => values }) as unknown as Sql;
    const logged: string[] = [];
    const recorder = new RequestRecorder(stuck, 60_000, (message) => logged.push(message), { maxBuffered: 100 });
    recorder.record(entry());
    void recorder.flush();
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toBe(1);
    // Recorded in one synchronous loop while that write is stuck: every call returns at once, with nothing to wait on
    // (an async record, or one that chained its outcome to the write, would answer a promise), and the outcomes past
    // the bound are dropped and counted before the loop ends (no write can finish, nor any callback run, meanwhile).
    const answers = new Set<unknown>();
    for (let i = 0; i < 10_000; i++) answers.add(recorder.record(entry()));
    expect([...answers]).toEqual([undefined]);
    expect(recorder.dropped).toBe(10_000 - 100);
    // Nor did recording start a write of its own: the buffer waits for the stuck one.
    expect(writes).toBe(1);
    // (Its timer goes; the flush close() begins waits on the stuck write forever, and holds nothing.)
    void recorder.close();
  });
});
