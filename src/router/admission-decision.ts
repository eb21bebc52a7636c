/**
 * The admission decision for one arriving request, as a pure function of the
 * gate's state (see admission.ts for the gate that applies it).
 *
 * - A free slot with nobody waiting: it runs.
 * - The endpoint's queue (maxQueue) or the key's (maxPerKey) is full: 429.
 * - No service rate measured yet (the endpoint's first requests through this
 *   process): it is queued only when fewer requests would start before it
 *   than one round of the endpoint's slots at its largest (maxReplica x
 *   max_batch_size, or the slots serving and coming if more), that is, when
 *   it takes one of the slots freed (or added) next; the rest get 429 at once
 *   with Retry-After COLD_RETRY_AFTER_S. A burst on a fresh endpoint is thus
 *   answered at once rather than queued and refused later, while the queue
 *   still shows the autoscaler demand for every replica it may add.
 * - Otherwise it is queued only when its expected wait, from the measured
 *   hold time and the requests served before it under round-robin between
 *   keys, is within QUEUE_MARGIN of the queue timeout; else 429 with the
 *   seconds after which a retry would be queued.
 */

export interface AdmissionLimits {
  /** How long a request may wait for a slot. */
  timeoutMs: number;
  /** Requests queued at most for the endpoint (in this process). */
  maxQueue: number;
  /** Requests queued at most per API key for the endpoint (in this process). */
  maxPerKey: number;
}

export interface AdmissionInput extends AdmissionLimits {
  /** Requests holding a slot. */
  running: number;
  /** Slots of the serving replicas. */
  slots: number;
  /** Slots of replicas being added (desired > ready): counted as capacity coming. */
  coming: number;
  /** This key's requests already queued. */
  ownQueued: number;
  /** Each other key's queued requests. */
  othersQueued: readonly number[];
  /** The measured mean time a request holds its slot; undefined before any measurement. */
  holdMs: number | undefined;
  /** Before any measurement: how long the slots now held have been held, on average (a lower bound of a hold). */
  holdAtLeastMs?: number | undefined;
  /** Slots of the endpoint at its largest (maxReplica x max_batch_size): before any measurement, one round of them may queue. */
  maxSlots?: number;
}

export interface Refusal {
  /** `queue_full`: the endpoint's queue is full, or would not reach this request in time; `rate_limit_exceeded`: this key's queue is full. */
  code: 'queue_full' | 'rate_limit_exceeded';
  message: string;
  retryAfterS: number;
}

export type AdmissionDecision = { kind: 'run' } | { kind: 'queue'; expectedWaitMs: number | undefined } | ({ kind: 'refuse' } & Refusal);

/**
 * The share of the queue timeout a request may be expected to wait and still
 * be queued. The rest absorbs the estimate's noise: a queued request is
 * refused later only if the estimate rises by a quarter (see reviewQueue),
 * rather than at its every tick.
 */
export const QUEUE_MARGIN = 0.8;

/**
 * Retry-After of a request refused before any hold is measured: the first
 * holds end within a few seconds of a burst, and a retry is then judged by
 * the measured rate.
 */
export const COLD_RETRY_AFTER_S = 1;

/** Retry-After in whole seconds, at least 1. */
export function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/**
 * How long a request with `ahead` requests served before it can be expected
 * to wait, all `capacity` slots busy: one slot frees every holdMs / capacity.
 * Before any measurement, with only a lower bound of the hold, only the
 * whole rounds ahead of it count (the slots held now may free at any time):
 * floor(ahead / capacity) holds at least. Undefined: nothing known.
 */
export function expectedWaitMs(ahead: number, capacity: number, holdMs: number | undefined, holdAtLeastMs?: number): number | undefined {
  if (holdMs !== undefined) return ((ahead + 1) * holdMs) / capacity;
  if (holdAtLeastMs !== undefined) return Math.floor(ahead / capacity) * holdAtLeastMs;
  return undefined;
}

/**
 * Requests served before a new one of a key with `ownQueued` waiting, under
 * round-robin: its own queue, and from each other key at most one per round
 * until this one's round.
 */
export function requestsAhead(ownQueued: number, othersQueued: readonly number[]): number {
  return othersQueued.reduce((sum, q) => sum + Math.min(q, ownQueued + 1), ownQueued);
}

/** The decision for one arriving request, as a pure function of the gate's state. */
export function decideAdmission(input: AdmissionInput): AdmissionDecision {
  const { running, slots, coming, ownQueued, othersQueued, holdMs, holdAtLeastMs, timeoutMs, maxQueue, maxPerKey, maxSlots = 0 } = input;
  const queued = othersQueued.reduce((a, b) => a + b, ownQueued);
  if (queued === 0 && running < slots) return { kind: 'run' };
  const capacity = Math.max(1, slots + coming);
  const waitFor = (ahead: number) => expectedWaitMs(ahead, capacity, holdMs, holdAtLeastMs);
  if (queued >= maxQueue) {
    const drain = waitFor(queued - maxQueue);
    return {
      kind: 'refuse',
      code: 'queue_full',
      retryAfterS: seconds(drain ?? 0),
      message: `endpoint is at capacity: ${queued} requests are queued, the most it holds`,
    };
  }
  if (ownQueued >= maxPerKey) {
    // One of this key's own requests is served after at most one of each other key's.
    const next = waitFor(othersQueued.filter((q) => q > 0).length);
    return {
      kind: 'refuse',
      code: 'rate_limit_exceeded',
      retryAfterS: seconds(next ?? 0),
      message: `this API key has ${ownQueued} requests queued for the endpoint, the most one key may`,
    };
  }
  const ahead = requestsAhead(ownQueued, othersQueued);
  const round = Math.max(capacity, maxSlots);
  if (holdMs === undefined && ahead >= round) {
    // No service rate yet: only one round is queued, what the endpoint at its largest starts as its slots free.
    return {
      kind: 'refuse',
      code: 'queue_full',
      retryAfterS: COLD_RETRY_AFTER_S,
      message: `endpoint is at capacity: its service rate is not measured yet, and ${ahead} requests would start before this one, as many as its ${round} slots take in one round`,
    };
  }
  const wait = waitFor(ahead);
  const admissible = timeoutMs * QUEUE_MARGIN;
  if (wait !== undefined && wait > admissible) {
    return {
      kind: 'refuse',
      code: 'queue_full',
      retryAfterS: seconds(wait - admissible),
      message: `endpoint is at capacity: a slot is expected in ${(wait / 1000).toFixed(1)} s, past the ${(admissible / 1000).toFixed(1)} s a request may be queued for`,
    };
  }
  return { kind: 'queue', expectedWaitMs: wait };
}
