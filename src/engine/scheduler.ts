/**
 * The pool of context sequences (one per concurrent generation, `maxBatchSize` in all) and the FIFO
 * of requests waiting for one. All sequences belong to one llama.cpp context, so whatever holds a
 * sequence decodes in the same batches as the others; the pool only decides who may generate.
 */

export type Lease<T> = {
  readonly item: T;
  /** Returns the item to the pool (idempotent); the oldest live waiter gets it next. */
  release(): void;
};

type Waiter<T> = {
  resolve(lease: Lease<T>): void;
  cleanup(): void;
};

export class QueueAbortedError extends Error {
  constructor() {
    super('The request left the queue before a sequence was free');
    this.name = 'QueueAbortedError';
  }
}

export class SequencePool<T> {
  private readonly free: T[];
  private readonly waiters: Waiter<T>[] = [];
  private leased = 0;
  private idleListeners: Array<() => void> = [];

  constructor(items: readonly T[]) {
    if (items.length === 0) throw new Error('SequencePool needs at least one item');
    this.free = [...items];
  }

  /** Items handed out now (sequences generating). */
  get active(): number {
    return this.leased;
  }

  /** Requests waiting for an item. */
  get queued(): number {
    return this.waiters.length;
  }

  /**
   * Resolves with a lease as soon as an item is free and every earlier waiter was served.
   * Rejects with {@link QueueAbortedError} (and leaves the queue) when `signal` aborts first.
   */
  acquire(signal?: AbortSignal): Promise<Lease<T>> {
    if (signal?.aborted) return Promise.reject(new QueueAbortedError());
    const item = this.waiters.length === 0 ? this.free.pop() : undefined;
    if (item !== undefined) return Promise.resolve(this.lease(item));
    return new Promise<Lease<T>>((resolve, reject) => {
      const onAbort = () => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        reject(new QueueAbortedError());
        this.notifyIfIdle();
      };
      const waiter: Waiter<T> = {
        resolve,
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Resolves when nothing is leased or queued. */
  whenIdle(): Promise<void> {
    if (this.leased === 0 && this.waiters.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleListeners.push(resolve));
  }

  private lease(item: T): Lease<T> {
    this.leased++;
    let released = false;
    return {
      item,
      release: () => {
        if (released) return;
        released = true;
        this.leased--;
        const waiter = this.waiters.shift();
        if (waiter != null) {
          waiter.cleanup();
          waiter.resolve(this.lease(item));
        } else {
          this.free.push(item);
        }
        this.notifyIfIdle();
      },
    };
  }

  private notifyIfIdle(): void {
    if (this.leased !== 0 || this.waiters.length !== 0) return;
    const listeners = this.idleListeners;
    this.idleListeners = [];
    for (const listener of listeners) listener();
  }
}
