/**
 * Admission to an endpoint's replicas: at most replicas x max_batch_size
 * requests run at once (through this gateway process); the rest wait in FIFO
 * order, up to a bounded time.
 */
import { once } from './once.js';

export class QueueTimeoutError extends Error {}
export class QueueAbortedError extends Error {}

interface Waiter {
  admit: () => void;
  fail: (error: Error) => void;
}

export class EndpointGate {
  private running = 0;
  private readonly waiting: Waiter[] = [];

  /** `limit` is read at each admission: the replica count can change while requests wait. */
  constructor(private readonly limit: () => number) {}

  get queued(): number {
    return this.waiting.length;
  }

  get inFlight(): number {
    return this.running;
  }

  /** Whether a request arriving now would wait (the slots are taken, or others already wait). */
  get busy(): boolean {
    return this.waiting.length > 0 || this.running >= this.limit();
  }

  /** Resolves with a release function once admitted. */
  acquire(timeoutMs: number, signal: AbortSignal): Promise<() => void> {
    const release = () => {
      this.running--;
      this.pump();
    };
    if (this.waiting.length === 0 && this.running < this.limit()) {
      this.running++;
      return Promise.resolve(once(release));
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          cleanup();
          this.running++;
          resolve(once(release));
        },
        fail: (error) => {
          cleanup();
          reject(error);
        },
      };
      const timer = setTimeout(() => this.remove(waiter, new QueueTimeoutError('queue wait exceeded')), timeoutMs);
      const onAbort = () => this.remove(waiter, new QueueAbortedError('client left'));
      signal.addEventListener('abort', onAbort, { once: true });
      const cleanup = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      };
      this.waiting.push(waiter);
    });
  }

  /** Admits waiters while there is room (after a release, or when replicas were added). */
  pump(): void {
    while (this.waiting.length > 0 && this.running < this.limit()) this.waiting.shift()!.admit();
  }

  private remove(waiter: Waiter, error: Error): void {
    const index = this.waiting.indexOf(waiter);
    if (index >= 0) this.waiting.splice(index, 1);
    waiter.fail(error);
  }
}
