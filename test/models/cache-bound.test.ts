/**
 * The bound on a shared model cache volume (src/models/cache-bound.ts), on real files in a temporary directory:
 * least-recently-used eviction of files no pod uses, leases and recent use protecting files, downloads under way
 * counted (also another fetcher's, also across processes), partial files of dead downloads, and the model fetcher
 * failing with WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR when a file is larger than the bound.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { acquireLock } from '../../src/models/blob-download.js';
import { isStaleLock, LOCK_HEARTBEAT_MS, LOCK_STALE_MS } from '../../src/util/file-lock.js';
import { CacheBound, LEASE_TTL_MS, RECENT_USE_MS } from '../../src/models/cache-bound.js';
import { ModelSourceError } from '../../src/models/errors.js';
import { ModelCache } from '../../src/models/model-cache.js';

let dir: string;
const HOUR = 3_600_000;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'cache-bound-'));
});
afterEach(async () => {
  vi.useRealTimers();
  await rm(dir, { recursive: true, force: true });
});

const ago = (ms: number) => new Date(Date.now() - ms);

/** A complete blob of `size` bytes, last used `agoMs` ago; its name is its sha256, as ModelCache writes it. */
async function blob(seed: string, size: number, agoMs: number): Promise<{ name: string; path: string; size: number }> {
  const bytes = Buffer.alloc(size, seed);
  const name = createHash('sha256').update(bytes).digest('hex');
  const file = path.join(dir, 'blobs', name);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, bytes);
  await utimes(file, ago(agoMs), ago(agoMs));
  return { name, path: file, size };
}

async function lease(name: string, blobName: string, agoMs: number): Promise<void> {
  const file = path.join(dir, 'leases', name);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `${blobName}\n`);
  await utimes(file, ago(agoMs), ago(agoMs));
}

const blobs = async () => (await readdir(path.join(dir, 'blobs')).catch(() => [])).sort();
const exists = (file: string) =>
  stat(file).then(
    () => true,
    () => false,
  );

async function failure(promise: Promise<unknown>): Promise<ModelSourceError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ModelSourceError);
  return error as ModelSourceError;
}

describe('making room under the bound', () => {
  test('evicts the least recently used files first, only as many as needed, and what pointed at them', async () => {
    const oldest = await blob('a', 1000, 3 * HOUR);
    const middle = await blob('b', 1000, 2 * HOUR);
    const newest = await blob('c', 1000, 1 * HOUR);
    // The md5 index and a fetcher's link of the oldest go with it.
    await mkdir(path.join(dir, 'index'));
    await writeFile(path.join(dir, 'index', 'md5-00'), `${oldest.name}\n`);
    await writeFile(path.join(dir, 'index', 'md5-11'), `${newest.name}\n`);
    await mkdir(path.join(dir, 'links', 'rev'), { recursive: true });
    await symlink(oldest.path, path.join(dir, 'links', 'rev', 'model.gguf'));
    await symlink(newest.path, path.join(dir, 'links', 'rev', 'other.gguf'));

    const bound = new CacheBound({ dir, maxBytes: 3500 });
    const reservation = await bound.reserve(1000, 'new.gguf');
    expect(await blobs()).toEqual([middle.name, newest.name].sort());
    expect(await readdir(path.join(dir, 'index'))).toEqual(['md5-11']);
    expect(await readdir(path.join(dir, 'links', 'rev'))).toEqual(['other.gguf']);
    // The reservation counts as used until released.
    expect((await bound.usage()).usedBytes).toBe(3000);
    await reservation.release();
    expect((await bound.usage()).usedBytes).toBe(2000);
  });

  test('nothing is evicted while the file fits', async () => {
    await blob('a', 1000, 3 * HOUR);
    const bound = new CacheBound({ dir, maxBytes: 2000 });
    await (await bound.reserve(1000, 'new.gguf')).release();
    expect(await blobs()).toHaveLength(1);
  });

  test('a file leased by a running pod, or used moments ago, is kept; a lease no longer refreshed protects nothing', async () => {
    const leased = await blob('a', 1000, 5 * HOUR);
    const abandoned = await blob('b', 1000, 4 * HOUR);
    const justUsed = await blob('c', 1000, RECENT_USE_MS / 2);
    const unused = await blob('d', 1000, 1 * HOUR);
    await lease('default.pod-1', leased.name, LEASE_TTL_MS / 2);
    await lease('default.pod-2', abandoned.name, LEASE_TTL_MS * 2);

    const bound = new CacheBound({ dir, maxBytes: 3000 });
    await bound.reserve(1000, 'new.gguf');
    expect(await blobs()).toEqual([leased.name, justUsed.name].sort());
    expect(await exists(unused.path)).toBe(false);
  });

  test('a file larger than the bound fails at once, naming the setting; nothing is evicted for it', async () => {
    await blob('a', 1000, 3 * HOUR);
    const bound = new CacheBound({ dir, maxBytes: 2000, setting: 'KUBERNETES_MODEL_CACHE_MAX_BYTES' });
    const error = await failure(bound.reserve(2001, 'huge.gguf from acme/huge'));
    expect(error.code).toBe('WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR');
    expect(error.message).toMatch(
      /^huge\.gguf from acme\/huge \(0\.00 GiB\) is larger than the model cache's bound \(KUBERNETES_MODEL_CACHE_MAX_BYTES = /,
    );
    expect(await blobs()).toHaveLength(1);
  });

  test('a bound full of files in use fails with what holds it, and evicts nothing', async () => {
    const a = await blob('a', 1000, 3 * HOUR);
    const b = await blob('b', 1000, 3 * HOUR);
    await lease('ns.pod-a', a.name, 1000);
    await lease('ns.pod-b', b.name, 1000);
    const bound = new CacheBound({ dir, maxBytes: 2500, setting: 'KUBERNETES_MODEL_CACHE_MAX_BYTES' });
    const error = await failure(bound.reserve(1000, 'new.gguf'));
    expect(error.code).toBe('WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR');
    expect(error.message).toContain('does not fit in the model cache');
    expect(error.message).toContain('held by 2 model files in use or just used');
    expect(await blobs()).toHaveLength(2);
  });
});

describe('downloads under way', () => {
  test("another fetcher's download counts with its full size until it ends; one that stopped refreshing does not", async () => {
    const bound = new CacheBound({ dir, maxBytes: 2000 });
    const first = await bound.reserve(1500, 'first.gguf');
    const error = await failure(new CacheBound({ dir, maxBytes: 2000 }).reserve(1000, 'second.gguf'));
    expect(error.message).toContain('downloads under way (0.00 GiB)');
    await first.release();
    await (await bound.reserve(1000, 'second.gguf')).release();

    // A reservation whose fetcher died: its mtime is no longer refreshed.
    await mkdir(path.join(dir, 'tmp'), { recursive: true });
    const dead = path.join(dir, 'tmp', 'other-pod-1-abcd.reserve');
    await writeFile(dead, JSON.stringify({ size: 1500, label: 'dead.gguf' }));
    await utimes(dead, ago(LOCK_STALE_MS * 2), ago(LOCK_STALE_MS * 2));
    await (await bound.reserve(1000, 'third.gguf')).release();
    expect(await exists(dead)).toBe(false);
  });

  test('pods waiting for the same file count its download once', async () => {
    const first = await new CacheBound({ dir, maxBytes: 1500 }).reserve(1000, 'model.gguf', 'sha256:abc');
    const second = await new CacheBound({ dir, maxBytes: 1500 }).reserve(1000, 'model.gguf', 'sha256:abc');
    const bound = new CacheBound({ dir, maxBytes: 1500 });
    expect((await bound.usage()).reservedBytes).toBe(1000);
    // Whichever ends first, the file stays counted while the other waits for it.
    await first.release();
    expect((await bound.usage()).reservedBytes).toBe(1000);
    await failure(bound.reserve(1000, 'other.gguf', 'sha256:def'));
    await second.release();
    expect((await bound.usage()).reservedBytes).toBe(0);
  });

  test('two fetchers racing for the last room: the volume lock lets exactly one reserve it', async () => {
    const results = await Promise.allSettled([
      new CacheBound({ dir, maxBytes: 1500 }).reserve(1000, 'one.gguf'),
      new CacheBound({ dir, maxBytes: 1500 }).reserve(1000, 'two.gguf'),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1);
  });

  test("partial files: a live download's stays (inside its reservation), a dead download's counts and is evicted", async () => {
    await mkdir(path.join(dir, 'tmp'), { recursive: true });
    const live = path.join(dir, 'tmp', 'live.partial');
    const dead = path.join(dir, 'tmp', 'dead.partial');
    await writeFile(live, Buffer.alloc(400));
    await writeFile(dead, Buffer.alloc(700));
    await utimes(dead, ago(HOUR), ago(HOUR));
    const release = await acquireLock(path.join(dir, 'tmp', 'live.lock'));
    try {
      const bound = new CacheBound({ dir, maxBytes: 1500 });
      const usage = await bound.usage();
      expect(usage.livePartialBytes).toBe(400);
      expect(usage.orphanPartials.map((p) => p.key)).toEqual(['dead']);
      expect(usage.usedBytes).toBe(700);
      await (await bound.reserve(1000, 'new.gguf')).release();
      expect(await exists(dead)).toBe(false);
      expect(await exists(live)).toBe(true);
    } finally {
      await release();
    }
  });
});

describe('claiming a cached file', () => {
  test('leases it to the pod and marks it used now, so that it is kept', async () => {
    const old = await blob('a', 1000, 5 * HOUR);
    const bound = new CacheBound({ dir, maxBytes: 1500 });
    const cache = new ModelCache({ dir });
    const found = await bound.claim('default.pod-x', () => cache.lookup(old.name, old.size));
    expect(found?.path).toBe(old.path);
    expect((await readFile(path.join(dir, 'leases', 'default.pod-x'), 'utf8')).trim()).toBe(old.name);
    expect(Date.now() - (await stat(old.path)).mtimeMs).toBeLessThan(60_000);
    expect(await bound.claim('default.pod-y', () => cache.lookup('0'.repeat(64), 1))).toBeUndefined();
    const error = await failure(bound.reserve(1000, 'new.gguf'));
    expect(error.message).toContain('held by 1 model file in use');
  });

  test('a lease name must be a plain file name', () => {
    expect(() => new CacheBound({ dir }).leasePath('../escape')).toThrow(/lease name/);
  });
});

describe('locks on a volume pods share', () => {
  test("another host's lock is live while its heartbeat is fresh, stale after; a same-host lock goes by its pid", async () => {
    const lock = path.join(dir, 'x.lock');
    // The time a waiter watches a lock is its monotonic clock (faked).
    vi.useFakeTimers({ toFake: ['performance'] });
    await writeFile(lock, '1 some-other-pod');
    expect(await isStaleLock(lock)).toBe(false);
    // An mtime that old is believed only once the lock has also been seen unchanged for two heartbeats: a holder whose
    // clock runs behind may stamp a lock it refreshed just now that far in the past.
    await utimes(lock, ago(LOCK_STALE_MS + 1000), ago(LOCK_STALE_MS + 1000));
    expect(await isStaleLock(lock)).toBe(false);
    vi.advanceTimersByTime(2 * LOCK_HEARTBEAT_MS + 1000);
    expect(await isStaleLock(lock)).toBe(true);
    // A live process of this host (not this one: a lock naming this process's pid without its token is another's).
    const live = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)']);
    try {
      await writeFile(lock, `${live.pid} ${os.hostname()}`);
      await utimes(lock, ago(HOUR), ago(HOUR));
      expect(await isStaleLock(lock)).toBe(false);
    } finally {
      live.kill();
    }
  });
});

describe('the model fetcher with a bound', () => {
  test('a model larger than the bound ends with its ENGINE_ERROR line, before any request', async () => {
    const fetcher = path.join(process.cwd(), 'src/models/fetch-main.ts');
    const args = [
      ...['--import', 'tsx', fetcher, '--repo', 'acme/huge-GGUF', '--commit', 'a'.repeat(40)],
      ...['--file', 'huge-Q8_0.gguf', '--size', String(3 * 2 ** 30), '--sha256', 'b'.repeat(64)],
      ...['--cache-dir', dir, '--link', path.join(dir, 'links', 'x', 'huge-Q8_0.gguf'), '--lease', 'default.pod-1'],
      ...['--max-bytes', String(2 ** 30)],
    ];
    // A hub that cannot be reached: the fetcher must not need it to refuse.
    const env = { ...process.env, HF_ENDPOINT: 'http://127.0.0.1:9' };
    const error = await promisify(execFile)(process.execPath, args, { env }).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(error?.code).toBe(1);
    const line = /^ENGINE_ERROR (.*)$/m.exec(error!.stderr)?.[1];
    expect(JSON.parse(line!)).toEqual({
      code: 'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR',
      message:
        "huge-Q8_0.gguf from acme/huge-GGUF at aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa (3.00 GiB) is larger than the model cache's bound (KUBERNETES_MODEL_CACHE_MAX_BYTES = 1.00 GiB): raise KUBERNETES_MODEL_CACHE_MAX_BYTES or choose a smaller model file.",
    });
  }, 30_000);
});
