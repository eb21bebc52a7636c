/**
 * Admission to an endpoint's replicas: at most replicas x max_batch_size
 * requests run at once (through this gateway process); the rest wait, up to a
 * bounded time, in one queue per API key, and a freed slot goes to the key
 * served least recently (round-robin between keys), so that one heavy client
 * cannot starve the others.
 *
 * A request is queued only when it can be expected to start within the queue
 * timeout (with a margin: QUEUE_MARGIN), judged from the measured service
 * rate (an EWMA of how long an admitted request holds its slot, over the
 * slots serving and those being added) and the requests that would be served
 * before it. Otherwise it is refused at once, with the seconds after which a
 * retry would be queued. Before any hold time is measured, only one round is
 * queued: a request with as many requests ahead of it as the endpoint has
 * slots at its largest (maxReplica x max_batch_size) is refused at once (the
 * decision: admission-decision.ts). Those queued may
 * still be pushed back a round by another key's requests (round-robin); for
 * them the requests holding slots give a lower bound: each holds its slot at
 * least as long as it has so far, and a request with whole rounds of requests
 * ahead of it waits at least that long per round.
 *
 * When the estimate rises (a hold measured, or the running requests' age
 * growing before any is), queued requests that can no longer be expected to
 * start before their own timeout are refused then, with the same 429, rather
 * than left to wait it out.
 *
 * While the gateway drains (drain-waits.ts), a queued request that can no
 * longer be expected to start and finish before the drain's bound is answered
 * 503 (retry on another gateway) then, and those still queued shortly before
 * the bound are answered so too.
 */
import {
  decideAdmission,
  expectedWaitMs,
  QUEUE_MARGIN,
  requestsAhead,
  seconds,
  type AdmissionDecision,
  type AdmissionLimits,
  type Refusal,
} from './admission-decision.js';
import type { Failure } from '../domain/errors.js';
import { gatewayDraining, type DrainWaits } from './drain-waits.js';
import { once } from './once.js';

export * from './admission-decision.js';

export class QueueTimeoutError extends Error {}
export class QueueAbortedError extends Error {}

/** The endpoint stopped serving (terminated, failed) while the request waited: `refusal` is what to answer. */
export class QueueClosedError extends Error {
  constructor(readonly refusal: Failure) {
    super('endpoint stopped serving');
  }
}

/** A request refused at once instead of queued; `retryAfterS` is computed from the service rate. */
export class QueueRefusedError extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.message);
  }
}

const RUN: AdmissionDecision = Object.freeze({ kind: 'run' });

/** Weight of the newest hold time in the moving average. */
const HOLD_EWMA_ALPHA = 0.2;
/** Keys remembered for round-robin beyond those waiting. */
const MAX_REMEMBERED_KEYS = 4096;

/** How often queued requests are looked at again while they wait (see `reviewQueue`). */
const REVIEW_MS = 10;

interface Waiter {
  key: string;
  /** Requests expected ahead of it when it was queued (to learn from a timeout). */
  ahead: number;
  /** When its wait ends unadmitted (performance.now()). */
  deadline: number;
  /** The waits of the gateway it came through, which end it with a 503 when that gateway's drain is about to end. */
  drain: DrainWaits | undefined;
  admit: () => void;
  fail: (error: Error) => void;
}

export class EndpointGate {
  private running = 0;
  /** Waiting requests per key, keys in the order they began waiting. */
  private readonly queues = new Map<string, Waiter[]>();
  private size = 0;
  /** The admission sequence number of each key's last admitted request. */
  private readonly lastServed = new Map<string, number>();
  private sequence = 0;
  private holdEwma: number | undefined;
  /** When each slot now held was taken. */
  private readonly heldSince = new Set<{ at: number }>();
  private reviewer: NodeJS.Timeout | undefined;

  /**
   * `limit` (slots now) and `coming` (slots being added) are read at each
   * decision: the replica count changes while requests wait. `onQueueChange`
   * is called whenever the number of queued requests changes. `maxSlots`:
   * the slots of the endpoint at its largest (maxReplica x max_batch_size),
   * one round of which may queue before any hold is measured.
   */
  constructor(
    private readonly limit: () => number,
    private readonly limits: AdmissionLimits,
    private readonly coming: () => number = () => 0,
    private readonly onQueueChange: () => void = () => {},
    private readonly maxSlots: () => number = () => 0,
    /** The waits its gateway's drain answers (drain-waits.ts); none where the gate is used without a gateway. */
    private readonly drain?: DrainWaits,
  ) {}

  get queued(): number {
    return this.size;
  }

  get inFlight(): number {
    return this.running;
  }

  /** The measured mean time an admitted request holds its slot, in ms. */
  get holdMs(): number | undefined {
    return this.holdEwma;
  }

  /** Before any hold is measured: the mean time the slots now held have been held (a lower bound of a hold). */
  private holdAtLeastMs(now = performance.now()): number | undefined {
    if (this.holdEwma !== undefined || this.heldSince.size === 0) return undefined;
    let sum = 0;
    for (const slot of this.heldSince) sum += now - slot.at;
    return sum / this.heldSince.size;
  }

  /** Whether a request arriving now would wait (the slots are taken, or others already wait). */
  get busy(): boolean {
    return this.size > 0 || this.running >= this.limit();
  }

  /** What would happen to a request of `key` arriving now. */
  decide(key: string): AdmissionDecision {
    // The common case, on every request: nobody waits and a slot is free (decideAdmission's first rule, without its inputs).
    if (this.size === 0 && this.running < this.limit()) return RUN;
    const othersQueued: number[] = [];
    for (const [k, q] of this.queues) if (k !== key) othersQueued.push(q.length);
    return decideAdmission({
      ...this.limits,
      running: this.running,
      slots: this.limit(),
      coming: this.coming(),
      ownQueued: this.queues.get(key)?.length ?? 0,
      othersQueued,
      holdMs: this.holdEwma,
      holdAtLeastMs: this.holdAtLeastMs(),
      maxSlots: this.maxSlots(),
    });
  }

  /**
   * Resolves with a release function once admitted; rejects with
   * QueueRefusedError at once when the request is not to be queued, and with
   * QueueTimeoutError or QueueAbortedError when its wait ends unadmitted.
   */
  acquire(key: string, signal: AbortSignal): Promise<() => void> {
    // Gone before it could wait (while its prompt was counted, its key looked up): it takes no place, and holds none.
    if (signal.aborted) return Promise.reject(new QueueAbortedError('client left'));
    const decision = this.decide(key);
    if (decision.kind === 'refuse') return Promise.reject(new QueueRefusedError(decision));
    if (decision.kind === 'run') return Promise.resolve(this.take(key));
    const drain = this.drain;
    if (drain?.refused) return Promise.reject(new QueueClosedError(gatewayDraining()));
    const ahead = requestsAhead(
      this.queues.get(key)?.length ?? 0,
      [...this.queues].filter(([k]) => k !== key).map(([, q]) => q.length),
    );
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        key,
        ahead,
        deadline: performance.now() + this.limits.timeoutMs,
        drain,
        admit: () => {
          cleanup();
          resolve(this.take(key));
        },
        fail: (error) => {
          cleanup();
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        this.learnFromTimeout(waiter);
        this.remove(waiter, new QueueTimeoutError('queue wait exceeded'));
      }, this.limits.timeoutMs);
      const onAbort = () => this.remove(waiter, new QueueAbortedError('client left'));
      signal.addEventListener('abort', onAbort, { once: true });
      const leaveDrain = drain?.enter((failure) => this.remove(waiter, new QueueClosedError(failure)));
      const cleanup = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        leaveDrain?.();
      };
      let queue = this.queues.get(key);
      if (!queue) this.queues.set(key, (queue = []));
      queue.push(waiter);
      this.size++;
      this.onQueueChange();
      this.reviewer ??= setInterval(() => this.reviewQueue(), REVIEW_MS).unref();
    });
  }

  /**
   * Refuses the queued requests that can no longer be expected to start
   * before their deadline, given the hold estimate now. They are taken in
   * the order the round-robin would serve them; the one with p ahead of it
   * is expected to start as `expectedWaitMs` says.
   */
  reviewQueue(): void {
    if (this.size === 0) {
      clearInterval(this.reviewer);
      this.reviewer = undefined;
      return;
    }
    const now = performance.now();
    const holdAtLeastMs = this.holdAtLeastMs(now);
    if (this.holdEwma === undefined && holdAtLeastMs === undefined) return;
    const capacity = Math.max(1, this.limit() + this.coming());
    const late: { waiter: Waiter; waitMs: number }[] = [];
    const draining: Waiter[] = [];
    let position = 0;
    for (const round of this.serviceOrder()) {
      for (const waiter of round) {
        const waitMs = expectedWaitMs(position, capacity, this.holdEwma, holdAtLeastMs)!;
        // Its gateway drains: one that would start too late to finish before the bound is cut there; answered now instead.
        const bound = waiter.drain?.bound;
        if (bound !== undefined && now + waitMs + (this.holdEwma ?? holdAtLeastMs!) > bound) draining.push(waiter);
        else if (now + waitMs > waiter.deadline) late.push({ waiter, waitMs });
        position++;
      }
    }
    for (const waiter of draining) this.remove(waiter, new QueueClosedError(gatewayDraining()));
    for (const { waiter, waitMs } of late) {
      // Refused near its deadline (past the share of the timeout any queued request was expected to wait): the
      // estimate was wrong, as when a wait times out. A review tick can come a few ms before the timer does.
      if (this.limits.timeoutMs - (waiter.deadline - now) >= this.limits.timeoutMs * QUEUE_MARGIN) this.learnFromTimeout(waiter);
      const retryAfterS = seconds(waitMs - (waiter.deadline - now));
      this.remove(
        waiter,
        new QueueRefusedError({
          code: 'queue_full',
          retryAfterS,
          message: `endpoint is at capacity: a slot is no longer expected within the ${(this.limits.timeoutMs / 1000).toFixed(1)} s a request may wait`,
        }),
      );
    }
  }

  /** Ends every queued request's wait with `error` (the endpoint will serve none of them). */
  closeQueue(error: Error): void {
    for (const queue of [...this.queues.values()]) for (const waiter of [...queue]) this.remove(waiter, error);
  }

  /** The queued requests in rounds, as pump() would admit them: one per key per round, least recently served key first. */
  private *serviceOrder(): Generator<Waiter[]> {
    const keys = [...this.queues.keys()].sort((a, b) => (this.lastServed.get(a) ?? -1) - (this.lastServed.get(b) ?? -1));
    for (let round = 0; ; round++) {
      const batch: Waiter[] = [];
      for (const key of keys) {
        const waiter = this.queues.get(key)?.[round];
        if (waiter) batch.push(waiter);
      }
      if (batch.length === 0) return;
      yield batch;
    }
  }

  /** Admits waiters while there is room (after a release, or when replicas were added), least recently served key first. */
  pump(): void {
    let admitted = false;
    while (this.size > 0 && this.running < this.limit()) {
      let chosen: string | undefined;
      let oldest = Infinity;
      for (const key of this.queues.keys()) {
        const served = this.lastServed.get(key) ?? -1;
        if (served < oldest) {
          oldest = served;
          chosen = key;
        }
      }
      const queue = this.queues.get(chosen!)!;
      const waiter = queue.shift()!;
      if (queue.length === 0) this.queues.delete(chosen!);
      this.size--;
      admitted = true;
      waiter.admit();
    }
    if (admitted) this.onQueueChange();
  }

  /** Takes a slot for `key`; the release records how long it was held. */
  private take(key: string): () => void {
    this.running++;
    this.lastServed.delete(key); // re-inserted last: the map stays in serving order for pruning
    this.lastServed.set(key, this.sequence++);
    if (this.lastServed.size > MAX_REMEMBERED_KEYS) {
      for (const k of this.lastServed.keys()) {
        if (this.lastServed.size <= MAX_REMEMBERED_KEYS) break;
        if (!this.queues.has(k)) this.lastServed.delete(k);
      }
    }
    const slot = { at: performance.now() };
    this.heldSince.add(slot);
    return once(() => {
      this.running--;
      this.heldSince.delete(slot);
      this.observeHold(performance.now() - slot.at);
      this.pump();
      this.reviewQueue();
    });
  }

  private observeHold(ms: number): void {
    this.holdEwma = this.holdEwma === undefined ? ms : this.holdEwma + HOLD_EWMA_ALPHA * (ms - this.holdEwma);
  }

  /**
   * A request that waited the whole timeout behind `ahead` others saw fewer
   * than ahead + 1 slots free up in that time: slots are held longer than
   * timeout x capacity / (ahead + 1) on average, and a wait that outlasted
   * the timeout is taken to last as long again (twice that). The estimate is
   * raised to it, so that the next arrivals are refused at once instead.
   */
  private learnFromTimeout(waiter: Waiter): void {
    const capacity = Math.max(1, this.limit() + this.coming());
    const bound = (2 * this.limits.timeoutMs * capacity) / (waiter.ahead + 1);
    this.holdEwma = Math.max(this.holdEwma ?? 0, bound);
  }

  private remove(waiter: Waiter, error: Error): void {
    const queue = this.queues.get(waiter.key);
    const index = queue ? queue.indexOf(waiter) : -1;
    if (queue && index >= 0) {
      queue.splice(index, 1);
      if (queue.length === 0) this.queues.delete(waiter.key);
      this.size--;
      this.onQueueChange();
    }
    waiter.fail(error);
  }
}
