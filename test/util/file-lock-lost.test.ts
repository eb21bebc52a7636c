/**
 * A holder told it lost its lock (src/util/file-lock.ts, ReleaseLock.lost): a heartbeat that finds the lock another
 * holder's, or no heartbeat that succeeds for LOCK_LOST_AFTER_MS; and a release whose removal fails, which must not
 * leave this process waiting on its own leftover lock. The heartbeat's timers are faked; the files and processes are
 * real.
 */
import { spawn } from 'node:child_process';
import { chown, mkdir, mkdtemp, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { acquireLock, LOCK_LOST_AFTER_MS, LOCK_REFRESH_MS, LockLostError } from '../../src/util/file-lock.js';

const FILE_LOCK = fileURLToPath(new URL('../../src/util/file-lock.ts', import.meta.url));
const REMOTE = `pid=7 host=other-node token=0123456789abcdef lease=00112233445566ff\n`;

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'file-lock-lost-'));
});
afterEach(async () => {
  vi.useRealTimers();
  await rm(dir, { recursive: true, force: true });
});

test('a heartbeat that finds the lock taken over by another holder aborts `lost`; the release leaves that lock', async () => {
  const lock = path.join(dir, 'x.lock');
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
  const release = await acquireLock(lock);
  await writeFile(lock, REMOTE);
  expect(release.lost.aborted).toBe(false);
  vi.advanceTimersByTime(LOCK_REFRESH_MS);
  await expect.poll(() => release.lost.aborted).toBe(true);
  expect(release.lost.reason).toBeInstanceOf(LockLostError);
  expect((release.lost.reason as Error).message).toContain('taken over');
  await release();
  expect(await readFile(lock, 'utf8')).toBe(REMOTE);
});

test('heartbeats that cannot write the lock abort `lost` once none has succeeded for LOCK_LOST_AFTER_MS', async () => {
  const lock = path.join(dir, 'x.lock');
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout', 'performance'] });
  const release = await acquireLock(lock);
  // A lock that cannot be opened for writing (here a directory in its place: EISDIR, as EIO or ENOSPC would fail it).
  await rm(lock);
  await mkdir(lock);
  vi.advanceTimersByTime(LOCK_LOST_AFTER_MS - 1);
  expect(release.lost.aborted).toBe(false);
  vi.advanceTimersByTime(1);
  expect(release.lost.aborted).toBe(true);
  expect((release.lost.reason as Error).message).toContain('no heartbeat succeeded for 10 s');
  await rmdir(lock);
  await release();
});

/**
 * Run as a user that a read-only directory stops (not root): takes a lock, fails to remove it on release, then tries
 * it again. A lease kept live by the failed release would make the leftover lock look held by a live acquisition.
 */
const FAILED_RELEASE = `
import { chmod } from 'node:fs/promises';
const { acquireLock, tryLock } = await import(process.env.FILE_LOCK);
const lock = process.env.DIR + '/x.lock';
const release = await acquireLock(lock);
await chmod(process.env.DIR, 0o555);
const failed = await release().then(() => 'released', (error) => error.code);
await chmod(process.env.DIR, 0o755);
const again = await tryLock(lock);
console.log(JSON.stringify({ failed, again: again !== undefined }));
await again?.();
`;

test('a release whose removal fails leaves no live lease: the process takes its leftover lock again', async () => {
  const asRoot = process.getuid?.() === 0;
  if (asRoot) await chown(dir, 65534, 65534);
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', FAILED_RELEASE], {
    env: { ...process.env, FILE_LOCK, DIR: dir },
    stdio: ['ignore', 'pipe', 'inherit'],
    ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
  });
  try {
    const line = (await createInterface({ input: child.stdout! })[Symbol.asyncIterator]().next()).value as string;
    expect(JSON.parse(line)).toEqual({ failed: 'EACCES', again: true });
  } finally {
    child.kill('SIGKILL');
  }
}, 30_000);
