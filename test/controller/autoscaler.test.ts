import { describe, expect, test } from 'vitest';
import { decideScale, replicaCapacity, type ScaleInput } from '../../src/controller/autoscaler.js';

const base: ScaleInput = {
  minReplica: 1,
  maxReplica: 4,
  cooldownMs: 10_000,
  maxBatchSize: 4,
  current: 1,
  load: 0,
  waiting: 0,
  lastActivityAt: 0,
  lastScaleUpAt: 0,
  now: 5_000,
};

describe('decideScale', () => {
  test('follows the requests in flight against max_batch_size, within min and max', () => {
    expect(decideScale({ ...base, load: 4 })).toEqual({ replicas: 1, sleep: false });
    expect(decideScale({ ...base, load: 5 })).toEqual({ replicas: 2, sleep: false });
    expect(decideScale({ ...base, load: 13 })).toEqual({ replicas: 4, sleep: false });
    expect(decideScale({ ...base, load: 100 })).toEqual({ replicas: 4, sleep: false });
    expect(decideScale({ ...base, minReplica: 2, load: 0 })).toEqual({ replicas: 2, sleep: false });
  });

  test("requests waiting in the gateways' queues count as demand, as soon as they exceed what the serving replicas take", () => {
    // max_batch_size 1: one request on the engine, five waiting in two gateways' queues.
    const one = { ...base, maxBatchSize: 1, maxReplica: 2 };
    expect(decideScale({ ...one, load: 1, waiting: 0 })).toEqual({ replicas: 1, sleep: false });
    expect(decideScale({ ...one, load: 1, waiting: 1 })).toEqual({ replicas: 2, sleep: false });
    expect(decideScale({ ...one, load: 1, waiting: 5 })).toEqual({ replicas: 2, sleep: false });
    expect(decideScale({ ...base, load: 4, waiting: 5 })).toEqual({ replicas: 3, sleep: false });
    // Requests waiting alone (the engines idle between two admissions) keep the replicas.
    expect(decideScale({ ...one, current: 2, load: 0, waiting: 2, lastActivityAt: 0, lastScaleUpAt: 0, now: 60_000 })).toEqual({
      replicas: 2,
      sleep: false,
    });
  });

  test('no scale-down while the demand needs every replica, however long since the last request started', () => {
    const long = { ...base, maxBatchSize: 1, current: 2, maxReplica: 2, lastActivityAt: 0, lastScaleUpAt: 0, now: 60_000 };
    expect(decideScale({ ...long, load: 2 })).toEqual({ replicas: 2, sleep: false });
    expect(decideScale({ ...long, load: 1, waiting: 1 })).toEqual({ replicas: 2, sleep: false });
    expect(decideScale({ ...long, load: 1 })).toEqual({ replicas: 1, sleep: false });
  });

  test('more replicas than maxReplica allows (an update lowered it): down to maxReplica at once, busy or not', () => {
    expect(decideScale({ ...base, maxReplica: 1, current: 4, load: 16, lastActivityAt: 5_000, lastBusyAt: 5_000 })).toEqual({
      replicas: 1,
      sleep: false,
    });
    expect(decideScale({ ...base, maxReplica: 2, current: 3, load: 0 })).toEqual({ replicas: 2, sleep: false });
  });

  test('scales down one replica at a time, only after the cooldown', () => {
    const busy = { ...base, current: 3, load: 2, lastActivityAt: 4_000, lastScaleUpAt: 1_000 };
    expect(decideScale(busy)).toEqual({ replicas: 3, sleep: false });
    expect(decideScale({ ...busy, now: 11_000 })).toEqual({ replicas: 2, sleep: false });
    expect(decideScale({ ...busy, load: 0, lastActivityAt: 0, now: 10_000 })).toEqual({ replicas: 2, sleep: false });
  });

  test('scales in only once the demand has been low for a whole cooldown, not the moment a load ends', () => {
    // Three replicas were needed until 20 s (lastBusyAt); the load has just ended, long after the last scale-up.
    const after = { ...base, current: 3, load: 1, lastActivityAt: 20_000, lastScaleUpAt: 1_000, lastBusyAt: 20_000 };
    expect(decideScale({ ...after, now: 20_500 })).toEqual({ replicas: 3, sleep: false });
    expect(decideScale({ ...after, now: 29_999 })).toEqual({ replicas: 3, sleep: false });
    expect(decideScale({ ...after, now: 30_000 })).toEqual({ replicas: 2, sleep: false });
  });

  test('with min 0, an endpoint idle for the cooldown sleeps; one with requests does not', () => {
    const idle = { ...base, minReplica: 0, now: 10_000 };
    expect(decideScale(idle)).toEqual({ replicas: 0, sleep: true });
    expect(decideScale({ ...idle, now: 9_999 })).toEqual({ replicas: 1, sleep: false });
    expect(decideScale({ ...idle, load: 1 })).toEqual({ replicas: 1, sleep: false });
    expect(decideScale({ ...idle, waiting: 1 })).toEqual({ replicas: 1, sleep: false });
    expect(decideScale({ ...idle, minReplica: 1 }).sleep).toBe(false);
  });

  test("a replica's capacity is what its engine decodes at once, when that is less than max_batch_size", () => {
    expect(replicaCapacity(1024, [{ sequences: 256 }, undefined])).toBe(256);
    expect(replicaCapacity(8, [{}, { sequences: 8 }])).toBe(8);
    expect(replicaCapacity(16, [undefined])).toBe(16);
    // 768 requests on replicas that decode 256 at once want 3 of them, not 1.
    expect(decideScale({ ...base, maxReplica: 4, maxBatchSize: replicaCapacity(1024, [{ sequences: 256 }]), load: 768 })).toEqual({
      replicas: 3,
      sleep: false,
    });
  });
});
