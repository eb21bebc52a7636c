/** The errors of src/util/file-lock.ts: a lock not had in time, a lock lost while held. */
import type { LockHolder } from './lock-holder.js';

/** The lock could not be had within AcquireOptions.waitMs. */
export class LockTimeoutError extends Error {
  constructor(
    readonly path: string,
    readonly holder: LockHolder | undefined,
    readonly waitMs: number,
  ) {
    super(`${path}: held by another process (pid ${holder?.pid ?? 'unknown'}) for more than ${waitMs / 1000} s`);
  }
}

/** The reason ReleaseLock.lost aborts with. */
export class LockLostError extends Error {
  constructor(
    readonly path: string,
    why: string,
  ) {
    super(`${path}: this process lost the lock (${why})`);
  }
}
