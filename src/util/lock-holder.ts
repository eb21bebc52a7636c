/**
 * Who a lock file (src/util/file-lock.ts) names, and whether that holder is gone: the judgement a waiter makes before
 * it takes a lock over.
 *
 * A lock names its holder as `pid=<pid> host=<hostname> token=<random> start=<ticks> boot=<id> pidns=<inode>
 * lease=<random>`: the token is the process's (it tells this process from another that had its pid), the lease the
 * acquisition's (it tells one holding of this process from another: file-lock.ts releases and refreshes a lock only
 * when its whole text is the acquisition's).
 *
 * A holder is on this host only when its hostname, boot and pid namespace are all this process's (a field an earlier
 * format lacks is taken to match): two machines may share a hostname (containers given one with --hostname, Swarm
 * templates), and so may two containers of one machine whose pids are counted apart (pods with hostNetwork). A pid
 * means something in its own pid namespace only, so any other holder is judged as another host's: by its heartbeat,
 * never as gone merely because it is elsewhere.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/**
 * The heartbeat a waiter counts in: it believes an old mtime once it has watched a lock unchanged for two. A holder
 * refreshes its lock three times per heartbeat and takes it for lost after one without a refresh (file-lock.ts's
 * LOCK_REFRESH_MS and LOCK_LOST_AFTER_MS). A lock of another host not refreshed for LOCK_STALE_MS is stale.
 */
export const LOCK_HEARTBEAT_MS = 10_000;
export const LOCK_STALE_MS = 60_000;
/** A lock naming no holder this old is left over (a crash between an O_EXCL create and its write). */
export const ORPHAN_LOCK_MS = 30_000;

/** Who a lock file names. Fields a lock of an earlier format does not have are undefined. */
export interface LockHolder {
  pid: number | undefined;
  host: string | undefined;
  token: string | undefined;
  /** the process's start time, in clock ticks since boot (field 22 of /proc/<pid>/stat) */
  start: string | undefined;
  boot: string | undefined;
  /** the inode of the holder's pid namespace (Linux's /proc/self/ns/pid) */
  pidns: string | undefined;
  /** one acquisition's random value */
  lease: string | undefined;
}

/**
 * A lock as read, through one open file: its text (its identity: token and lease are random), its mtime and inode,
 * and the filesystem's clock at about the moment it was read (see isGone).
 */
export interface Snapshot {
  path: string;
  text: string;
  mtimeMs: number;
  ino: number;
  holder: LockHolder;
  fsNowMs: number;
}

const HOST = hostname();
/** This process among those that ever had its pid. */
export const TOKEN = randomHex(8);
const BOOT = readProc('/proc/sys/kernel/random/boot_id')?.trim();
const PIDNS = pidNamespace();
const START = startTime(process.pid);
/** A token of the earlier `<pid> <token>` format (the embedded PostgreSQL's lock). */
const LEGACY_TOKEN = /^[0-9a-f]{16}$/;
/** The leases of the locks this process holds or is creating: a lock naming this process with another lease is left over. */
export const liveLeases = new Set<string>();

function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

function readProc(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

function pidNamespace(): string | undefined {
  try {
    return /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1];
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

/** The text of a new lock of this process, with a lease of its own (added to liveLeases). */
export function newLockText(): { text: string; lease: string } {
  const lease = randomHex(8);
  liveLeases.add(lease);
  const fields = [`pid=${process.pid}`, `host=${HOST}`, `token=${TOKEN}`];
  if (START) fields.push(`start=${START}`);
  if (BOOT) fields.push(`boot=${BOOT}`);
  if (PIDNS) fields.push(`pidns=${PIDNS}`);
  return { text: `${[...fields, `lease=${lease}`].join(' ')}\n`, lease };
}

/** Reads who a lock names, in this format or an earlier one. */
export function parseLockHolder(text: string): LockHolder {
  const words = text.trim().split(/\s+/).filter(Boolean);
  const holder: LockHolder = {
    pid: undefined,
    host: undefined,
    token: undefined,
    start: undefined,
    boot: undefined,
    pidns: undefined,
    lease: undefined,
  };
  const pidOf = (value: string | undefined) => {
    const pid = Number(value);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  };
  if (words.some((word) => word.includes('='))) {
    const fields = new Map(words.map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]));
    for (const key of ['host', 'token', 'start', 'boot', 'pidns', 'lease'] as const) holder[key] = fields.get(key);
    holder.pid = pidOf(fields.get('pid'));
    return holder;
  }
  const [pid, second] = words;
  holder.pid = pidOf(pid);
  if (second === undefined) return holder;
  if (second !== HOST && LEGACY_TOKEN.test(second)) holder.token = second;
  else holder.host = second;
  return holder;
}

/** Whether the holder's pid can be probed here: its hostname, boot and pid namespace are this process's. */
function onThisHost(holder: LockHolder): boolean {
  const differs = (theirs: string | undefined, ours: string | undefined) => theirs !== undefined && ours !== undefined && theirs !== ours;
  return !differs(holder.host, HOST) && !differs(holder.boot, BOOT) && !differs(holder.pidns, PIDNS);
}

/**
 * Since when (this process's monotonic clock) each lock of a holder that cannot be probed has looked the same: its
 * text, mtime and inode. At most WATCHED_MAX locks, the least recently changed first out.
 */
const watched = new Map<string, { marker: string; since: number }>();
const WATCHED_MAX = 10_000;

/** How long this process has seen the lock unchanged (0 when it changed, or is seen for the first time). */
function unchangedForMs(seen: Snapshot): number {
  const marker = `${seen.ino}:${seen.mtimeMs}:${seen.text}`;
  const now = performance.now();
  const before = watched.get(seen.path);
  if (before?.marker === marker) return now - before.since;
  watched.delete(seen.path);
  watched.set(seen.path, { marker, since: now });
  if (watched.size > WATCHED_MAX) watched.delete(watched.keys().next().value!);
  return 0;
}

/**
 * A lock's age by the filesystem's clock is believed once this process has also watched it stay the same for this long
 * (two heartbeats missed): a holder may stamp its heartbeat with its own clock (a filesystem that takes the writer's
 * clock, FUSE or object storage; or an earlier release, which refreshed with utimes), and a clock that runs behind
 * makes a lock refreshed just now look older than LOCK_STALE_MS.
 */
const AGE_BELIEVED_AFTER_MS = 2 * LOCK_HEARTBEAT_MS;

/**
 * Whether the lock's holder has not refreshed it for `ms`: this process has watched it stay the same for that long on
 * its own monotonic clock, or for AGE_BELIEVED_AFTER_MS while its mtime is `ms` old by the filesystem's own clock
 * (`fsNowMs`: the mtime the filesystem gave a file this process has just written beside it, so that no host's clock
 * is compared with another's; NaN where none could be written, and then the watch alone decides).
 */
function unrefreshedFor(seen: Snapshot, ms: number): boolean {
  const watchedMs = unchangedForMs(seen);
  return watchedMs > ms || (watchedMs > AGE_BELIEVED_AFTER_MS && seen.fsNowMs - seen.mtimeMs > ms);
}

/** Whether the holder is judged by its pid (a process of this host), with no need of the filesystem's clock. */
export function probedByPid(holder: LockHolder): boolean {
  return holder.pid !== undefined && onThisHost(holder);
}

/** Whether the holder a lock names is gone (see the module's comment and file-lock.ts's). */
export function isGone(seen: Snapshot): boolean {
  const { holder } = seen;
  const { pid } = holder;
  if (pid === undefined) return unrefreshedFor(seen, ORPHAN_LOCK_MS);
  // Another host's process cannot be probed: its heartbeat says whether it lives.
  if (!probedByPid(holder)) return unrefreshedFor(seen, LOCK_STALE_MS);
  // This process writes its token into every lock it takes, and knows the leases it holds: a lock naming its pid
  // without them is another process's (a container's pid 1 before a restart), or one of its own it no longer holds.
  if (pid === process.pid) return holder.token !== TOKEN || (holder.lease !== undefined && !liveLeases.has(holder.lease));
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
