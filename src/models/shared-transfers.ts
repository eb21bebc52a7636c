/**
 * Transfers shared within the process: callers that need the same file at the same time (two endpoints of one model)
 * download it once, and callers that need the same resolution of a repository ask the hub once (model-store.ts). The transfer runs under its own signal, not under the first caller's: each caller waits through
 * its own signal and may leave alone (its endpoint deleted) without failing the others; the transfer is cancelled
 * only when the last caller waiting for it has left.
 */
import type { DownloadProgress } from './blob-download.js';
import type { RetryNotice, RetryReporter } from './retry.js';

/** One caller waiting for a transfer. */
export interface Waiter {
  signal?: AbortSignal;
  onProgress?: (progress: DownloadProgress) => void;
  onRetry?: RetryReporter;
}

/** What the transfer itself runs with: its own signal, and reporters that tell every caller still waiting. */
export interface SharedRun {
  signal: AbortSignal;
  onProgress: (progress: DownloadProgress) => void;
  onRetry: (notice: RetryNotice) => Promise<void>;
}

interface Flight<T> {
  result: Promise<T>;
  controller: AbortController;
  waiters: Set<Waiter>;
  settled: boolean;
}

export class SharedTransfers<T> {
  private readonly flights = new Map<string, Flight<T>>();

  /** The result of `run` for `key`, started unless one is under way; the caller stops waiting when its signal aborts. */
  join(key: string, waiter: Waiter, run: (shared: SharedRun) => Promise<T>): Promise<T> {
    if (waiter.signal?.aborted) return Promise.reject(waiter.signal.reason as Error);
    const flight = this.flights.get(key) ?? this.start(key, run);
    flight.waiters.add(waiter);
    return new Promise<T>((resolve, reject) => {
      const signal = waiter.signal;
      const leave = () => {
        flight.waiters.delete(waiter);
        if (flight.waiters.size === 0 && !flight.settled) {
          // The last caller has gone: nobody wants the bytes any more. A caller that comes next starts a new transfer.
          if (this.flights.get(key) === flight) this.flights.delete(key);
          flight.controller.abort(signal!.reason);
        }
        reject(signal!.reason as Error);
      };
      signal?.addEventListener('abort', leave, { once: true });
      flight.result
        .finally(() => {
          signal?.removeEventListener('abort', leave);
          flight.waiters.delete(waiter);
        })
        .then(resolve, reject);
    });
  }

  private start(key: string, run: (shared: SharedRun) => Promise<T>): Flight<T> {
    const controller = new AbortController();
    const waiters = new Set<Waiter>();
    const result = run({
      signal: controller.signal,
      onProgress: (progress) => {
        for (const waiter of waiters) waiter.onProgress?.(progress);
      },
      // Each caller's reporter is told; one that fails does not keep the others from hearing.
      onRetry: async (notice) => {
        await Promise.allSettled([...waiters].map(async (waiter) => waiter.onRetry?.(notice)));
      },
    });
    const flight: Flight<T> = { result, controller, waiters, settled: false };
    void result
      .finally(() => {
        flight.settled = true;
        if (this.flights.get(key) === flight) this.flights.delete(key);
      })
      // Every caller still waiting is given the failure; a transfer that all have left has nobody to tell.
      .catch(() => {});
    this.flights.set(key, flight);
    return flight;
  }
}
