/**
 * The lock file (src/util/file-lock.ts) on a volume that hosts share: a link whose reply NFS lost, a release that
 * comes after the lock was taken over and taken again, hosts whose clocks differ, hosts that share a hostname, and
 * the files a process killed mid-way leaves behind. Other hosts' locks are written with crafted contents and mtimes;
 * a clock that is off is this process's Date (faked), and the time a waiter watches is its monotonic clock (faked).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, watch } from 'node:fs';
import { link, mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import {
  acquireLock,
  isLockHeld,
  isStaleLock,
  LOCK_HEARTBEAT_MS,
  LOCK_POLL_MS,
  LOCK_STALE_MS,
  lockHolder,
  placeAttempt,
  tryLock,
  writeAttempt,
} from '../../src/util/file-lock.js';

let dir: string;
const children: ChildProcess[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'file-lock-shared-'));
});
afterEach(async () => {
  vi.useRealTimers();
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

const ago = (ms: number) => new Date(Date.now() - ms);
const deadPid = () => spawnSync(process.execPath, ['-e', '']).pid!;
function liveProcess(): ChildProcess {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120_000)'], { stdio: 'ignore' });
  children.push(child);
  return child;
}
const BOOT = existsSync('/proc/sys/kernel/random/boot_id') ? readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() : undefined;
const REMOTE = `pid=7 host=other-node token=0123456789abcdef lease=00112233445566ff\n`;

describe('a link whose reply was lost', () => {
  test('a link already made by this very attempt is taken as placed, not as another holder', async () => {
    const lock = path.join(dir, 'x.lock');
    const attempt = await writeAttempt(lock);
    // NFS applied the link, lost its reply, and the client's retry finds the name taken.
    await link(attempt.aside, lock);
    expect(await placeAttempt(lock, attempt)).toBe(true);
    expect(await readFile(lock, 'utf8')).toBe(attempt.text);
    expect(await readdir(dir)).toEqual(['x.lock']);
  });

  test('a lock naming this process under an acquisition it no longer holds is taken over', async () => {
    const lock = path.join(dir, 'x.lock');
    const release = await acquireLock(lock);
    const text = await readFile(lock, 'utf8');
    await release();
    // As if its removal had failed: the lock names this process, which would otherwise wait on itself for ever.
    await writeFile(lock, text);
    const again = await tryLock(lock);
    expect(again).toBeDefined();
    expect(await readFile(lock, 'utf8')).not.toBe(text);
    await again!();
  });
});

test('a release after the lock was taken over and taken again by this process leaves the later lock', async () => {
  const lock = path.join(dir, 'x.lock');
  const first = (await tryLock(lock))!;
  await rm(lock); // taken over by another host meanwhile, and released by it
  const second = (await tryLock(lock))!;
  const text = await readFile(lock, 'utf8');
  await first();
  expect(await readFile(lock, 'utf8')).toBe(text);
  await second();
  expect(existsSync(lock)).toBe(false);
});

describe("hosts' clocks", () => {
  test("a waiter whose clock runs ahead does not take a live holder's lock", async () => {
    const lock = path.join(dir, 'x.lock');
    await writeFile(lock, REMOTE); // just refreshed: the filesystem stamped it now
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + LOCK_STALE_MS + 10_000);
    expect(await tryLock(lock)).toBeUndefined();
    expect(await readFile(lock, 'utf8')).toBe(REMOTE);
  });

  test("a holder whose clock is off refreshes its lock with the filesystem's clock", async () => {
    const lock = path.join(dir, 'x.lock');
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'] });
    vi.setSystemTime(Date.now() - LOCK_STALE_MS - 10_000);
    const release = (await tryLock(lock))!;
    const text = await readFile(lock, 'utf8');
    const old = ago(3_600_000); // the fake clock's hour ago: the real one's hour and a bit
    await utimes(lock, old, old);
    vi.advanceTimersByTime(LOCK_HEARTBEAT_MS);
    vi.useRealTimers();
    // The heartbeat's write is stamped by the filesystem: now, whatever this process's clock says.
    await expect.poll(async () => Date.now() - (await stat(lock)).mtimeMs).toBeLessThan(LOCK_STALE_MS);
    expect(await readFile(lock, 'utf8')).toBe(text);
    await release();
  });

  test("a lock that stays the same for LOCK_STALE_MS of the waiter's own time is taken over, whatever its mtime says", async () => {
    const lock = path.join(dir, 'x.lock');
    await writeFile(lock, REMOTE);
    // Stamped by a holder's clock an hour ahead (a filesystem that takes the writer's clock), then never again.
    const ahead = new Date(Date.now() + 3_600_000);
    await utimes(lock, ahead, ahead);
    vi.useFakeTimers({ toFake: ['performance'] });
    expect(await tryLock(lock)).toBeUndefined();
    vi.advanceTimersByTime(LOCK_STALE_MS / 2);
    // A heartbeat (the text written again, the mtime a step further) starts the watch over.
    await writeFile(lock, REMOTE);
    await utimes(lock, new Date(ahead.getTime() + 10_000), new Date(ahead.getTime() + 10_000));
    expect(await tryLock(lock)).toBeUndefined();
    vi.advanceTimersByTime(LOCK_STALE_MS / 2 + 1000);
    expect(await tryLock(lock)).toBeUndefined();
    vi.advanceTimersByTime(LOCK_STALE_MS / 2);
    const release = await tryLock(lock);
    expect(release).toBeDefined();
    expect(await lockHolder(lock)).toMatchObject({ pid: process.pid });
    await release!();
  });
});

describe("a holder whose clock runs behind the filesystem's", () => {
  test('its lock, refreshed just now but stamped 75 s ago, is not taken over until two heartbeats are missed', async () => {
    const lock = path.join(dir, 'x.lock');
    // Each heartbeat stamped by a clock 75 s behind (a filesystem that takes the writer's clock, or a holder of an
    // earlier release that refreshed with utimes); each stamp a little apart, as a heartbeat's is.
    const first = Date.now() - LOCK_STALE_MS - 15_000;
    const beat = async (n: number) => utimes(lock, new Date(first + n), new Date(first + n));
    await writeFile(lock, REMOTE);
    await beat(0);
    vi.useFakeTimers({ toFake: ['performance'] });
    expect(await tryLock(lock)).toBeUndefined();
    for (let n = 1; n <= 6; n++) {
      vi.advanceTimersByTime(LOCK_HEARTBEAT_MS);
      await beat(n);
      expect(await tryLock(lock)).toBeUndefined();
    }
    // The heartbeat stops: seen unchanged for two heartbeats, its age is believed.
    vi.advanceTimersByTime(LOCK_HEARTBEAT_MS);
    expect(await tryLock(lock)).toBeUndefined();
    vi.advanceTimersByTime(LOCK_HEARTBEAT_MS + 1000);
    const release = await tryLock(lock);
    expect(release).toBeDefined();
    await release!();
  });

  /**
   * A holder (this process) and a waiter of another host (this process too), on one faked monotonic clock. The waiter
   * watches `seen`: the holder's lock as a waiter of another host reads it (it names another host), written when the
   * holder took it and stamped by the holder's clock, 75 s behind; then never again, as the holder's heartbeat fails.
   */
  async function holderAndWaiter() {
    const [lock, seen] = [path.join(dir, 'x.lock'), path.join(dir, 'seen.lock')];
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
    const events: string[] = [];
    const release = (await tryLock(lock))!;
    release.lost.addEventListener('abort', () => events.push('lost'));
    await writeFile(seen, REMOTE);
    await utimes(seen, ago(LOCK_STALE_MS + 15_000), ago(LOCK_STALE_MS + 15_000));
    expect(await tryLock(seen)).toBeUndefined();
    return { lock, seen, events, release };
  }

  test('one whose heartbeat hangs takes its lock for lost before a waiter of another host may take it over', async () => {
    const { seen, events, release } = await holderAndWaiter();
    // The time passes with no I/O completing: the holder's refresh stays in flight (the volume's server out of its
    // reach) until the waiter's watch of two heartbeats lets it take the lock at its next poll.
    vi.advanceTimersByTime(2 * LOCK_HEARTBEAT_MS + LOCK_POLL_MS);
    const taken = await tryLock(seen);
    expect(taken).toBeDefined();
    events.push('taken over');
    expect(events).toEqual(['lost', 'taken over']);
    await taken!();
    await release();
  });

  test('one whose heartbeats fail takes its lock for lost before a waiter of another host polling it takes it over', async () => {
    const { lock, seen, events, release } = await holderAndWaiter();
    // A lock that cannot be opened for writing (a directory in its place: EISDIR, as EIO or ENOSPC would fail it).
    await rm(lock);
    await mkdir(lock);
    let taken;
    for (let polls = 0; !taken && polls < (2 * LOCK_STALE_MS) / LOCK_POLL_MS; polls++) {
      vi.advanceTimersByTime(LOCK_POLL_MS);
      taken = await tryLock(seen);
    }
    expect(taken).toBeDefined();
    events.push('taken over');
    expect(events).toEqual(['lost', 'taken over']);
    await taken!();
    await release();
  });

  test("where no file can be written beside the lock, its age is not judged by this host's clock: the watch alone decides", async () => {
    // A name at the length limit: the lock can be read, but no file can be written beside it to read the filesystem's
    // clock, as on a read-only volume or a full disk.
    const lock = path.join(dir, `${'x'.repeat(250)}.lock`);
    await writeFile(lock, REMOTE);
    await utimes(lock, ago(LOCK_STALE_MS + 15_000), ago(LOCK_STALE_MS + 15_000));
    vi.useFakeTimers({ toFake: ['performance'] });
    expect(await isStaleLock(lock)).toBe(false);
    vi.advanceTimersByTime(2 * LOCK_HEARTBEAT_MS + 1000);
    expect(await isStaleLock(lock)).toBe(false);
    vi.advanceTimersByTime(LOCK_STALE_MS);
    expect(await isStaleLock(lock)).toBe(true);
  });

  test("a lock of this host is judged by its pid: no file is written beside it for the filesystem's clock", async () => {
    const lock = path.join(dir, 'x.lock');
    const live = liveProcess();
    await writeFile(lock, `pid=${live.pid} host=${hostname()} token=0123456789abcdef\n`);
    const names: string[] = [];
    const watcher = watch(dir, (_, name) => void names.push(String(name)));
    try {
      expect(await isLockHeld(lock)).toBe(true);
      // inotify reports a directory's changes in order: once this file's is in, any probe's would be too.
      await writeFile(path.join(dir, 'done'), '');
      await expect.poll(() => names.includes('done')).toBe(true);
    } finally {
      watcher.close();
    }
    expect(names.filter((name) => name.endsWith('.new'))).toEqual([]);
  });
});

describe('hosts that share a hostname', () => {
  test.skipIf(BOOT === undefined)("another boot's holder is judged by its heartbeat, not taken for gone", async () => {
    const lock = path.join(dir, 'x.lock');
    vi.useFakeTimers({ toFake: ['performance'] });
    await writeFile(lock, `pid=1 host=${hostname()} token=0123456789abcdef start=1 boot=00000000-0000-0000-0000-000000000000\n`);
    expect(await tryLock(lock)).toBeUndefined();
    await utimes(lock, ago(LOCK_STALE_MS + 1000), ago(LOCK_STALE_MS + 1000));
    expect(await tryLock(lock)).toBeUndefined();
    vi.advanceTimersByTime(2 * LOCK_HEARTBEAT_MS + 1000);
    const release = await tryLock(lock);
    expect(release).toBeDefined();
    await release!();
  });

  test.skipIf(BOOT === undefined)('a holder of another pid namespace is not probed by its pid here', async () => {
    const lock = path.join(dir, 'x.lock');
    // Its pid is gone in this namespace, which says nothing of the holder's.
    vi.useFakeTimers({ toFake: ['performance'] });
    await writeFile(lock, `pid=${deadPid()} host=${hostname()} token=0123456789abcdef boot=${BOOT} pidns=1\n`);
    expect(await tryLock(lock)).toBeUndefined();
    await utimes(lock, ago(LOCK_STALE_MS + 1000), ago(LOCK_STALE_MS + 1000));
    expect(await tryLock(lock)).toBeUndefined();
    vi.advanceTimersByTime(2 * LOCK_HEARTBEAT_MS + 1000);
    const release = await tryLock(lock);
    expect(release).toBeDefined();
    await release!();
  });
});

test('taking a lock sweeps the files aside and the guards that holders gone left, and no live one', async () => {
  const at = (name: string) => path.join(dir, name);
  const holder = (pid: number | string, host = hostname()) => `pid=${pid} host=${host} token=0123456789abcdef lease=0a0b0c0d0e0f0a0b\n`;
  const live = liveProcess();
  await writeFile(at(`x.lock.${deadPid()}.0123456789ab.new`), holder(deadPid()));
  await writeFile(at('x.lock.takeover-0123456789abcdef'), holder(deadPid()));
  await writeFile(at('x.lock.takeover-0123456789abcdef.takeover-fedcba9876543210'), holder(deadPid()));
  await writeFile(at('x.lock.7.ba9876543210.new'), holder(7, 'other-node'));
  await utimes(at('x.lock.7.ba9876543210.new'), ago(LOCK_STALE_MS + 1000), ago(LOCK_STALE_MS + 1000));
  // Kept: a live writer's, a guard a live waiter holds, another host's just written, and files that are not locks'.
  const kept = [
    `x.lock.${live.pid}.0123456789ab.new`,
    'x.lock.takeover-00000000000000ff',
    'x.lock.7.000000000000.new',
    'notes.1.abcdefabcdef.new',
    'x.lock',
  ];
  await writeFile(at(kept[0]!), holder(live.pid!));
  await writeFile(at(kept[1]!), holder(live.pid!));
  await writeFile(at(kept[2]!), holder(7, 'other-node'));
  await writeFile(at(kept[3]!), 'not a lock\n');
  await writeFile(at(kept[4]!), holder(live.pid!));

  const release = await acquireLock(at('y.lock'));
  await release();
  expect((await readdir(dir)).sort()).toEqual([...kept].sort());
});
