/**
 * A lock file that processes take turns on: the embedded PostgreSQL's start lock (`${dataDir}.lock`), the model
 * cache's download locks (`tmp/<key>.lock`) and its volume lock (`tmp/volume.lock`), on a local disk or on a volume
 * that pods of several hosts share.
 *
 * The file names its holder, whole (written aside, then hard-linked into place: a link fails when the name exists, so
 * a reader never sees a lock half written), as `pid=<pid> host=<hostname> token=<random> start=<ticks> boot=<id>`.
 * A waiter takes over a lock whose holder is gone:
 *   - a holder on this host is gone when its pid is (signal 0), or when the pid now belongs to another process: this
 *     process's own pid under another token (a container's main process is pid 1 in every container, so a lock left
 *     by a killed container names the next one's pid), or another pid whose start time (Linux's /proc) or boot is not
 *     the holder's;
 *   - a holder on another host (another pod, whose pid namespace is not ours) is gone once the lock's mtime, which a
 *     holder refreshes every LOCK_HEARTBEAT_MS, is older than LOCK_STALE_MS;
 *   - a lock naming no holder (an O_EXCL lock of a filesystem without hard links, not written yet; or garbage) is
 *     gone once its mtime is older than ORPHAN_LOCK_MS.
 * Locks written before this format (`<pid>`, `<pid> <host>`, `<pid> <16 hex token>`) are read too.
 *
 * Finding a lock stale and removing it are two steps: two waiters that both found it stale would otherwise both
 * remove it, the second removing the lock the first had just made, and both would hold it. So a stale lock is
 * removed by one waiter at a time, holding a guard named after the very lock it found stale (`<lock>.takeover-<hash
 * of its text>`, taken the same way), after reading the lock again and finding the same text, still stale. A guard is
 * held for milliseconds; one whose holder died then is taken over by the same rule, one level down.
 *
 * Why not a library: proper-lockfile (a directory, its mtime refreshed) and lockfile (O_EXCL, an age) judge a lock
 * by its age alone: a holder that is gone keeps every waiter out until the lock ages (seconds to minutes), and one
 * that stalls past the age (a disk that hangs) loses its lock to a waiter while it still runs. Neither knows pids.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, open, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/** How often a holder refreshes its lock's mtime; a lock of another host older than LOCK_STALE_MS is stale. */
export const LOCK_HEARTBEAT_MS = 10_000;
export const LOCK_STALE_MS = 60_000;
/** A lock naming no holder this old is left over (a crash between an O_EXCL create and its write). */
export const ORPHAN_LOCK_MS = 30_000;
/** How often a waiter tries again, by default. */
export const LOCK_POLL_MS = 200;

/** Who a lock file names. Fields a lock of an earlier format does not have are undefined. */
export interface LockHolder {
  pid: number | undefined;
  host: string | undefined;
  token: string | undefined;
  /** the process's start time, in clock ticks since boot (field 22 of /proc/<pid>/stat) */
  start: string | undefined;
  boot: string | undefined;
}

/** A lock as read: its text (its identity: a token is random) and mtime. */
interface Snapshot {
  text: string;
  mtimeMs: number;
  holder: LockHolder;
}

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

export interface AcquireOptions {
  /** Ends the wait: the signal's reason is thrown. */
  signal?: AbortSignal;
  /** @default LOCK_POLL_MS */
  pollMs?: number;
  /** Gives up after waiting this long (LockTimeoutError, or `timeoutError`'s); default: waits while the holder lives. */
  waitMs?: number;
  timeoutError?: (holder: LockHolder | undefined) => Error;
}

/** Releases the lock (removes it, when it still names this holder). */
export type ReleaseLock = () => Promise<void>;

const HOST = hostname();
/** This process among those that ever had its pid. */
const TOKEN = randomBytes(8).toString('hex');
const BOOT = readProc('/proc/sys/kernel/random/boot_id')?.trim();
const START = startTime(process.pid);
const OWN_TEXT =
  [`pid=${process.pid}`, `host=${HOST}`, `token=${TOKEN}`, START ? `start=${START}` : '', BOOT ? `boot=${BOOT}` : '']
    .filter(Boolean)
    .join(' ') + '\n';
/** A token of the earlier `<pid> <token>` format (the embedded PostgreSQL's lock). */
const LEGACY_TOKEN = /^[0-9a-f]{16}$/;
/** Errors of a filesystem that has no hard links (then the lock is created with O_EXCL and written). */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);
/** Nested takeovers of guards whose holders died, at most: each needs a process killed within milliseconds. */
const MAX_GUARD_DEPTH = 4;

function readProc(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** A process's start time (Linux), which a recycled pid does not share; undefined where it cannot be read. */
function startTime(pid: number): string | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  // The command name, in parentheses, may hold spaces: the fields counted from after it, state being field 3.
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields?.[22 - 3] || undefined;
}

/** Reads who a lock names, in this format or an earlier one. */
export function parseLockHolder(text: string): LockHolder {
  const words = text.trim().split(/\s+/).filter(Boolean);
  const holder: LockHolder = { pid: undefined, host: undefined, token: undefined, start: undefined, boot: undefined };
  const pidOf = (value: string | undefined) => {
    const pid = Number(value);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  };
  if (words.some((word) => word.includes('='))) {
    const fields = new Map(words.map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]));
    return {
      pid: pidOf(fields.get('pid')),
      host: fields.get('host'),
      token: fields.get('token'),
      start: fields.get('start'),
      boot: fields.get('boot'),
    };
  }
  const [pid, second] = words;
  holder.pid = pidOf(pid);
  if (second === undefined) return holder;
  if (second !== HOST && LEGACY_TOKEN.test(second)) holder.token = second;
  else holder.host = second;
  return holder;
}

/** Whether the holder a lock names is gone (`mtimeMs`: the lock's, for holders that cannot be probed). */
function isGone({ holder, mtimeMs }: Snapshot, now: number): boolean {
  const { pid } = holder;
  if (pid === undefined) return now - mtimeMs > ORPHAN_LOCK_MS;
  // Another host's process cannot be probed: its heartbeat says whether it lives.
  if (holder.host !== undefined && holder.host !== HOST) return now - mtimeMs > LOCK_STALE_MS;
  if (holder.boot !== undefined && BOOT !== undefined && holder.boot !== BOOT) return true;
  // This process writes its token into every lock it takes: a lock naming its pid without it is another process's.
  if (pid === process.pid) return holder.token !== TOKEN;
  try {
    process.kill(pid, 0); // signal 0 only probes for existence
  } catch (error) {
    // EPERM: it runs, as another user.
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return true;
  }
  if (holder.start === undefined) return false;
  const start = startTime(pid);
  return start !== undefined && start !== holder.start;
}

async function readLock(path: string): Promise<Snapshot | undefined> {
  const [text, info] = await Promise.all([readFile(path, 'utf8').catch(() => undefined), stat(path).catch(() => undefined)]);
  if (text === undefined || info === undefined) return undefined;
  return { text, mtimeMs: info.mtimeMs, holder: parseLockHolder(text) };
}

/** Who holds the lock at `path`; undefined when there is none. */
export async function lockHolder(path: string): Promise<LockHolder | undefined> {
  return (await readLock(path))?.holder;
}

/** Whether the lock at `path` was left by a holder that is gone (false when it is held, or there is none). */
export async function isStaleLock(path: string, now = Date.now()): Promise<boolean> {
  const seen = await readLock(path);
  return seen !== undefined && isGone(seen, now);
}

/** Whether a live holder has the lock at `path`. */
export async function isLockHeld(path: string, now = Date.now()): Promise<boolean> {
  const seen = await readLock(path);
  return seen !== undefined && !isGone(seen, now);
}

/** Creates `path` naming this process, whole; false when it exists. */
async function createLock(path: string): Promise<boolean> {
  const aside = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.new`;
  try {
    await writeFile(aside, OWN_TEXT, { flag: 'wx' });
    await link(aside, path);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (code === 'EEXIST') return false;
    if (NO_LINKS.has(code)) return createExclusive(path);
    throw error;
  } finally {
    await rm(aside, { force: true });
  }
}

/**
 * The lock created with O_EXCL, then written: for filesystems without hard links. A lock whose holder could not be
 * written (the disk is full) is removed rather than left nameless, which would hold every waiter for ORPHAN_LOCK_MS.
 */
async function createExclusive(path: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    await handle.writeFile(OWN_TEXT);
    await handle.close();
    return true;
  } catch (error) {
    await handle.close().catch(() => {});
    await rm(path, { force: true });
    throw error;
  }
}

/**
 * Removes the lock at `path` if it still is the one `seen` found stale; false when another waiter is at it, or it
 * changed (see the module's comment).
 */
async function removeStale(path: string, seen: Snapshot, depth = 0): Promise<boolean> {
  const guard = `${path}.takeover-${createHash('sha256').update(seen.text).digest('hex').slice(0, 16)}`;
  if (!(await createLock(guard))) {
    const other = await readLock(guard);
    if (other !== undefined && depth < MAX_GUARD_DEPTH && isGone(other, Date.now())) await removeStale(guard, other, depth + 1);
    return false;
  }
  try {
    const now = await readLock(path);
    if (now === undefined || now.text !== seen.text || !isGone(now, Date.now())) return false;
    await rm(path, { force: true });
    return true;
  } finally {
    await rm(guard, { force: true });
  }
}

/** This process now holds `path`: its mtime is refreshed until it is released. */
function holding(path: string): ReleaseLock {
  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(path, now, now).catch(() => {});
  }, LOCK_HEARTBEAT_MS);
  heartbeat.unref();
  return async () => {
    clearInterval(heartbeat);
    // A lock taken over meanwhile (its heartbeat failed for a minute) is no longer this holder's to remove.
    if ((await readFile(path, 'utf8').catch(() => undefined)) === OWN_TEXT) await rm(path, { force: true });
  };
}

/**
 * One try: takes the lock when it is free or its holder is gone; undefined when a live holder has it (or another
 * waiter is taking it over).
 */
export async function tryLock(path: string): Promise<ReleaseLock | undefined> {
  // A lock released, or removed as stale, is tried again at once: a few times, as others may be at it too.
  for (let tries = 0; tries < 3; tries++) {
    if (await createLock(path)) return holding(path);
    const seen = await readLock(path);
    if (seen !== undefined && (!isGone(seen, Date.now()) || !(await removeStale(path, seen)))) return undefined;
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
