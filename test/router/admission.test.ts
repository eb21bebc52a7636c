/** The admission decision (pure) and the gate's fair queue, without engines. */
import { describe, expect, test } from 'vitest';
import {
  decideAdmission,
  EndpointGate,
  QueueRefusedError,
  QueueTimeoutError,
  QUEUE_MARGIN,
  requestsAhead,
  type AdmissionInput,
} from '../../src/router/admission.js';

const base: AdmissionInput = {
  running: 2,
  slots: 2,
  coming: 0,
  ownQueued: 0,
  othersQueued: [],
  holdMs: 1000,
  timeoutMs: 5000,
  maxQueue: 256,
  maxPerKey: 64,
};

describe('decideAdmission', () => {
  test('a free slot with nobody waiting runs at once', () => {
    expect(decideAdmission({ ...base, running: 1 })).toEqual({ kind: 'run' });
    // Others waiting go first, even with a slot free for a moment.
    expect(decideAdmission({ ...base, running: 1, othersQueued: [1] }).kind).toBe('queue');
  });

  test('queues when the expected wait, (ahead + 1) x hold / slots, is within the timeout less its margin', () => {
    expect(QUEUE_MARGIN).toBe(0.8); // 4 s of the 5 s timeout
    // 7 of the key's own ahead, 2 slots of 1 s each: the 8th waits about 4 s.
    expect(decideAdmission({ ...base, ownQueued: 7 })).toEqual({ kind: 'queue', expectedWaitMs: 4000 });
    // Round-robin: its own 2, then from each other key at most 3 (one per round up to its own): 2 + 3 + 1 ahead.
    expect(decideAdmission({ ...base, ownQueued: 2, othersQueued: [5, 1] })).toEqual({ kind: 'queue', expectedWaitMs: 3500 });
    const refused = decideAdmission({ ...base, ownQueued: 8 });
    expect(refused).toMatchObject({ kind: 'refuse', code: 'queue_full', retryAfterS: 1 });
    // 29 ahead: 15 s expected, 11 s past what may be queued.
    expect(decideAdmission({ ...base, ownQueued: 29 })).toMatchObject({ kind: 'refuse', code: 'queue_full', retryAfterS: 11 });
  });

  test('before any measurement, requests queue, within the bounds', () => {
    expect(decideAdmission({ ...base, holdMs: undefined, othersQueued: [200] })).toEqual({ kind: 'queue', expectedWaitMs: undefined });
    expect(decideAdmission({ ...base, holdMs: undefined, othersQueued: [256] })).toMatchObject({
      kind: 'refuse',
      code: 'queue_full',
      retryAfterS: 1,
    });
    expect(decideAdmission({ ...base, holdMs: undefined, ownQueued: 64 })).toMatchObject({ kind: 'refuse', code: 'rate_limit_exceeded' });
  });

  test('replicas being added count as capacity coming', () => {
    const busy = { ...base, ownQueued: 15 }; // 16 x 1 s over 2 slots: 8 s
    expect(decideAdmission(busy).kind).toBe('refuse');
    expect(decideAdmission({ ...busy, coming: 2 })).toEqual({ kind: 'queue', expectedWaitMs: 4000 });
  });

  test('the per-endpoint and per-key bounds refuse with a Retry-After from the rate', () => {
    const full = decideAdmission({ ...base, holdMs: 100, othersQueued: [20], maxQueue: 20 });
    expect(full).toMatchObject({ kind: 'refuse', code: 'queue_full', retryAfterS: 1 });
    const slow = decideAdmission({ ...base, holdMs: 10_000, timeoutMs: 60_000, ownQueued: 3, othersQueued: [2, 1], maxPerKey: 3 });
    // One of this key's requests starts after one of each other key's: 3 x 10 s / 2 slots.
    expect(slow).toMatchObject({ kind: 'refuse', code: 'rate_limit_exceeded', retryAfterS: 15 });
  });

  test("a light key's request is judged by its round-robin place, not by a heavy key's backlog", () => {
    expect(requestsAhead(0, [50])).toBe(1);
    expect(requestsAhead(2, [50, 1])).toBe(2 + 3 + 1);
    const heavyBacklog = { ...base, othersQueued: [40] };
    expect(decideAdmission({ ...heavyBacklog, ownQueued: 0 })).toEqual({ kind: 'queue', expectedWaitMs: 1000 });
    expect(decideAdmission({ ...base, ownQueued: 40 }).kind).toBe('refuse');
  });
});

/** A gate with `slots` slots and the given limits; admissions are recorded in order. */
function gate(slots: number, limits: Partial<AdmissionInput> = {}) {
  let changes = 0;
  const g = new EndpointGate(
    () => slots,
    { timeoutMs: 60_000, maxQueue: 256, maxPerKey: 64, ...limits },
    () => 0,
    () => changes++,
  );
  const admitted: string[] = [];
  const releases: (() => void)[] = [];
  const ask = (key: string, label: string, signal = new AbortController().signal) =>
    g.acquire(key, signal).then((release) => {
      admitted.push(label);
      releases.push(release);
    });
  return { g, admitted, releases, ask, changes: () => changes };
}

describe('EndpointGate', () => {
  test('a freed slot goes to the key served least recently: a light key is not stuck behind a heavy backlog', async () => {
    const { g, admitted, releases, ask } = gate(1);
    await ask('heavy', 'h0');
    const waiting = [
      ask('heavy', 'h1'),
      ask('heavy', 'h2'),
      ask('heavy', 'h3'),
      ask('light', 'l1'),
      ask('heavy', 'h4'),
      ask('light', 'l2'),
    ];
    expect(g.queued).toBe(6);
    for (let i = 0; i < 6; i++) {
      releases.shift()!();
      await Promise.resolve();
      await Promise.resolve();
    }
    await Promise.all(waiting);
    expect(admitted).toEqual(['h0', 'l1', 'h1', 'l2', 'h2', 'h3', 'h4']);
  });

  test('the hold time is measured as slots are released, and then a request that would wait too long is refused at once', async () => {
    const { g, releases, ask } = gate(1, { timeoutMs: 200 });
    expect(g.holdMs).toBeUndefined();
    await ask('a', 'a0');
    await new Promise((r) => setTimeout(r, 300));
    releases.shift()!();
    expect(g.holdMs).toBeGreaterThanOrEqual(250);
    await ask('a', 'a1'); // a free slot: runs
    const refused = await g.acquire('b', new AbortController().signal).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(QueueRefusedError);
    expect((refused as QueueRefusedError).refusal).toMatchObject({ code: 'queue_full' });
    expect((refused as QueueRefusedError).refusal.retryAfterS).toBeGreaterThanOrEqual(1);
    releases.shift()!();
  });

  test('a wait that times out raises the estimate, so the next arrivals are refused at once', async () => {
    const { g, releases, ask } = gate(1, { timeoutMs: 100 });
    // A hold measured near 0 ms: the next slot is expected at once, so a request queues and waits it out.
    await ask('a', 'a0');
    releases.shift()!();
    expect(g.holdMs).toBeLessThan(20);
    await ask('a', 'a1');
    const timedOut = await g.acquire('b', new AbortController().signal).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(QueueTimeoutError);
    expect(g.holdMs).toBeGreaterThanOrEqual(100);
    expect(g.queued).toBe(0);
    expect(g.decide('c')).toMatchObject({ kind: 'refuse', code: 'queue_full' });
    releases.shift()!();
  });

  test('before any hold is measured, the running requests age into a lower bound: a request whole rounds back that can no longer start in time is refused early', async () => {
    const { g, releases, ask } = gate(1, { timeoutMs: 300 });
    await ask('a', 'a0');
    expect(g.decide('b')).toEqual({ kind: 'queue', expectedWaitMs: 0 });
    const started = performance.now();
    const waits = [0, 1, 2, 3].map((i) => g.acquire(`b${i}`, new AbortController().signal).catch((e: unknown) => e));
    const [first, ...rest] = waits;
    const refusals = await Promise.all(rest);
    const tookMs = performance.now() - started;
    // 1 slot held for t so far: the 4th in line waits at least 3t; refused once 3t passes its deadline (t > 75 ms), long before it.
    for (const refusal of refusals) {
      expect(refusal).toBeInstanceOf(QueueRefusedError);
      expect((refusal as QueueRefusedError).refusal).toMatchObject({ code: 'queue_full' });
    }
    expect(tookMs).toBeLessThan(250);
    expect(g.holdMs).toBeUndefined();
    // The first in line may be served the moment the slot frees: it waits (here until its timeout).
    expect(g.queued).toBe(1);
    expect(await first).toBeInstanceOf(QueueTimeoutError);
    releases.shift()!();
  });

  test('per-key and per-endpoint bounds; an aborted wait leaves the queue', async () => {
    const { g, releases, ask, changes } = gate(1, { maxQueue: 3, maxPerKey: 2 });
    await ask('a', 'a0');
    const client = new AbortController();
    const waits = [ask('a', 'a1', client.signal).catch((e: unknown) => e), ask('a', 'a2')];
    await expect(g.acquire('a', new AbortController().signal)).rejects.toMatchObject({ refusal: { code: 'rate_limit_exceeded' } });
    waits.push(ask('b', 'b1'));
    await expect(g.acquire('c', new AbortController().signal)).rejects.toMatchObject({ refusal: { code: 'queue_full' } });
    expect(g.queued).toBe(3);
    client.abort();
    expect(g.queued).toBe(2);
    expect(changes()).toBeGreaterThanOrEqual(4);
    releases.shift()!();
    await Promise.resolve();
    releases.shift()!();
    await Promise.all(waits);
    expect(g.queued).toBe(0);
    releases.shift()!();
  });
});
