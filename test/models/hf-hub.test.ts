import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ModelSourceError, type ModelSourceErrorCode } from '../../src/models/errors.js';
import { resolveHubModel, treeListings, type ResolveHubModelOptions } from '../../src/models/hf-hub.js';
import { hubResponseError } from '../../src/models/hub-errors.js';
import { backoffDelay, DEFAULT_RETRY_POLICY, retryAfterMs, type RetryNotice, type RetryPolicy } from '../../src/models/retry.js';
import { ModelCache, type DownloadProgress } from '../../src/models/model-cache.js';
import { FAKE_HUB_TOKEN, startFakeHub, type FakeHub, type FakeRepo } from '../support/fake-hub.js';
import { bytes, sha256 } from '../support/bytes.js';

/** Deterministic pseudo-random bytes, so every file has a distinct, stable sha256. */

const Q4 = bytes(6000, 1);
const Q8 = bytes(9000, 2);
const SINGLE = bytes(5000, 3);
const MAIN_SHA = 'a'.repeat(40);
const DEV_SHA = 'b'.repeat(40);

const repos: FakeRepo[] = [
  { id: 'org/single', files: { 'model.gguf': SINGLE, 'README.md': '# single\n' } },
  {
    id: 'org/quants',
    files: {
      'README.md': '# quants\n',
      'model-Q8_0.gguf': Q8,
      'model-Q4_K_M.gguf': Q4,
      'model-Q4_K.gguf': bytes(100, 9), // must not be taken for Q4_K_M
      'mmproj-model-f16.gguf': bytes(100, 10),
    },
    commits: { main: MAIN_SHA, dev: DEV_SHA },
  },
  { id: 'org/private', files: { 'model.gguf': SINGLE }, private: true },
  { id: 'org/gated', files: { 'model.gguf': SINGLE }, gated: 'manual', allowedTokens: [] },
  { id: 'org/empty', files: { 'README.md': '# nothing\n', 'config.json': '{}' } },
  { id: 'org/safetensors', files: { 'config.json': '{}', 'model.safetensors': bytes(500, 4) } },
];

/** Production's retry count with short waits, so that faults that outlast the retries fail fast. */
const FAST: Partial<RetryPolicy> = { baseDelayMs: 5, maxDelayMs: 20 };

let hub: FakeHub;
let cacheDir: string;
const cdnGets = () => hub.requests.filter((r) => r.route === 'cdn' && r.method === 'GET');
const resolve = (repo: string, extra: Partial<ResolveHubModelOptions> = {}) =>
  resolveHubModel({ repo, endpoint: hub.url, token: FAKE_HUB_TOKEN, retry: FAST, ...extra });

async function expectCode(promise: Promise<unknown>, code: ModelSourceErrorCode): Promise<ModelSourceError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ModelSourceError);
  expect((err as ModelSourceError).code).toBe(code);
  return err as ModelSourceError;
}

beforeEach(async () => {
  hub = await startFakeHub({ repos, treePageSize: 2 }); // small pages exercise Link pagination
  cacheDir = await mkdtemp(join(tmpdir(), 'model-cache-test-'));
});

afterEach(async () => {
  await hub.close();
  await rm(cacheDir, { recursive: true, force: true });
});

describe('resolveHubModel', () => {
  it('resolves the single GGUF with its LFS sha256 and the commit', async () => {
    const resolved = await resolve('org/single');
    expect(resolved.commitSha).toMatch(/^[0-9a-f]{40}$/);
    expect(resolved.file).toEqual({ path: 'model.gguf', size: SINGLE.length, sha256: sha256(SINGLE) });
    expect(hub.requests.map((r) => `${r.method} ${r.route} ${r.status}`)).toEqual([
      'GET api 200', // model info
      'GET api 200', // tree (README.md, model.gguf: one page)
      'HEAD resolve 302', // file metadata, redirected to the CDN
    ]);
  });

  it('picks the preferred quantization among several, skipping near-miss names and mmproj', async () => {
    expect((await resolve('org/quants', { quantPreference: ['Q4_K_M', 'Q8_0'] })).file.path).toBe('model-Q4_K_M.gguf');
    const treePages = hub.requests.filter((r) => r.path.includes('/tree/'));
    expect(treePages.map((r) => r.query.includes('cursor='))).toEqual([false, true, true]); // 5 files, 2 per page
    expect((await resolve('org/quants', { quantPreference: ['Q5_K_M', 'Q8_0'] })).file.path).toBe('model-Q8_0.gguf');
    await expectCode(resolve('org/quants', { quantPreference: ['IQ2_XS'] }), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
  });

  it('resolves a branch name and a full commit sha to the commit', async () => {
    expect((await resolve('org/quants')).commitSha).toBe(MAIN_SHA);
    expect((await resolve('org/quants', { revision: 'dev' })).commitSha).toBe(DEV_SHA);
    expect((await resolve('org/quants', { revision: DEV_SHA })).commitSha).toBe(DEV_SHA);
    expect(hub.requests.some((r) => r.path === `/api/models/org/quants/tree/${DEV_SHA}`)).toBe(true);
    await expectCode(resolve('org/quants', { revision: 'nope' }), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
  });

  it('maps 401 for a rejected token to INVALID_TOKEN', async () => {
    await expectCode(resolve('org/single', { token: 'hf_wrong' }), 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
    hub.setFault({ type: 'invalid-token' });
    await expectCode(resolve('org/single'), 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
    expect(hub.requests.at(-1)?.status).toBe(401);
  });

  it('maps gated, private and missing repos to CANNOT_ACCESS_REPO', async () => {
    const gated = await expectCode(resolve('org/gated'), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect(gated.message).toMatch(/gated/);
    expect(hub.requests.at(-1)).toMatchObject({ method: 'HEAD', route: 'resolve', status: 403 });

    await expectCode(resolve('org/gated', { token: '' }), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect(hub.requests.at(-1)?.status).toBe(401); // anonymous: 401 GatedRepo, which is not a token problem

    await expectCode(resolve('org/missing'), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect(hub.requests.at(-1)?.status).toBe(404);
    await expectCode(resolve('org/private', { token: '' }), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect(hub.requests.at(-1)?.status).toBe(401);
    expect((await resolve('org/private')).file.path).toBe('model.gguf');

    hub.setFault({ type: 'gated' }, { repo: 'org/single' });
    await expectCode(resolve('org/single'), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
  });

  it('maps a 500 from the API to HF_WANDB_API_ERROR', async () => {
    hub.setFault({ type: 'server-error' });
    await expectCode(resolve('org/single'), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
  });

  it("lists a commit's files once per listings cache, and still asks which commit a revision is and whether the file may be read", async () => {
    const listings = treeListings();
    const asked = () => hub.requests.map((r) => `${r.method} ${r.path.replace(/[0-9a-f]{40}/, '{sha}')}`);
    expect((await resolve('org/quants', { listings })).commitSha).toBe(MAIN_SHA);
    const listed = asked().filter((r) => r.includes('/tree/')).length;
    expect(listed).toBe(3); // 5 files, 2 per page
    hub.requests.length = 0;
    // Another quantization from the same commit: the model info and the HEAD are asked again, the tree is not.
    expect((await resolve('org/quants', { listings, quantPreference: ['Q4_K_M'] })).file.path).toBe('model-Q4_K_M.gguf');
    expect(asked()).toEqual(['GET /api/models/org/quants/revision/main', 'HEAD /org/quants/resolve/{sha}/model-Q4_K_M.gguf']);
    // Another commit is listed again.
    hub.requests.length = 0;
    expect((await resolve('org/quants', { listings, revision: 'dev' })).commitSha).toBe(DEV_SHA);
    expect(asked().filter((r) => r.includes('/tree/'))).toHaveLength(3);
    // A token refused the file is refused though the listing is known.
    hub.setFault({ type: 'gated' }, { repo: 'org/quants' });
    await expectCode(resolve('org/quants', { listings }), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    hub.setFault(null, { repo: 'org/quants' });
    // A revision the repository no longer has is refused at the model info, before the listing is looked up.
    await expectCode(resolve('org/quants', { listings, revision: 'nope' }), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    await expectCode(resolve('org/quants', { listings, token: 'hf_wrong' }), 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
    // Without a cache, every resolution lists.
    hub.requests.length = 0;
    await resolve('org/quants');
    expect(asked().filter((r) => r.includes('/tree/'))).toHaveLength(3);
  });

  it('reports repos without GGUF files as MANIFEST_NOT_FOUND or MANIFEST_TYPE', async () => {
    await expectCode(resolve('org/empty'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    const err = await expectCode(resolve('org/safetensors'), 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR');
    expect(err.message).toMatch(/safetensors/);
    expect(err.message).toMatch(/engine command template/);
  });
});

const ensure = (
  cache: ModelCache,
  resolved: Awaited<ReturnType<typeof resolve>>,
  onProgress?: (p: DownloadProgress) => void,
  retry: Partial<RetryPolicy> = FAST,
  onRetry?: (notice: RetryNotice) => void,
) =>
  cache.ensureHubFile(resolved, {
    endpoint: hub.url,
    token: FAKE_HUB_TOKEN,
    retry,
    ...(onProgress ? { onProgress } : {}),
    ...(onRetry ? { onRetry } : {}),
  });

describe('ModelCache.ensureHubFile', () => {
  it('downloads and verifies, then serves the second request from the cache', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    const resolved = await resolve('org/quants');
    const first = await ensure(cache, resolved);
    expect(first).toMatchObject({ sha256: sha256(Q4), size: Q4.length, cached: false });
    expect(first.path).toBe(join(cacheDir, 'blobs', sha256(Q4)));
    expect(await readFile(first.path)).toEqual(Q4);
    expect(cdnGets()).toHaveLength(1);

    const second = await ensure(cache, await resolve('org/quants'));
    expect(second).toEqual({ ...first, cached: true });
    expect(cdnGets()).toHaveLength(1);
    expect(await readdir(join(cacheDir, 'tmp'))).toEqual([]);
  });

  it('shares one transfer between concurrent calls for the same blob', async () => {
    hub.setFault({ type: 'slow', chunkBytes: 1000, delayMs: 5 });
    const resolved = await resolve('org/single');
    const [a, b] = await Promise.all([
      ensure(new ModelCache({ dir: cacheDir }), resolved),
      ensure(new ModelCache({ dir: cacheDir }), resolved),
    ]);
    expect(a).toEqual(b);
    expect(await readFile(a.path)).toEqual(SINGLE);
    expect(cdnGets()).toHaveLength(1);
  });

  it("waits while a live process holds the lock file and takes over a dead one's", async () => {
    const resolved = await resolve('org/single');
    const lock = join(cacheDir, 'tmp', `${sha256(SINGLE)}.lock`);
    await mkdir(join(cacheDir, 'tmp'), { recursive: true });
    // Stands in for another live downloader (a process of its own: a lock naming this process's pid without its
    // token is another process's, whose pid this one has now).
    const live = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)']);
    try {
      await writeFile(lock, String(live.pid));
      const pending = ensure(new ModelCache({ dir: cacheDir }), resolved);
      await new Promise((r) => setTimeout(r, 300));
      expect(cdnGets()).toHaveLength(0);
      await rm(lock);
      expect((await pending).cached).toBe(false);
    } finally {
      live.kill();
    }

    const otherDir = await mkdtemp(join(tmpdir(), 'model-cache-test-'));
    try {
      await mkdir(join(otherDir, 'tmp'));
      await writeFile(join(otherDir, 'tmp', `${sha256(SINGLE)}.lock`), String(spawnSync(process.execPath, ['-e', '']).pid));
      expect((await ensure(new ModelCache({ dir: otherDir }), resolved)).cached).toBe(false);
    } finally {
      await rm(otherDir, { recursive: true, force: true });
    }
  });

  it('fails a truncated transfer with DOWNLOAD_ERROR (retries off), then resumes it with a Range request', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    const resolved = await resolve('org/single');
    hub.setFault({ type: 'truncate', afterBytes: 2000 }, { times: 1 });
    await expectCode(ensure(cache, resolved, undefined, { retries: 0 }), 'WORKLOAD_INIT_DOWNLOAD_ERROR');

    const [partial] = await readdir(join(cacheDir, 'tmp'));
    expect(partial).toMatch(/\.partial$/);
    const kept = (await stat(join(cacheDir, 'tmp', partial!))).size;
    expect(kept).toBeGreaterThan(0);

    const result = await ensure(cache, resolved);
    expect(result).toMatchObject({ sha256: sha256(SINGLE), cached: false });
    expect(await readFile(result.path)).toEqual(SINGLE);
    expect(cdnGets().at(-1)).toMatchObject({ range: `bytes=${kept}-`, status: 206 });
  });

  it('promotes a complete partial left by a crash after verifying it, without downloading', async () => {
    const resolved = await resolve('org/single');
    await mkdir(join(cacheDir, 'tmp'), { recursive: true });
    await writeFile(join(cacheDir, 'tmp', `${sha256(SINGLE)}.partial`), SINGLE);
    const result = await ensure(new ModelCache({ dir: cacheDir }), resolved);
    expect(result).toMatchObject({ sha256: sha256(SINGLE), cached: false });
    expect(cdnGets()).toHaveLength(0);
  });

  it('rejects wrong bytes with DOWNLOAD_ERROR and leaves nothing in the cache', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    const resolved = await resolve('org/single');
    hub.setFault({ type: 'corrupt' });
    const err = await expectCode(ensure(cache, resolved), 'WORKLOAD_INIT_DOWNLOAD_ERROR');
    expect(err.message).toMatch(/checksum/);
    expect(err.message).not.toContain(cacheDir);
    expect(await readdir(join(cacheDir, 'blobs'))).toEqual([]);
    expect(await readdir(join(cacheDir, 'tmp'))).toEqual([]);
  });

  it('refuses with INSUFFICIENT_DISK before downloading when maxBytes is too small', async () => {
    const cache = new ModelCache({ dir: cacheDir, maxBytes: SINGLE.length - 1 });
    await expectCode(ensure(cache, await resolve('org/single')), 'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR');
    expect(cdnGets()).toHaveLength(0);
    expect(hub.requests.filter((r) => r.route === 'resolve' && r.method === 'GET')).toHaveLength(0);
  });

  it('counts downloads under way against maxBytes: two that fit only one at a time are not both started', async () => {
    const [a, b] = [await resolve('org/single'), await resolve('org/quants', { quantPreference: ['Q8_0'] })];
    const cache = new ModelCache({ dir: cacheDir, maxBytes: a.file.size + b.file.size - 1 });
    hub.setFault({ type: 'slow', chunkBytes: 500, delayMs: 30 });
    const results = await Promise.allSettled([ensure(cache, a), ensure(cache, b)]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ code: 'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR' });
    expect(await cache.usedBytes()).toBeLessThanOrEqual(cache.maxBytes!);
  });

  it('reports monotonic progress that ends at the total', async () => {
    hub.setFault({ type: 'slow', chunkBytes: 500, delayMs: 30 });
    const seen: DownloadProgress[] = [];
    await ensure(new ModelCache({ dir: cacheDir }), await resolve('org/single'), (p) => seen.push(p));
    expect(seen.length).toBeGreaterThan(2);
    expect(seen.length).toBeLessThan(SINGLE.length / 500 + 2); // throttled: not one report per chunk
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.bytesDone).toBeGreaterThanOrEqual(seen[i - 1]!.bytesDone);
    expect(seen.every((p) => p.bytesTotal === SINGLE.length)).toBe(true);
    expect(seen.at(-1)).toEqual({ bytesDone: SINGLE.length, bytesTotal: SINGLE.length });
  });

  it('maps a gated download refused at /resolve/ to CANNOT_ACCESS_REPO', async () => {
    const resolved = await resolve('org/single');
    hub.setFault({ type: 'gated' });
    await expectCode(ensure(new ModelCache({ dir: cacheDir }), resolved), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
  });
});

describe("hub errors, mapped in the order of huggingface_hub's hf_raise_for_status", () => {
  const answer = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers });
  const codeOf = (res: Response, tokenSent = true) => hubResponseError(res, { repo: 'org/x', revision: 'main', tokenSent }).code;

  it('reads X-Error-Code first, then X-Error-Message, then the status', () => {
    const cases: Array<[number, Record<string, string>, ModelSourceErrorCode]> = [
      // the error code wins over the status and over the message
      [401, { 'X-Error-Code': 'RepoNotFound' }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      [
        401,
        { 'X-Error-Code': 'RepoNotFound', 'X-Error-Message': 'Invalid credentials in Authorization header' },
        'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR',
      ],
      [404, { 'X-Error-Code': 'RepoNotFound' }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      [401, { 'X-Error-Code': 'GatedRepo' }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      [
        403,
        { 'X-Error-Code': 'GatedRepo', 'X-Error-Message': 'Access to this resource is disabled.' },
        'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR',
      ],
      [404, { 'X-Error-Code': 'RevisionNotFound' }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      [404, { 'X-Error-Code': 'EntryNotFound' }, 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR'],
      [401, { 'X-Error-Code': 'EntryNotFound' }, 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR'],
      // then the message: a disabled repo, and the one 401 that is the token's fault
      [403, { 'X-Error-Message': 'Access to this resource is disabled.' }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      [401, { 'X-Error-Message': 'Invalid credentials in Authorization header' }, 'WORKLOAD_INIT_INVALID_TOKEN_ERROR'],
      // a 401 with any other message (or none) is a repo that is missing or not readable, as the hub's client reads it
      [401, {}, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      [401, { 'X-Error-Message': 'Unauthorized' }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      // then the status
      [400, {}, 'WORKLOAD_INIT_HF_WANDB_API_ERROR'],
      [403, {}, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      [404, {}, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'],
      [429, {}, 'WORKLOAD_INIT_HF_WANDB_API_ERROR'],
      [503, {}, 'WORKLOAD_INIT_HF_WANDB_API_ERROR'],
    ];
    for (const [status, headers, code] of cases) {
      expect(codeOf(answer(status, headers)), `${status} ${JSON.stringify(headers)}`).toBe(code);
      expect(codeOf(answer(status, headers), false), `anonymous ${status} ${JSON.stringify(headers)}`).toBe(code);
    }
  });

  it('gives each documented case its code against the stand-in hub, without retrying it', async () => {
    const expectOnce = async (repo: string, code: ModelSourceErrorCode, extra: Partial<ResolveHubModelOptions> = {}) => {
      const before = hub.requests.length;
      const notices: RetryNotice[] = [];
      const err = await expectCode(resolve(repo, { ...extra, onRetry: (n) => void notices.push(n) }), code);
      expect(notices).toEqual([]); // permanent: never retried
      const failed = hub.requests.slice(before).filter((r) => (r.status ?? 0) >= 400);
      expect(failed).toHaveLength(1);
      return { err, status: failed[0]!.status };
    };
    // RepoNotFound on a 401 even though a (valid) token was sent: the repo, not the token
    hub.setFault({ type: 'repo-not-found', status: 401 }, { repo: 'org/single' });
    const repoNotFound = await expectOnce('org/single', 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect(repoNotFound.status).toBe(401);
    expect(repoNotFound.err.message).toMatch(/not found, or it is private/);
    hub.setFault(null);
    // a bad token
    const badToken = await expectOnce('org/single', 'WORKLOAD_INIT_INVALID_TOKEN_ERROR', { token: 'hf_wrong' });
    expect(badToken.status).toBe(401);
    // a gated repo (granted to nobody): the metadata reads, the file is refused
    expect((await expectOnce('org/gated', 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR')).status).toBe(403);
    // a missing revision
    const revision = await expectOnce('org/quants', 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR', { revision: 'nope' });
    expect(revision.err.message).toMatch(/Revision "nope" was not found/);
    // a missing file: the listing names it, the hub has no such entry
    hub.setFault({ type: 'entry-not-found' }, { repo: 'org/single' });
    const entry = await expectOnce('org/single', 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    expect(entry.err.message).toMatch(/model\.gguf was not found in org\/single/);
    // a repo disabled by the hub
    hub.setFault({ type: 'disabled' }, { repo: 'org/single' });
    expect((await expectOnce('org/single', 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR')).err.message).toMatch(/disabled/);
  });
});

describe('retries', () => {
  it('backs off exponentially with jitter, capped, and reads Retry-After as seconds or a date', () => {
    const policy = { ...DEFAULT_RETRY_POLICY, baseDelayMs: 1000, maxDelayMs: 8000 };
    expect([1, 2, 3, 4, 5].map((n) => backoffDelay(n, policy, () => 1))).toEqual([1000, 2000, 4000, 8000, 8000]);
    expect([1, 2, 3, 4, 5].map((n) => backoffDelay(n, policy, () => 0))).toEqual([500, 1000, 2000, 4000, 4000]);
    expect(retryAfterMs(new Response(null, { status: 429, headers: { 'retry-after': '2' } }))).toBe(2000);
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs(new Headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:03 GMT' }), now)).toBe(3000);
    expect(retryAfterMs(new Headers({ 'retry-after': 'soon' }))).toBeUndefined();
  });

  it('survives 503s and connection resets on metadata calls, reporting each retry', async () => {
    const notices: RetryNotice[] = [];
    hub.setFault({ type: 'server-error', status: 503 }, { repo: 'org/single', times: 2 });
    const resolved = await resolve('org/single', { onRetry: (n) => void notices.push(n) });
    expect(resolved.file.path).toBe('model.gguf');
    hub.setFault({ type: 'reset' }, { repo: 'org/single', on: ['api', 'resolve'], times: 2 });
    await resolve('org/single', { onRetry: (n) => void notices.push(n) });
    expect(notices.map((n) => [n.attempt, n.maxAttempts, n.source])).toEqual([
      [2, 6, 'the hub'],
      [3, 6, 'the hub'],
      [2, 6, 'the hub'],
      [3, 6, 'the hub'],
    ]);
    expect(notices[0]!.reason).toMatch(/answered 503/);
    expect(notices[2]!.reason).toMatch(/Could not reach the hub/);
    expect(notices[0]!.operation).toBe('reading the model info of org/single@main');
    expect(hub.requests.filter((r) => r.status === 0)).toHaveLength(2);
  });

  it('honours a 429 Retry-After, and gives up at once when it is past the time budget', async () => {
    const notices: RetryNotice[] = [];
    hub.setFault({ type: 'rate-limit', retryAfter: 1 }, { repo: 'org/single', times: 1 });
    await resolve('org/single', { onRetry: (n) => void notices.push(n) });
    expect(notices).toMatchObject([{ attempt: 2, delayMs: 1000, retryAfterMs: 1000 }]);
    const [limited, next] = hub.requests.filter((r) => r.route === 'api').slice(0, 2);
    expect(limited!.status).toBe(429);
    expect(next!.at - limited!.at).toBeGreaterThanOrEqual(1000);

    hub.setFault({ type: 'rate-limit', retryAfter: 120 }, { repo: 'org/single' });
    const started = Date.now();
    const err = await expectCode(resolve('org/single', { retry: { ...FAST, maxTimeMs: 10_000 } }), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    expect(err.message).toMatch(/429/);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('bounds the retries of a fault that persists, then reports the last failure', async () => {
    hub.setFault({ type: 'server-error', status: 502 }, { repo: 'org/single' });
    const err = await expectCode(resolve('org/single'), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    expect(err.message).toMatch(/answered 502.*gave up after 6 attempts/);
    expect(hub.requests.filter((r) => r.status === 502)).toHaveLength(6);
    hub.setFault({ type: 'server-error', status: 500 }, { repo: 'org/single' });
    await expectCode(resolve('org/single', { retry: { retries: 1 } }), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    expect(hub.requests.filter((r) => r.status === 500)).toHaveLength(2);
  });

  it('resumes a cut or refused download range by Range, within one call', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    const resolved = await resolve('org/single');
    const notices: RetryNotice[] = [];
    hub.setFault({ type: 'truncate', afterBytes: 2000 }, { times: 1 });
    hub.setFault({ type: 'server-error', status: 503, retryAfter: 0 }, { repo: 'org/single', on: ['cdn'], times: 1 });
    const result = await ensure(cache, resolved, undefined, FAST, (n) => notices.push(n));
    expect(result).toMatchObject({ sha256: sha256(SINGLE), cached: false });
    expect(await readFile(result.path)).toEqual(SINGLE);
    const gets = cdnGets();
    expect(gets.map((r) => r.status)).toEqual([503, 200, 206]);
    expect(gets.at(-1)!.range).toMatch(/^bytes=\d+-$/);
    expect(notices.map((n) => [n.attempt, n.operation])).toEqual([
      [2, 'downloading model.gguf from org/single'],
      [3, 'downloading model.gguf from org/single'],
    ]);
  });

  it('never retries a permanent refusal of a download', async () => {
    const resolved = await resolve('org/single');
    hub.setFault({ type: 'gated' }, { on: ['resolve'] });
    const notices: RetryNotice[] = [];
    await expectCode(
      ensure(new ModelCache({ dir: cacheDir }), resolved, undefined, FAST, (n) => notices.push(n)),
      'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR',
    );
    expect(notices).toEqual([]);
    expect(hub.requests.filter((r) => r.route === 'resolve' && r.method === 'GET')).toHaveLength(1);
  });
});
