/**
 * The lock file every cross-process lock uses (src/util/file-lock.ts), on real files with real processes: who is
 * taken for a live holder and who for a gone one (a recycled pid is not the holder), waiting, cancellation, and a
 * stale lock raced for by processes of their own, which exactly one of them takes.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import {
  acquireLock,
  isStaleLock,
  lockHolder,
  LOCK_HEARTBEAT_MS,
  LOCK_STALE_MS,
  LockTimeoutError,
  ORPHAN_LOCK_MS,
  tryLock,
  withLock,
} from '../../src/util/file-lock.js';

const FILE_LOCK = fileURLToPath(new URL('../../src/util/file-lock.ts', import.meta.url));

let dir: string;
const children: ChildProcess[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'file-lock-'));
});
afterEach(async () => {
  vi.useRealTimers();
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

const ago = (ms: number) => new Date(Date.now() - ms);
/** The pid of a process that has exited. */
const deadPid = () => spawnSync(process.execPath, ['-e', '']).pid!;
/** A process of this host that stays alive until the test ends. */
function liveProcess(): ChildProcess {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120_000)'], { stdio: 'ignore' });
  children.push(child);
  return child;
}

describe('who holds a lock', () => {
  test('a live process of this host holds it; a pid that is gone does not, nor this process without its token', async () => {
    const lock = path.join(dir, 'x.lock');
    const live = liveProcess();
    await writeFile(lock, `pid=${live.pid} host=${hostname()} token=0123456789abcdef\n`);
    expect(await tryLock(lock)).toBeUndefined();
    expect(await isStaleLock(lock)).toBe(false);

    await writeFile(lock, `pid=${deadPid()} host=${hostname()} token=0123456789abcdef\n`);
    expect(await isStaleLock(lock)).toBe(true);
    // This process's pid, written by another process that had it (a container's pid 1 before a restart).
    await writeFile(lock, `pid=${process.pid} host=${hostname()} token=0123456789abcdef\n`);
    expect(await isStaleLock(lock)).toBe(true);
    const release = await tryLock(lock);
    expect(release).toBeDefined();
    expect(await lockHolder(lock)).toMatchObject({ pid: process.pid, host: hostname() });
    await release!();
    expect(existsSync(lock)).toBe(false);
  });

  test.skipIf(!existsSync('/proc/self/stat'))(
    "a live pid that another process has now (its start time is not the holder's) does not",
    async () => {
      const lock = path.join(dir, 'x.lock');
      const live = liveProcess();
      const stat = readFileSync(`/proc/${live.pid}/stat`, 'utf8');
      const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
      await writeFile(lock, `pid=${live.pid} host=${hostname()} token=0123456789abcdef start=${start}\n`);
      expect(await isStaleLock(lock)).toBe(false);
      await writeFile(lock, `pid=${live.pid} host=${hostname()} token=0123456789abcdef start=${Number(start) + 1}\n`);
      expect(await isStaleLock(lock)).toBe(true);
    },
  );

  test("another host's holder lives while its heartbeat is fresh; a lock naming no one, while it is young", async () => {
    const lock = path.join(dir, 'x.lock');
    // The time a waiter watches a lock is its monotonic clock (faked). An old mtime is believed once the lock has also
    // been seen unchanged for two heartbeats (a holder whose clock runs behind stamps a fresh lock in the past).
    vi.useFakeTimers({ toFake: ['performance'] });
    await writeFile(lock, `pid=1 host=some-other-pod token=0123456789abcdef\n`);
    expect(await tryLock(lock)).toBeUndefined();
    await utimes(lock, ago(LOCK_STALE_MS + 1000), ago(LOCK_STALE_MS + 1000));
    expect(await isStaleLock(lock)).toBe(false);
    vi.advanceTimersByTime(2 * LOCK_HEARTBEAT_MS + 1000);
    expect(await isStaleLock(lock)).toBe(true);

    await writeFile(lock, '');
    await utimes(lock, ago(ORPHAN_LOCK_MS + 1000), ago(ORPHAN_LOCK_MS + 1000));
    expect(await tryLock(lock)).toBeUndefined();
    vi.advanceTimersByTime(2 * LOCK_HEARTBEAT_MS + 1000);
    const release = await tryLock(lock);
    expect(release).toBeDefined();
    await release!();
  });

  test('locks of the earlier formats are read: <pid>, <pid> <host>, <pid> <token>', async () => {
    const lock = path.join(dir, 'x.lock');
    const live = liveProcess();
    for (const text of [`${live.pid}\n`, `${live.pid} ${hostname()}`, `${live.pid} 0123456789abcdef\n`]) {
      await writeFile(lock, text);
      expect(await isStaleLock(lock)).toBe(false);
    }
    for (const text of [`${deadPid()}\n`, `${deadPid()} ${hostname()}`, `${process.pid} 0123456789abcdef\n`]) {
      await writeFile(lock, text);
      expect(await isStaleLock(lock)).toBe(true);
    }
  });
});

describe('waiting for a lock', () => {
  test('waits while it is held, takes it once released, and only its own holder removes it', async () => {
    const lock = path.join(dir, 'x.lock');
    const order: string[] = [];
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const first = withLock(lock, async () => {
      order.push('first');
      await firstHeld;
    });
    await expect.poll(() => order).toEqual(['first']);
    const second = withLock(lock, async () => void order.push('second'), { pollMs: 10 });
    releaseFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(['first', 'second']);
    expect(existsSync(lock)).toBe(false);

    // A holder whose lock was taken over meanwhile leaves the new holder's in place.
    const release = await acquireLock(lock);
    await writeFile(lock, `pid=1 host=some-other-pod token=0123456789abcdef\n`);
    await release();
    expect(await readFile(lock, 'utf8')).toContain('host=some-other-pod');
  });

  test("a wait ends with the signal's reason, or past its limit with the holder named", async () => {
    const lock = path.join(dir, 'x.lock');
    const live = liveProcess();
    await writeFile(lock, `pid=${live.pid} host=${hostname()} token=0123456789abcdef\n`);
    const controller = new AbortController();
    const waiting = acquireLock(lock, { signal: controller.signal, pollMs: 10 });
    controller.abort(new Error('endpoint deleted'));
    await expect(waiting).rejects.toThrow('endpoint deleted');

    const error = await acquireLock(lock, { waitMs: 50, pollMs: 10 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect((error as LockTimeoutError).holder?.pid).toBe(live.pid);
    await expect(acquireLock(lock, { waitMs: 0, timeoutError: (holder) => new Error(`held by ${holder?.pid}`) })).rejects.toThrow(
      `held by ${live.pid}`,
    );
  });

  test('a takeover guard left by a waiter that died does not keep the stale lock from being taken over', async () => {
    const lock = path.join(dir, 'x.lock');
    const text = `pid=${deadPid()} host=${hostname()} token=0123456789abcdef\n`;
    await writeFile(lock, text);
    const guard = `${lock}.takeover-${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
    await writeFile(guard, `pid=${deadPid()} host=${hostname()} token=fedcba9876543210\n`);
    const release = await acquireLock(lock, { pollMs: 10 });
    expect(await lockHolder(lock)).toMatchObject({ pid: process.pid });
    await release();
    expect(await readdir(dir)).toEqual([]);
  });
});

/**
 * What each racing process runs: it looks at every lock once, and its monotonic clock is moved WATCHED_MS on (another
 * host's lock, however old its mtime, is stale only once also watched unchanged for two heartbeats); at "go", tries
 * every lock at once (lock i a few file operations late, so that the
 * steps of the two processes interleave differently from one lock to the next), says which it took, and holds them
 * until its input ends.
 */
const RACER = `
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
const { isStaleLock, tryLock } = await import(process.env.FILE_LOCK);
const [dir, count] = [process.env.DIR, Number(process.env.COUNT)];
for (let i = 0; i < count; i++) await isStaleLock(dir + '/' + i + '.lock');
const now = performance.now.bind(performance);
performance.now = () => now() + Number(process.env.WATCHED_MS);
const lines = createInterface({ input: process.stdin });
console.log('ready');
for await (const line of lines) if (line === 'go') break;
const took = await Promise.all(
  Array.from({ length: count }, async (_, i) => {
    for (let step = 0; step < i % 13; step++) await stat(dir);
    return tryLock(dir + '/' + i + '.lock');
  }),
);
console.log(JSON.stringify(took.flatMap((release, i) => (release ? [i] : []))));
process.stdin.resume();
await new Promise((resolve) => process.stdin.on('end', resolve));
for (const release of took) await release?.();
`;

test('processes racing for stale locks: exactly one takes each', async () => {
  const count = 200;
  const gone = deadPid();
  for (let i = 0; i < count; i++) {
    // Gone holders of both kinds: a pid of this host that exited, and another host's whose heartbeat stopped.
    const lock = path.join(dir, `${i}.lock`);
    if (i % 2 === 0) await writeFile(lock, `pid=${gone} host=${hostname()} token=0123456789abcdef\n`);
    else {
      await writeFile(lock, `pid=1 host=some-other-pod token=0123456789abcdef\n`);
      await utimes(lock, ago(LOCK_STALE_MS + 1000), ago(LOCK_STALE_MS + 1000));
    }
  }
  const racers = [0, 1].map(() => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', RACER], {
      env: { ...process.env, FILE_LOCK, DIR: dir, COUNT: String(count), WATCHED_MS: String(2 * LOCK_HEARTBEAT_MS + 1000) },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    return { child, next: async () => (await lines.next()).value as string };
  });
  expect(await Promise.all(racers.map((r) => r.next()))).toEqual(['ready', 'ready']);
  for (const racer of racers) racer.child.stdin!.write('go\n');
  const took = (await Promise.all(racers.map((r) => r.next()))).map((line) => JSON.parse(line) as number[]);

  const holders = Array.from({ length: count }, (_, i) => racers.filter((_, r) => took[r]!.includes(i)).map((r) => r.child.pid));
  expect(holders.map((pids) => pids.length)).toEqual(Array.from({ length: count }, () => 1));
  for (const [i, [pid]] of holders.entries()) expect((await lockHolder(path.join(dir, `${i}.lock`)))?.pid).toBe(pid);

  // Each releases what it took when it ends: nothing is left, guards included.
  await Promise.all(racers.map((r) => new Promise((resolve) => (r.child.once('exit', resolve), r.child.stdin!.end()))));
  expect(await readdir(dir)).toEqual([]);
}, 60_000);
