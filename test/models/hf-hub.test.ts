import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ModelSourceError, type ModelSourceErrorCode } from '../../src/models/errors.js';
import { resolveHubModel, type ResolveHubModelOptions } from '../../src/models/hf-hub.js';
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

let hub: FakeHub;
let cacheDir: string;
const cdnGets = () => hub.requests.filter((r) => r.route === 'cdn' && r.method === 'GET');
const resolve = (repo: string, extra: Partial<ResolveHubModelOptions> = {}) =>
  resolveHubModel({ repo, endpoint: hub.url, token: FAKE_HUB_TOKEN, ...extra });

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

  it('reports repos without GGUF files as MANIFEST_NOT_FOUND or MANIFEST_TYPE', async () => {
    await expectCode(resolve('org/empty'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    const err = await expectCode(resolve('org/safetensors'), 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR');
    expect(err.message).toMatch(/safetensors/);
    expect(err.message).toMatch(/engine command template/);
  });
});

describe('ModelCache.ensureHubFile', () => {
  const ensure = (cache: ModelCache, resolved: Awaited<ReturnType<typeof resolve>>, onProgress?: (p: DownloadProgress) => void) =>
    cache.ensureHubFile(resolved, { endpoint: hub.url, token: FAKE_HUB_TOKEN, ...(onProgress ? { onProgress } : {}) });

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
    await writeFile(lock, String(process.pid)); // stands in for another live downloader
    const pending = ensure(new ModelCache({ dir: cacheDir }), resolved);
    await new Promise((r) => setTimeout(r, 300));
    expect(cdnGets()).toHaveLength(0);
    await rm(lock);
    expect((await pending).cached).toBe(false);

    const otherDir = await mkdtemp(join(tmpdir(), 'model-cache-test-'));
    try {
      await mkdir(join(otherDir, 'tmp'));
      await writeFile(join(otherDir, 'tmp', `${sha256(SINGLE)}.lock`), String(spawnSync(process.execPath, ['-e', '']).pid));
      expect((await ensure(new ModelCache({ dir: otherDir }), resolved)).cached).toBe(false);
    } finally {
      await rm(otherDir, { recursive: true, force: true });
    }
  });

  it('fails a truncated transfer with DOWNLOAD_ERROR, then resumes it with a Range request', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    const resolved = await resolve('org/single');
    hub.setFault({ type: 'truncate', afterBytes: 2000 }, { times: 1 });
    await expectCode(ensure(cache, resolved), 'WORKLOAD_INIT_DOWNLOAD_ERROR');

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
