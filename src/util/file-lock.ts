/**
 * A lock file that processes take turns on: the embedded PostgreSQL's start lock (`${dataDir}.lock`), the model
 * cache's download locks (`tmp/<key>.lock`) and its volume lock (`tmp/volume.lock`), on a local disk or on a volume
 * that pods of several hosts share (a hostPath, or a claim many nodes mount, possibly over NFS).
 *
 * The file names its holder and the acquisition (src/util/lock-holder.ts), whole: written aside
 * (`<lock>.<pid>.<random>.new`), then hard-linked into place (a link fails when the name exists, so a reader never
 * sees a lock half written). A link that fails with EEXIST may still be this very attempt's: over NFS, a link whose
 * reply was lost is sent again and finds the name taken by the first; the lock is then ours when the file aside has
 * two links, or the lock's text is exactly the text this attempt wrote (it holds a random lease of its own).
 *
 * A waiter takes over a lock whose holder is gone:
 *   - a holder on this host (its hostname, boot and pid namespace are this process's) is gone when its pid is
 *     (signal 0), or when the pid now belongs to another process: this process's own pid under another token, or
 *     under a lease it does not hold (a release whose removal failed), or another pid whose start time (Linux's
 *     /proc) is not the holder's. A restarted container's previous run had a pid namespace of its own: its lock is
 *     another host's (a lock of an earlier format, without the namespace, naming this process's pid under another
 *     token is gone: a container's main process is pid 1 in every container);
 *   - any other holder is gone once its lock has not been refreshed for LOCK_STALE_MS. A holder refreshes it every
 *     LOCK_REFRESH_MS by writing its text again in place. A waiter watches the lock stay the same on its own
 *     monotonic clock: for LOCK_STALE_MS, or for 2 × LOCK_HEARTBEAT_MS while its mtime is LOCK_STALE_MS old by the
 *     filesystem's clock (the mtime the filesystem gave a file the waiter has just written there, never the waiter's
 *     own clock: hosts' clocks differ). The mtime alone is not believed: a filesystem that stamps a write with the
 *     writer's clock (FUSE, object storage), or a holder of an earlier release (it refreshed with utimes), stamps a
 *     lock refreshed just now in the past when the holder's clock runs behind. Where no file can be written beside
 *     the lock (a read-only volume, a full disk), the watch alone decides;
 *   - a lock naming no holder (an O_EXCL lock of a filesystem without hard links, not written yet; or garbage) is
 *     gone once it has not changed for ORPHAN_LOCK_MS, by the same rule.
 * Locks written before this format (`<pid>`, `<pid> <host>`, `<pid> <16 hex token>`) are read too.
 *
 * A holder releases its lock, and refreshes it, only while the lock's whole text is its acquisition's: a lock taken
 * over meanwhile, and taken again since by this same process, is the later acquisition's. A holder is told it lost
 * its lock (ReleaseLock.lost aborts) when a heartbeat finds the lock gone or another's, or none has succeeded for
 * LOCK_LOST_AFTER_MS (ENOSPC, EIO, an NFS close that fails, a hang): before any waiter of another host may take it
 * over, what it does under the lock (a download appending to a partial file) is stopped.
 *
 * Finding a lock stale and removing it are two steps: two waiters that both found it stale would otherwise both
 * remove it, the second removing the lock the first had just made, and both would hold it. So a stale lock is
 * removed by one waiter at a time, holding a guard named after the very lock it found stale (`<lock>.takeover-<hash
 * of its text>`, taken the same way), after reading the lock again and finding the same file, still stale. A guard is
 * held for milliseconds; one whose holder died then is taken over by the same rule, one level down.
 *
 * A process killed at the wrong moment leaves its file aside, or a guard, behind. A process that takes a lock sweeps
 * its directory (once per LOCK_STALE_MS): a file aside whose writer is gone or that is older than LOCK_STALE_MS (it
 * lives for milliseconds; a writer that stalled longer than that finds it gone and tries again), and a guard whose
 * holder is gone (removed under a guard of its own, as above), are removed; files that do not name a holder in this
 * format are left alone.
 *
 * Why not a library: proper-lockfile (a directory, its mtime refreshed) and lockfile (O_EXCL, an age) judge a lock
 * by its age alone: a holder that is gone keeps every waiter out until the lock ages (seconds to minutes), and one
 * that stalls past the age (a disk that hangs) loses its lock to a waiter while it still runs. Neither knows pids.
 */
import { createHash, randomBytes } from 'node:crypto';
import { link, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockLostError, LockTimeoutError } from './lock-errors.js';
import {
  isGone,
  liveLeases,
  LOCK_HEARTBEAT_MS,
  LOCK_STALE_MS,
  newLockText,
  parseLockHolder,
  probedByPid,
  type LockHolder,
  type Snapshot,
} from './lock-holder.js';
import { refresh } from './lock-refresh.js';

export { LOCK_HEARTBEAT_MS, LOCK_STALE_MS, ORPHAN_LOCK_MS, parseLockHolder, type LockHolder } from './lock-holder.js';
export { LockLostError, LockTimeoutError } from './lock-errors.js';

/** How often a waiter tries again, by default. */
export const LOCK_POLL_MS = 200;

export interface AcquireOptions {
  /** Ends the wait: the signal's reason is thrown. */
  signal?: AbortSignal;
  /** @default LOCK_POLL_MS */
  pollMs?: number;
  /** Gives up after waiting this long (LockTimeoutError, or `timeoutError`'s); default: waits while the holder lives. */
  waitMs?: number;
  timeoutError?: (holder: LockHolder | undefined) => Error;
}

/**
 * A holder gives its lock up once no refresh has succeeded for this long since the last one that did began (its write
 * landed after that; an acquisition's, before its text was written). A waiter of another host takes the lock over two
 * heartbeats at the soonest after it last saw it change (lock-holder.ts): a heartbeat to spare, for late timers and for
 * the work under the lock to stop. Each counts on its own monotonic clock, which no skew between hosts moves (a clock
 * behind makes mtimes old, which shortens a waiter's watch to those two heartbeats, no less). A count of heartbeats
 * that failed would not do: two failed ones ended as a waiter's watch did, and one that hung, a heartbeat later.
 */
export const LOCK_LOST_AFTER_MS = LOCK_HEARTBEAT_MS;
/** How often a holder refreshes its lock: one that fails is made up for by the next, in time. */
export const LOCK_REFRESH_MS = Math.floor(LOCK_LOST_AFTER_MS / 3);

/**
 * Releases the lock (removes it, when it still names this holder). `lost` aborts, with a LockLostError, when the
 * holder may no longer have it (see the module's comment).
 */
export interface ReleaseLock {
  (): Promise<void>;
  readonly lost: AbortSignal;
}

/** Errors of a filesystem that has no hard links (then the lock is created with O_EXCL and written). */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);
/** Nested takeovers of guards whose holders died, at most: each needs a process killed within milliseconds. */
const MAX_GUARD_DEPTH = 4;
/** The files a lock leaves beside itself: its text written aside, and takeover guards. */
const LEFTOVER = /\.(?:\d+\.[0-9a-f]{12}\.new|takeover-[0-9a-f]{16})$/;
/** When (monotonic) this process last swept each directory. */
const swept = new Map<string, number>();

/** One try at creating a lock: its text, written whole to a file aside, and the filesystem's clock as it wrote it. */
export interface Attempt {
  aside: string;
  text: string;
  lease: string;
  fsNowMs: number;
}

/** Writes a new lock's text aside (`<lock>.<pid>.<random>.new`); exported for the tests. */
export async function writeAttempt(path: string): Promise<Attempt> {
  const { text, lease } = newLockText();
  const aside = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.new`;
  try {
    await writeFile(aside, text, { flag: 'wx' });
    return { aside, text, lease, fsNowMs: (await stat(aside)).mtimeMs };
  } catch (error) {
    liveLeases.delete(lease);
    await rm(aside, { force: true });
    throw error;
  }
}

/** Puts the attempt's lock in place; false when another holder's is there. Exported for the tests. */
export async function placeAttempt(path: string, attempt: Attempt): Promise<boolean> {
  let placed = false;
  try {
    await link(attempt.aside, path);
    placed = true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    // A link applied whose reply was lost (NFS) is retried, and finds the name taken: by this attempt.
    if (code === 'EEXIST') placed = await isAttempts(path, attempt);
    // ENOENT: the file aside was swept as left over (this process stalled longer than LOCK_STALE_MS); try again.
    else if (NO_LINKS.has(code)) placed = await createExclusive(path, attempt.text);
    else if (code !== 'ENOENT') throw error;
  } finally {
    if (!placed) liveLeases.delete(attempt.lease);
    await rm(attempt.aside, { force: true });
  }
  return placed;
}

/** Whether the lock at `path` is the attempt's own: its file aside has two links, or its text is the attempt's. */
async function isAttempts(path: string, attempt: Attempt): Promise<boolean> {
  if ((await stat(attempt.aside).catch(() => undefined))?.nlink === 2) return true;
  return (await readFile(path, 'utf8').catch(() => undefined)) === attempt.text;
}

/**
 * The lock created with O_EXCL, then written: for filesystems without hard links. A lock whose holder could not be
 * written (the disk is full) is removed rather than left nameless, which would hold every waiter for ORPHAN_LOCK_MS.
 */
async function createExclusive(path: string, text: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    await handle.writeFile(text);
    await handle.close();
    return true;
  } catch (error) {
    await handle.close().catch(() => {});
    await rm(path, { force: true });
    throw error;
  }
}

/** The lock at `path` as read through one open file (its text and mtime are one file's); undefined when there is none. */
async function readLock(path: string, fsNowMs: number): Promise<Snapshot | undefined> {
  const handle = await open(path, 'r').catch(() => undefined);
  if (!handle) return undefined;
  try {
    const text = await handle.readFile('utf8');
    const { mtimeMs, ino } = await handle.stat();
    return { path, text, mtimeMs, ino, holder: parseLockHolder(text), fsNowMs };
  } catch {
    return undefined;
  } finally {
    await handle.close().catch(() => {});
  }
}

/**
 * The filesystem's clock beside `path`: the mtime of a file written there; NaN where none can be (a read-only volume,
 * a full disk), and then a lock's age is not judged at all (this host's clock is not the filesystem's).
 */
async function fsClock(path: string): Promise<number> {
  try {
    const attempt = await writeAttempt(path);
    liveLeases.delete(attempt.lease);
    await rm(attempt.aside, { force: true });
    return attempt.fsNowMs;
  } catch {
    return Number.NaN;
  }
}

/** The lock at `path` judged (see the module's comment); undefined when there is none. */
async function judge(path: string): Promise<boolean | undefined> {
  const seen = await readLock(path, Number.NaN);
  if (seen === undefined) return undefined;
  // A holder of this host is judged by its pid: no file is written to read the filesystem's clock.
  if (!probedByPid(seen.holder)) seen.fsNowMs = await fsClock(path);
  return isGone(seen);
}

/** Who holds the lock at `path`; undefined when there is none. */
export async function lockHolder(path: string): Promise<LockHolder | undefined> {
  return (await readLock(path, Number.NaN))?.holder;
}

/** Whether the lock at `path` was left by a holder that is gone (false when it is held, or there is none). */
export async function isStaleLock(path: string): Promise<boolean> {
  return (await judge(path)) === true;
}

/** Whether a live holder has the lock at `path`. */
export async function isLockHeld(path: string): Promise<boolean> {
  return (await judge(path)) === false;
}

/**
 * Removes the lock at `path` if it still is the one `seen` found stale; false when another waiter is at it, or it
 * changed (see the module's comment).
 */
async function removeStale(path: string, seen: Snapshot, depth = 0): Promise<boolean> {
  const guard = `${path}.takeover-${createHash('sha256').update(seen.text).digest('hex').slice(0, 16)}`;
  const attempt = await writeAttempt(guard);
  if (!(await placeAttempt(guard, attempt))) {
    const other = await readLock(guard, attempt.fsNowMs);
    if (other !== undefined && depth < MAX_GUARD_DEPTH && isGone(other)) await removeStale(guard, other, depth + 1);
    return false;
  }
  try {
    const now = await readLock(path, attempt.fsNowMs);
    if (now === undefined || now.text !== seen.text || now.ino !== seen.ino || !isGone(now)) return false;
    await rm(path, { force: true });
    return true;
  } finally {
    await rm(guard, { force: true });
    liveLeases.delete(attempt.lease);
  }
}

/** Removes the files aside and guards that holders gone left in `dir` (see the module's comment). */
async function sweep(dir: string, fsNowMs: number): Promise<void> {
  const last = swept.get(dir);
  if (last !== undefined && performance.now() - last < LOCK_STALE_MS) return;
  swept.delete(dir);
  swept.set(dir, performance.now());
  if (swept.size > 1000) swept.delete(swept.keys().next().value!);
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!LEFTOVER.test(name)) continue;
    const file = join(dir, name);
    const seen = await readLock(file, fsNowMs);
    if (seen?.holder.token === undefined || seen.holder.lease === undefined) continue;
    try {
      if (!name.endsWith('.new')) {
        if (isGone(seen)) await removeStale(file, seen);
      } else if (isGone(seen) || fsNowMs - seen.mtimeMs > LOCK_STALE_MS) await rm(file, { force: true });
    } catch {
      // The next lock taken here sweeps again.
    }
  }
}

/** This process holds `path` under `attempt`, written from `began` on: it is refreshed until released, or lost. */
function holding(path: string, { text, lease }: Attempt, began: number): ReleaseLock {
  const lost = new AbortController();
  let [beating, released] = [false, false];
  let deadline: ReturnType<typeof setTimeout> | undefined;
  const lose = (why: string) => {
    clearInterval(heartbeat);
    clearTimeout(deadline);
    if (!released) lost.abort(new LockLostError(path, why));
  };
  // The lock is ours until LOCK_LOST_AFTER_MS after `since`, when the last write that landed began.
  const holdUntil = (since: number) => {
    clearTimeout(deadline);
    const why = `no heartbeat succeeded for ${LOCK_LOST_AFTER_MS / 1000} s: it may be taken over`;
    deadline = setTimeout(() => lose(why), Math.max(0, since + LOCK_LOST_AFTER_MS - performance.now()));
    deadline.unref();
  };
  const heartbeat = setInterval(() => {
    if (beating) return; // a refresh still in flight hangs: the deadline decides
    beating = true;
    const since = performance.now();
    void refresh(path, text)
      .then((result) => {
        if (released || lost.signal.aborted) return;
        if (result === 'refreshed') holdUntil(since);
        else if (result === 'lost') lose('it was taken over');
      })
      .finally(() => (beating = false));
  }, LOCK_REFRESH_MS);
  heartbeat.unref();
  holdUntil(began);
  const release = async () => {
    released = true;
    clearInterval(heartbeat);
    clearTimeout(deadline);
    try {
      // A lock taken over meanwhile (its heartbeat failed for a minute) is no longer this acquisition's to remove.
      if ((await readFile(path, 'utf8').catch(() => undefined)) === text) await rm(path, { force: true });
    } finally {
      // Even when the removal failed: the lock left behind is then no live acquisition's, and is taken over.
      liveLeases.delete(lease);
    }
  };
  return Object.assign(release, { lost: lost.signal });
}

/**
 * One try: takes the lock when it is free or its holder is gone; undefined when a live holder has it (or another
 * waiter is taking it over).
 */
export async function tryLock(path: string): Promise<ReleaseLock | undefined> {
  // A lock released, or removed as stale, is tried again at once: a few times, as others may be at it too.
  for (let tries = 0; tries < 3; tries++) {
    const began = performance.now();
    const attempt = await writeAttempt(path);
    if (await placeAttempt(path, attempt)) {
      const release = holding(path, attempt, began);
      await sweep(dirname(path), attempt.fsNowMs);
      return release;
    }
    const seen = await readLock(path, attempt.fsNowMs);
    if (seen !== undefined && (!isGone(seen) || !(await removeStale(path, seen)))) return undefined;
  }
  return undefined;
}

/** Takes the lock at `path`, waiting while a live holder has it. */
export async function acquireLock(path: string, options: AcquireOptions = {}): Promise<ReleaseLock> {
  const { signal, pollMs = LOCK_POLL_MS, waitMs } = options;
  const started = performance.now();
  for (;;) {
    if (signal?.aborted) throw signal.reason;
    const release = await tryLock(path);
    if (release) return release;
    if (waitMs !== undefined && performance.now() - started > waitMs) {
      const holder = await lockHolder(path);
      throw options.timeoutError?.(holder) ?? new LockTimeoutError(path, holder, waitMs);
    }
    try {
      await sleep(pollMs, undefined, signal ? { signal } : {});
    } catch (error) {
      throw signal?.aborted ? signal.reason : error;
    }
  }
}

/** Runs `fn` holding the lock at `path`. */
export async function withLock<T>(path: string, fn: () => Promise<T>, options: AcquireOptions = {}): Promise<T> {
  const release = await acquireLock(path, options);
  try {
    return await fn();
  } finally {
    await release();
  }
}
