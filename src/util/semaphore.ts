/**
 * A counting semaphore whose waiters are served first come, first served: `permits` holders at
 * once, the rest queue in arrival order. A waiter whose signal aborts leaves the queue without
 * taking a permit. No timers, no polling: a release hands its permit straight to the oldest waiter.
 */

export type Permit = {
  /** Gives the permit back (idempotent); the oldest waiter, if any, gets it next. */
  release(): void;
};

export class SemaphoreAbortedError extends Error {
  constructor() {
    super('The wait for a permit was aborted');
    this.name = 'SemaphoreAbortedError';
  }
}

type Waiter = { grant(): void };

export class Semaphore {
  private held = 0;
  private readonly waiters: Waiter[] = [];

  constructor(readonly permits: number) {
    if (!Number.isInteger(permits) || permits < 1) throw new RangeError(`permits must be a positive integer (got ${permits})`);
  }

  /** Permits held now. */
  get active(): number {
    return this.held;
  }

  /** Callers waiting for a permit. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** A permit now when one is free and nobody waits, else undefined. */
  tryAcquire(): Permit | undefined {
    if (this.held >= this.permits || this.waiting > 0) return undefined;
    this.held++;
    return this.permit();
  }

  /**
   * Resolves with a permit once one is free and every earlier waiter was served. Rejects with
   * {@link SemaphoreAbortedError} when `signal` is aborted before (the waiter leaves the queue).
   */
  acquire(signal?: AbortSignal): Promise<Permit> {
    if (signal?.aborted) return Promise.reject(new SemaphoreAbortedError());
    const now = this.tryAcquire();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise<Permit>((resolve, reject) => {
      const onAbort = () => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        reject(new SemaphoreAbortedError());
      };
      const waiter: Waiter = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(this.permit());
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private permit(): Permit {
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        // The permit passes straight to the oldest waiter (`held` stays the same), or is freed.
        const waiter = this.waiters.shift();
        if (waiter !== undefined) waiter.grant();
        else this.held--;
      },
    };
  }
}
