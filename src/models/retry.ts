/**
 * Retries of hub and registry calls, as the hub's own tools retry them (`huggingface_hub`'s `http_backoff`):
 * 429, 5xx and failed connections are retried with exponential backoff and jitter, a `Retry-After` is honoured,
 * and the number of retries and their total time are bounded. A permanent answer (401, 403, 404, ...) is never
 * retried. The loop, its bounds and cancellation are p-retry's; the delay before each retry is computed here,
 * because it depends on the failed answer (Retry-After) and is reported before it is waited.
 */
import pRetry from 'p-retry';
import { setTimeout as sleep } from 'node:timers/promises';
import { ModelSourceError, type ModelSourceErrorCode } from './errors.js';

export interface RetryPolicy {
  /** Retries after the first attempt. @default 5 */
  retries: number;
  /** Delay before the first retry; each next one doubles it. @default 1000 */
  baseDelayMs: number;
  /** Largest backoff delay (a Retry-After may ask for more). @default 8000 */
  maxDelayMs: number;
  /**
   * Total time from the first attempt after which no retry starts; a Retry-After past it is not waited for. Where the
   * call reports progress (RetryOptions.progress), an attempt that made some starts a new budget. @default 60000
   */
  maxTimeMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { retries: 5, baseDelayMs: 1000, maxDelayMs: 8000, maxTimeMs: 60_000 };

/** What a retry report says: which call failed how, and when the next attempt starts. */
export interface RetryNotice {
  /** Who was called: `the hub` or `W&B`. */
  source: string;
  /** What was being done, e.g. `reading model info of org/repo` or `downloading model.gguf from org/repo`. */
  operation: string;
  /** The attempt that comes next (2 for the first retry). */
  attempt: number;
  /** Attempts at most, the first included; an attempt that makes progress moves it on (RetryOptions.progress). */
  maxAttempts: number;
  /** How long until that attempt. */
  delayMs: number;
  /** Why the last attempt failed (its message, safe to show). */
  reason: string;
  /** Set when the delay is the server's Retry-After. */
  retryAfterMs?: number;
}

export type RetryReporter = (notice: RetryNotice) => void | Promise<void>;

export interface RetryOptions {
  policy?: Partial<RetryPolicy>;
  onRetry?: RetryReporter;
  signal?: AbortSignal;
  /**
   * A count that grows as the attempts get somewhere (a download's bytes written). An attempt that moved it starts a
   * new budget, of time and of retries: the policy bounds how long a call may fail without getting anywhere, so a
   * download of hours that is cut now and then is resumed each time, not given up once its first minute has passed.
   */
  progress?: () => number;
}

/**
 * A failure worth another attempt: a 429 or 5xx answer, or a connection that failed or was cut. It carries the
 * ModelSourceError to report if no attempt succeeds, and the server's Retry-After.
 */
export class TransientError extends ModelSourceError {
  constructor(
    code: ModelSourceErrorCode,
    message: string,
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/** Statuses worth retrying, as `http_backoff` retries them (429, 500, 502, 503, 504), plus the other 5xx. */
export function isTransientStatus(status: number): boolean {
  return status === 429 || (status >= 500 && status <= 599);
}

/**
 * `Retry-After` in milliseconds: delta-seconds or an HTTP date. Undefined when absent or unreadable; a date in the
 * past is 0.
 */
export function retryAfterMs(answer: Response | Headers | undefined, now = Date.now()): number | undefined {
  const headers = answer instanceof Response ? answer.headers : answer;
  const raw = headers?.get('retry-after')?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Math.round(Number(raw) * 1000);
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Backoff with jitter: base x 2^(retry-1), capped, then scaled by a random factor in [0.5, 1.0]. */
export function backoffDelay(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.round(exponential * (0.5 + random() / 2));
}

export function retryPolicy(policy: Partial<RetryPolicy> = {}): RetryPolicy {
  return { ...DEFAULT_RETRY_POLICY, ...policy };
}

/**
 * Runs `attempt` until it succeeds, fails with anything but a TransientError, or the policy's bounds are reached (counted
 * from the first attempt, or from the last one that made progress); then the last error is thrown, its message saying
 * how many attempts were made. Each retry is reported through `onRetry` (awaited, its failures ignored) before its
 * delay is waited. Cancellation ends the wait at once.
 */
export async function withRetries<T>(
  source: string,
  operation: string,
  attempt: (attemptNumber: number) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const policy = retryPolicy(options.policy);
  const { signal, onRetry, progress } = options;
  // The current budget: when it started, and the attempt it started with.
  let budgetStart = performance.now();
  let budgetFirst = 1;
  let progressSeen = progress?.();
  let attempts = 0;
  try {
    return await pRetry(
      (n) => {
        attempts = n;
        return attempt(n);
      },
      {
        // The retries are counted here (a budget can start again); p-retry only loops while shouldRetry says so.
        retries: Number.POSITIVE_INFINITY,
        // The delay is waited in shouldRetry (it depends on the answer); p-retry itself waits nothing.
        minTimeout: 0,
        factor: 1,
        randomize: false,
        ...(signal ? { signal } : {}),
        shouldRetry: async ({ error, attemptNumber }) => {
          if (!(error instanceof TransientError) || signal?.aborted) return false;
          const now = performance.now();
          const seen = progress?.();
          if (seen !== progressSeen) [progressSeen, budgetStart, budgetFirst] = [seen, now, attemptNumber];
          const retry = attemptNumber - budgetFirst + 1; // of this budget
          if (retry > policy.retries) return false;
          const left = policy.maxTimeMs - (now - budgetStart);
          const delayMs = error.retryAfterMs ?? backoffDelay(retry, policy);
          if (delayMs > left) return false; // the server asks for more time than the budget has left
          try {
            await onRetry?.({
              source,
              operation,
              attempt: attemptNumber + 1,
              maxAttempts: budgetFirst + policy.retries,
              delayMs,
              reason: error.message,
              ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}),
            });
          } catch {
            // a report that cannot be written must not fail the call it reports on
          }
          if (delayMs > 0) await sleep(delayMs, undefined, signal ? { signal } : {});
          return true;
        },
      },
    );
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (error instanceof TransientError) {
      // Reported as a plain ModelSourceError: what failed, and that it was retried.
      const tries = attempts > 1 ? ` (gave up after ${attempts} attempts)` : '';
      throw new ModelSourceError(error.code, `${error.message.replace(/\.$/, '')}${tries}.`, { cause: error });
    }
    throw error;
  }
}

/**
 * Runs `work` under one signal: the caller's cancellation (its reason passes through), or, `deadlineMs` after the
 * start, the deadline's, whose reason is `late()`: the error to report. A resolution passes it to every call and
 * retry wait, so that the request in flight is aborted when the deadline passes.
 */
export async function withinDeadline<T>(
  signal: AbortSignal | undefined,
  deadlineMs: number,
  late: () => Error,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const within = new AbortController();
  const cancel = () => within.abort(signal?.reason);
  if (signal?.aborted) cancel();
  signal?.addEventListener('abort', cancel, { once: true });
  const deadline = setTimeout(() => within.abort(late()), deadlineMs);
  try {
    return await work(within.signal);
  } finally {
    clearTimeout(deadline);
    signal?.removeEventListener('abort', cancel);
  }
}
