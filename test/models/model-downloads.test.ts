/**
 * Model downloads under stress: callers that share a transfer and leave it, transfers cut again and again, a disk
 * that fills up, and download locks left by processes that died.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, statfs, symlink, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { acquireLock, download } from '../../src/models/blob-download.js';
import { hubHeaders, hubResolveUrl, resolveHubModel } from '../../src/models/hf-hub.js';
import { hubResponseError } from '../../src/models/hub-errors.js';
import { ModelCache, type EnsureHubFileOptions } from '../../src/models/model-cache.js';
import type { RetryNotice, RetryPolicy } from '../../src/models/retry.js';
import { LOCK_HEARTBEAT_MS } from '../../src/util/file-lock.js';
import { bytes, sha256 } from '../support/bytes.js';
import { FAKE_HUB_TOKEN, startFakeHub, type FakeHub } from '../support/fake-hub.js';

const BIG = bytes(64 << 10, 11);
const OTHER = bytes(64 << 10, 12);
const SINGLE = bytes(5000, 13);
const SECOND = bytes(5000, 14);
const THIRD = bytes(5000, 15);

let hub: FakeHub;
let dir: string;
const cdnGets = () => hub.requests.filter((r) => r.route === 'cdn' && r.method === 'GET');
const resolve = (repo: string) => resolveHubModel({ repo, endpoint: hub.url, token: FAKE_HUB_TOKEN, retry: { retries: 0 } });
const ensure = (resolved: Awaited<ReturnType<typeof resolve>>, options: EnsureHubFileOptions = {}) =>
  new ModelCache({ dir }).ensureHubFile(resolved, {
    endpoint: hub.url,
    token: FAKE_HUB_TOKEN,
    ...options,
    retry: { baseDelayMs: 1, maxDelayMs: 1, ...options.retry },
  });
const DISK_ERROR = 'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR';

beforeEach(async () => {
  hub = await startFakeHub({
    repos: [
      { id: 'org/big', files: { 'model.gguf': BIG } },
      { id: 'org/other', files: { 'model.gguf': OTHER } },
      { id: 'org/single', files: { 'model.gguf': SINGLE } },
      { id: 'org/second', files: { 'model.gguf': SECOND } },
      { id: 'org/third', files: { 'model.gguf': THIRD } },
    ],
  });
  dir = await mkdtemp(join(tmpdir(), 'model-downloads-'));
});

afterEach(async () => {
  vi.useRealTimers();
  await hub.close();
  await rm(dir, { recursive: true, force: true });
});

describe('a transfer shared by several callers', () => {
  it('goes on for the others when one leaves, and stops when the last one leaves', async () => {
    hub.setFault({ type: 'slow', chunkBytes: 1024, delayMs: 10 });
    const big = await resolve('org/big');
    const [a, b] = [new AbortController(), new AbortController()];
    // A leaves (its endpoint is deleted) once the transfer is under way.
    const leaveOnce = (controller: AbortController, reason: string) => (p: { bytesDone: number }) => {
      if (p.bytesDone > 0 && !controller.signal.aborted) controller.abort(new Error(reason));
    };
    const first = ensure(big, { signal: a.signal, onProgress: leaveOnce(a, 'endpoint A was deleted') });
    const second = ensure(big, { signal: b.signal });
    await expect(first).rejects.toThrow('endpoint A was deleted');
    expect(await second).toMatchObject({ sha256: sha256(BIG), cached: false });
    expect(cdnGets()).toHaveLength(1);

    // Both leave: the transfer is stopped (its connection closed, its lock released), and the next caller resumes it.
    const other = await resolve('org/other');
    const [c, d] = [new AbortController(), new AbortController()];
    const third = ensure(other, { signal: c.signal, onProgress: leaveOnce(c, 'endpoint C was deleted') });
    const fourth = ensure(other, { signal: d.signal });
    await expect(third).rejects.toThrow('endpoint C was deleted');
    d.abort(new Error('endpoint D was deleted'));
    await expect(fourth).rejects.toThrow('endpoint D was deleted');
    await expect.poll(() => cdnGets().at(-1)?.closedAt).toBeDefined();
    expect(cdnGets().at(-1)?.complete).toBe(false);
    await expect.poll(async () => (await readdir(join(dir, 'tmp'))).filter((name) => name.endsWith('.lock'))).toEqual([]);
    hub.setFault(null);
    expect(await ensure(other)).toMatchObject({ sha256: sha256(OTHER), cached: false });
    expect(cdnGets().at(-1)?.range).toMatch(/^bytes=[1-9]\d*-$/);
  });
});

describe('retries of a download', () => {
  /** Downloads `repo`'s model.gguf with the download core, whose minimum pace (what counts as getting somewhere) is 1000 bytes. */
  async function fetchFrom(repo: string, policy: Partial<RetryPolicy>, onRetry?: (notice: RetryNotice) => void): Promise<string> {
    const { commitSha, file } = await resolve(repo);
    const ctx = { repo, revision: commitSha, file: file.path, tokenSent: true };
    return download(
      {
        key: repo,
        size: file.size,
        url: hubResolveUrl(hub.url, repo, commitSha, file.path),
        headers: hubHeaders(FAKE_HUB_TOKEN),
        label: `${file.path} from ${repo}`,
        source: 'the hub',
        responseError: (res) => hubResponseError(res, ctx),
        retry: { policy: { baseDelayMs: 1, maxDelayMs: 1, ...policy }, ...(onRetry ? { onRetry } : {}) },
        minPace: { bytes: 1000, ms: 60_000 },
      },
      partialOf(repo),
    );
  }

  /** Where a download of `repo` keeps its partial file: the hub cuts a truncated answer once it holds what was sent. */
  const partialOf = (repo: string) => join(dir, `${repo.replace('/', '-')}.partial`);

  it('resume a transfer cut again and again while each attempt moves bytes: the retry budget starts anew', async () => {
    // One retry at most, but each cut attempt moves 1000 bytes.
    hub.setFault({ type: 'truncate', afterBytes: 1000, heldUntilFile: partialOf('org/single') }, { times: 4 });
    const notices: RetryNotice[] = [];
    expect(await fetchFrom('org/single', { retries: 1 }, (notice) => notices.push(notice))).toBe(sha256(SINGLE));
    expect(cdnGets().map((r) => r.range ?? 'whole')).toEqual(['whole', 'bytes=1000-', 'bytes=2000-', 'bytes=3000-', 'bytes=4000-']);
    expect(notices.map((n) => [n.attempt, n.maxAttempts])).toEqual([
      [2, 2],
      [3, 3],
      [4, 4],
      [5, 5],
    ]);
    // The time: 100 ms at most, and the cuts take 200 ms (each holds its connection 50 ms).
    hub.setFault({ type: 'truncate', afterBytes: 1000, heldUntilFile: partialOf('org/third') }, { times: 4 });
    expect(await fetchFrom('org/third', { maxTimeMs: 100 })).toBe(sha256(THIRD));
  });

  it('give up on attempts that get nowhere: no bytes, or fewer than the minimum pace asks for', async () => {
    hub.setFault({ type: 'truncate', afterBytes: 500, heldUntilFile: partialOf('org/second') }, { times: 4 });
    await expect(fetchFrom('org/second', { retries: 1 })).rejects.toThrow(
      /after 1000 of 5000 bytes; retrying resumes it \(gave up after 2 attempts\)/,
    );
    hub.requests.length = 0;
    hub.setFault({ type: 'server-error', status: 503 }, { on: ['cdn'] });
    await expect(fetchFrom('org/third', { retries: 2 })).rejects.toThrow(/answered 503.*gave up after 3 attempts/);
    expect(cdnGets()).toHaveLength(3);
  });
});

describe('retries that get nowhere new', () => {
  it.each(['ignores ranges and cuts at the same place', 'has less than it announced'])(
    'a server that %s: each attempt starts over and reaches no further, so the budget does not start anew',
    async (kind) => {
      const size = 256 << 10;
      const part = Buffer.alloc(64 << 10, 1);
      let requests = 0;
      const server = http.createServer((req, res) => {
        requests++;
        if (kind.startsWith('has less')) {
          if (req.headers.range) return void res.writeHead(416).end();
          return void res.writeHead(200, { 'content-length': String(part.length) }).end(part);
        }
        res.writeHead(200, { 'content-length': String(size) });
        res.write(part, () => setTimeout(() => res.destroy(), 20));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/f`;
        const outcome = download(
          {
            key: 'k',
            size,
            url,
            headers: {},
            label: 'f',
            source: 'test',
            responseError: () => new Error('refused') as never,
            retry: { policy: { retries: 3, maxTimeMs: 2000, baseDelayMs: 10, maxDelayMs: 20 } },
            minPace: { bytes: 16 << 10, ms: 60_000 },
          },
          join(dir, 'norange.partial'),
        );
        await expect(outcome).rejects.toThrow(/gave up after 4 attempts/);
        // Four attempts, each a request (and a second one where the range was refused): not hundreds.
        expect(requests).toBeLessThanOrEqual(8);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    },
  );
});

describe('disk space', () => {
  it.skipIf(!existsSync('/dev/full'))(
    'a disk that fills up mid-download fails it for good with INSUFFICIENT_DISK, and frees its partial',
    async () => {
      const single = await resolve('org/single');
      await mkdir(join(dir, 'tmp'), { recursive: true });
      // The partial is a link to /dev/full: every write to it fails as on a full disk (ENOSPC).
      await symlink('/dev/full', join(dir, 'tmp', `${sha256(SINGLE)}.partial`));
      const notices: RetryNotice[] = [];
      await expect(ensure(single, { onRetry: (n) => void notices.push(n) })).rejects.toMatchObject({
        code: DISK_ERROR,
        message:
          "The model cache's disk filled up while downloading model.gguf from org/single (after 0 of 5000 bytes): free some space and try again.",
      });
      expect(notices).toEqual([]);
      expect(await readdir(join(dir, 'tmp'))).toEqual([]);
    },
  );

  it('counts what the downloads under way still have to write as taken', async () => {
    const fs = await statfs(dir);
    const size = Math.floor(Number(fs.bavail) * Number(fs.bsize) * 0.6); // each fits alone, not both
    let requested: () => void = () => {};
    const underWay = new Promise<void>((resolve) => (requested = resolve));
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-length': String(size) }).flushHeaders(); // then sends nothing
      requested();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const cache = new ModelCache({ dir });
    const [a, b] = [new AbortController(), new AbortController()];
    const first = cache.ensureUrlFile({ url: `${base}/a.gguf`, size, signal: a.signal, retry: { retries: 0 } });
    try {
      await underWay;
      await expect(cache.ensureUrlFile({ url: `${base}/b.gguf`, size, signal: b.signal, retry: { retries: 0 } })).rejects.toMatchObject({
        code: DISK_ERROR,
        message: expect.stringMatching(
          /^b\.gguf needs .* GiB more disk space but only .* GiB is free, .* GiB of which other downloads under way still need\.$/,
        ),
      });
    } finally {
      a.abort(new Error('done'));
      b.abort(new Error('done'));
      await first.catch(() => {});
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  const canMountTmpfs =
    process.platform === 'linux' &&
    spawnSync('unshare', ['-rm', 'sh', '-c', 'mount -t tmpfs -o size=1m tmpfs "$0"', tmpdir()]).status === 0;

  it.skipIf(!canMountTmpfs)('a lock that cannot be written on a full disk is removed, not left nameless', async () => {
    // A 1 MiB tmpfs of its own (a private mount namespace), filled up before the lock is taken.
    const child = `
      import { writeFile, readdir } from 'node:fs/promises';
      import { acquireLock } from './src/models/blob-download.ts';
      const dir = process.argv[1];
      await writeFile(dir + '/filler', Buffer.alloc(2 << 20)).catch(() => {});
      const error = await acquireLock(dir + '/k.lock').then(() => null, (e) => ({ code: e.code, message: e.message }));
      console.log(JSON.stringify({ error, left: (await readdir(dir)).sort() }));`;
    const run = spawnSync(
      'unshare',
      [
        '-rm',
        'sh',
        '-c',
        'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$1" --import tsx --input-type=module -e "$2" "$0"',
        dir,
        process.execPath,
        child,
      ],
      { encoding: 'utf8', cwd: process.cwd() },
    );
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({
      error: {
        code: DISK_ERROR,
        message: "The model cache's disk filled up while taking the download lock: free some space and try again.",
      },
      left: ['filler'],
    });
  });
});

describe('download locks', () => {
  it("are taken over from a dead holder by one waiter only, however the waiters' steps interleave", async () => {
    const deadPid = spawnSync(process.execPath, ['-e', '']).pid!;
    // Two waiters per lock, the second a few file operations behind the first: 2 to 5 behind, two waiters once
    // both took over the lock in about every other trial.
    const trials = Array.from({ length: 40 }, async (_, i) => {
      const lock = join(dir, `${i}.lock`);
      await writeFile(lock, `${deadPid} ${hostname()}`);
      let holders = 0;
      let most = 0;
      const hold = async (behind: number) => {
        for (let step = 0; step < behind; step++) await stat(dir);
        const release = await acquireLock(lock);
        most = Math.max(most, ++holders);
        await new Promise((resolve) => setTimeout(resolve, 20));
        holders--;
        await release();
      };
      await Promise.all([hold(0), hold(i % 8)]);
      return most;
    });
    expect(await Promise.all(trials)).toEqual(Array.from({ length: 40 }, () => 1));
  });

  it('keep a partial that another writer grew from becoming the blob', async () => {
    const single = await resolve('org/single');
    const partial = join(dir, 'tmp', `${sha256(SINGLE)}.partial`);
    let spoiled = false;
    const onProgress = () => {
      if (spoiled || !existsSync(partial)) return;
      spoiled = true;
      // Another writer appends (the last report comes before the file is promoted); the digest, of the bytes the download
      // itself wrote, still matches.
      appendFileSync(partial, 'written by someone else');
    };
    await expect(ensure(single, { onProgress })).rejects.toMatchObject({
      code: 'WORKLOAD_INIT_DOWNLOAD_ERROR',
      message: `The download of model.gguf from org/single was spoiled on disk (${SINGLE.length + 23} bytes instead of ${SINGLE.length}); it was deleted.`,
    });
    expect(await readdir(join(dir, 'blobs'))).toEqual([]);
    expect(await readdir(join(dir, 'tmp'))).toEqual([]);
  });
});

describe('a download whose lock is lost', () => {
  it("stops its transfer, and leaves the partial file to the lock's new holder", async () => {
    hub.setFault({ type: 'slow', chunkBytes: 1024, delayMs: 200 });
    const big = await resolve('org/big');
    // The lock's heartbeat, faked: the lock is found another holder's at the next one.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    let done = 0;
    const downloading = ensure(big, { onProgress: (p) => (done = p.bytesDone) }).catch((e: unknown) => e);
    await expect.poll(() => done).toBeGreaterThan(0);
    const lock = join(
      dir,
      'tmp',
      (await readdir(join(dir, 'tmp'))).find((name) => name.endsWith('.lock'))!,
    );
    const other = 'pid=7 host=other-node token=0123456789abcdef lease=00112233445566ff\n';
    await writeFile(lock, other);
    vi.advanceTimersByTime(LOCK_HEARTBEAT_MS);
    const error = (await downloading) as { code?: string; message?: string };
    expect(error.code).toBe('WORKLOAD_INIT_DOWNLOAD_ERROR');
    expect(error.message).toContain('lost its lock');
    expect(await readFile(lock, 'utf8')).toBe(other);
    const partial = (await readdir(join(dir, 'tmp'))).find((name) => name.endsWith('.partial'))!;
    expect((await stat(join(dir, 'tmp', partial))).size).toBeLessThan(BIG.length);
    expect(await readdir(join(dir, 'blobs'))).toEqual([]);
  });
});
