/** The admission decision (pure) and the gate's fair queue, without engines. */
import { describe, expect, test, vi } from 'vitest';
import {
  decideAdmission,
  EndpointGate,
  QueueClosedError,
  QueueRefusedError,
  QueueTimeoutError,
  QUEUE_MARGIN,
  requestsAhead,
  COLD_RETRY_AFTER_S,
  type AdmissionDecision,
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

  test('before any measurement, only one round queues: fewer requests ahead than slots; the rest are refused at once', () => {
    const cold = { ...base, holdMs: undefined };
    // 2 slots: a request with 0 or 1 ahead takes one of the next slots freed.
    expect(decideAdmission({ ...cold, ownQueued: 1 })).toEqual({ kind: 'queue', expectedWaitMs: undefined });
    expect(decideAdmission({ ...cold, ownQueued: 2 })).toMatchObject({
      kind: 'refuse',
      code: 'queue_full',
      retryAfterS: COLD_RETRY_AFTER_S,
    });
    // The running requests' age (a lower bound of a hold) does not queue more than one round either.
    expect(decideAdmission({ ...cold, ownQueued: 1, holdAtLeastMs: 10 })).toEqual({ kind: 'queue', expectedWaitMs: 0 });
    expect(decideAdmission({ ...cold, ownQueued: 2, holdAtLeastMs: 10 }).kind).toBe('refuse');
    // Slots coming (replicas being added) count in the round.
    expect(decideAdmission({ ...cold, ownQueued: 3, coming: 2 }).kind).toBe('queue');
    // Round-robin: a light key's first request is judged by its place (one per other key ahead), not by a heavy key's backlog.
    expect(decideAdmission({ ...cold, othersQueued: [1] }).kind).toBe('queue');
    expect(decideAdmission({ ...cold, othersQueued: [1, 1] }).kind).toBe('refuse');
    // The endpoint's and the key's bounds come first, as ever.
    expect(decideAdmission({ ...cold, othersQueued: [256] })).toMatchObject({ kind: 'refuse', code: 'queue_full', retryAfterS: 1 });
    expect(decideAdmission({ ...cold, ownQueued: 64 })).toMatchObject({ kind: 'refuse', code: 'rate_limit_exceeded' });
  });

  test('a cold-start burst: 200 arrivals on one key, 1 replica x max_batch_size 4, no measurement: 4 run, 4 queue, 192 refused at once', () => {
    let running = 0;
    let queued = 0;
    const refusals: AdmissionDecision[] = [];
    for (let i = 0; i < 200; i++) {
      const decision = decideAdmission({ ...base, slots: 4, running, ownQueued: queued, holdMs: undefined, timeoutMs: 2000 });
      if (decision.kind === 'run') running++;
      else if (decision.kind === 'queue') queued++;
      else refusals.push(decision);
    }
    expect([running, queued, refusals.length]).toEqual([4, 4, 192]);
    for (const r of refusals) expect(r).toMatchObject({ kind: 'refuse', code: 'queue_full', retryAfterS: 1 });
    // An endpoint that may scale to 3 replicas queues one round of its largest size (12), so that the autoscaler sees
    // demand for every replica it may add; still no more.
    queued = 0;
    for (let i = 0; i < 200; i++) {
      const input = { ...base, slots: 4, running: 4, ownQueued: queued, holdMs: undefined, timeoutMs: 2000, maxSlots: 12 };
      if (decideAdmission(input).kind === 'queue') queued++;
    }
    expect(queued).toBe(12);
    // The same burst once a hold is measured (160 ms): the queue takes what starts within 80% of the 2 s timeout.
    queued = 0;
    for (let i = 0; i < 200; i++) {
      if (decideAdmission({ ...base, slots: 4, running: 4, ownQueued: queued, holdMs: 160, timeoutMs: 2000 }).kind === 'queue') queued++;
    }
    expect(queued).toBe(40); // (ahead + 1) x 160 / 4 <= 1600 ms: 39 ahead at most
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
  /** One request served at once, so that a hold (of about 0 ms) is measured and the queue is no longer bounded to one round. */
  const warm = async () => (await g.acquire('warm-up', new AbortController().signal))();
  return { g, admitted, releases, ask, warm, changes: () => changes };
}

describe('EndpointGate', () => {
  test('a freed slot goes to the key served least recently: a light key is not stuck behind a heavy backlog', async () => {
    const { g, admitted, releases, ask, warm } = gate(1);
    await warm();
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
    const { g, releases, ask } = gate(1, { timeoutMs: 400 });
    // A hold measured near 0 ms (well under the timeout even on a loaded machine): the next slot is expected at once, so a request queues and waits it out.
    await ask('a', 'a0');
    releases.shift()!();
    expect(g.holdMs).toBeLessThan(200);
    await ask('a', 'a1');
    const timedOut = await g.acquire('b', new AbortController().signal).catch((e: unknown) => e);
    // Its timer, or a review of the queue a few ms before it (a late timer on a busy machine): either way the estimate rises.
    expect(timedOut instanceof QueueTimeoutError || timedOut instanceof QueueRefusedError).toBe(true);
    expect(g.holdMs).toBeGreaterThanOrEqual(400);
    expect(g.queued).toBe(0);
    expect(g.decide('c')).toMatchObject({ kind: 'refuse', code: 'queue_full' });
    releases.shift()!();
  });

  test('a cold-start burst through the gate: one round queued, the rest refused at once; a second key still gets its turn', async () => {
    const { g, releases, ask } = gate(4, { timeoutMs: 2000 });
    const burst = Array.from({ length: 200 }, (_, i) => ask('heavy', `h${i}`).catch((e: unknown) => e));
    const outcomes = await Promise.race([Promise.all(burst), new Promise<unknown[]>((r) => setTimeout(() => r([]), 50))]);
    expect(outcomes).toEqual([]); // the 8 admitted or queued are still pending; the refusals came at once:
    expect(g.inFlight).toBe(4);
    expect(g.queued).toBe(4);
    const light = ask('light', 'l0');
    expect(g.queued).toBe(5); // one per other key ahead of it: within the round
    for (let i = 0; i < 5; i++) {
      releases.shift()!();
      await Promise.resolve();
      await Promise.resolve();
    }
    await light;
    const settled = await Promise.all(burst);
    const refused = settled.filter((e) => e instanceof QueueRefusedError) as QueueRefusedError[];
    expect(refused).toHaveLength(192);
    for (const r of refused) expect(r.refusal).toMatchObject({ code: 'queue_full', retryAfterS: 1 });
    expect(g.holdMs).toBeDefined();
    while (releases.length > 0) releases.shift()!();
  });

  test('before any hold is measured, the running requests age into a lower bound: a request pushed a whole round back that can no longer start in time is refused early', async () => {
    // On a fake clock (the gate's timers and performance.now()): "early" is an ordering on it, which no load can change.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
    try {
      const { g, releases, ask } = gate(2, { timeoutMs: 300 });
      await ask('a', 'a0');
      await ask('a', 'a1');
      const settled: string[] = [];
      const track = (label: string, p: Promise<unknown>) => p.catch((e: unknown) => e).finally(() => settled.push(label));
      // b0 and b1 queue within the round (0 and 1 ahead); c0 then goes before b1 (round-robin), which is pushed to a second round.
      const b0 = track('b0', g.acquire('b', new AbortController().signal));
      const b1 = track('b1', g.acquire('b', new AbortController().signal));
      const c0 = track('c0', g.acquire('c', new AbortController().signal));
      expect(g.queued).toBe(3);
      // 2 slots held for t so far: b1 waits at least t; it is refused once t passes its deadline's remainder (150 ms).
      await vi.advanceTimersByTimeAsync(140);
      expect(settled).toEqual([]);
      await vi.advanceTimersByTimeAsync(60);
      expect(settled).toEqual(['b1']);
      const pushedBack = await b1;
      expect(pushedBack).toBeInstanceOf(QueueRefusedError);
      expect((pushedBack as QueueRefusedError).refusal).toMatchObject({ code: 'queue_full' });
      expect(g.holdMs).toBeUndefined();
      // The first round may be served the moment the slots free: they wait, until their deadline (the timeout, or the
      // queue's review a moment before it) ends them.
      expect(g.queued).toBe(2);
      await vi.advanceTimersByTimeAsync(80);
      expect(settled).toEqual(['b1']);
      await vi.advanceTimersByTimeAsync(30);
      for (const waited of [await b0, await c0]) {
        expect(waited instanceof QueueTimeoutError || waited instanceof QueueRefusedError).toBe(true);
      }
      expect(settled.slice(1).sort()).toEqual(['b0', 'c0']);
      releases.splice(0).forEach((release) => release());
    } finally {
      vi.useRealTimers();
    }
  });

  test('per-key and per-endpoint bounds; an aborted wait leaves the queue', async () => {
    const { g, releases, ask, warm, changes } = gate(1, { maxQueue: 3, maxPerKey: 2 });
    await warm();
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

  test('closing the queue (the endpoint stopped serving) ends every queued wait at once with its error; the running request keeps its slot', async () => {
    const { g, releases, ask, warm } = gate(1);
    await warm();
    await ask('a', 'a0');
    const waits = [ask('a', 'a1'), ask('b', 'b1'), ask('b', 'b2')].map((w) => w.catch((e: unknown) => e));
    expect(g.queued).toBe(3);
    const closed = new QueueClosedError({ kind: 'conflict', message: 'terminated', code: 'endpoint_not_running', field: 'model' });
    g.closeQueue(closed);
    expect(await Promise.all(waits)).toEqual([closed, closed, closed]);
    expect(g.queued).toBe(0);
    expect(g.inFlight).toBe(1);
    releases.shift()!();
    expect(g.inFlight).toBe(0);
  });
});
