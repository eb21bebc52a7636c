import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ModelSourceError, type ModelSourceErrorCode } from '../../src/models/errors.js';
import { ModelCache } from '../../src/models/model-cache.js';
import type { RetryNotice, RetryPolicy } from '../../src/models/retry.js';
import {
  manifestDigest,
  parseArtifactName,
  pickModelFile,
  resolveArtifact,
  wandbFileDownload,
  type ResolvedArtifact,
  type WandbAccessOptions,
} from '../../src/models/wandb/registry-client.js';
import { FAKE_WANDB_KEY, startFakeWandb, type FakeArtifact, type FakeWandb, type FakeWandbOptions } from '../support/fake-wandb.js';
import { bytes, sha256 } from '../support/bytes.js';

/** Deterministic pseudo-random bytes, so every file has a distinct, stable digest. */
const md5 = (data: Buffer) => createHash('md5').update(data);
const basic = (key: string) => `Basic ${Buffer.from(`api:${key}`).toString('base64')}`;

const Q4 = bytes(6000, 1);
const Q8 = bytes(9000, 2);
const SINGLE = bytes(5000, 3);
const OTHER = bytes(3000, 4);

const artifacts: FakeArtifact[] = [
  {
    org: 'acme',
    registry: 'model',
    name: 'llama',
    versions: [
      { version: 'v0', files: { 'README.md': '# llama\n', 'model-Q8_0.gguf': Q8, 'model-Q4_K_M.gguf': Q4 } },
      { version: 'v1', aliases: ['latest', 'production'], files: { 'config.json': '{}', 'model.gguf': SINGLE } },
    ],
  },
  {
    org: 'acme',
    registry: 'model',
    name: 'flat',
    versions: [{ version: 'v0', aliases: ['latest'], layout: 'V1', files: { 'weights/model.gguf': OTHER } }],
  },
  {
    org: 'acme',
    registry: 'model',
    name: 'linked',
    versions: [{ version: 'v0', files: { 'model.gguf': OTHER }, references: { 'remote.gguf': 's3://bucket/remote.gguf' } }],
  },
  { org: 'acme', registry: 'datasets', name: 'corpus', versions: [{ version: 'v0', type: 'dataset', files: { 'data.gguf': OTHER } }] },
  { org: 'acme', registry: 'model', name: 'uploading', versions: [{ version: 'v0', state: 'PENDING', files: { 'model.gguf': OTHER } }] },
  { org: 'solo', registry: 'model', name: 'tiny', versions: [{ version: 'v2', aliases: ['latest'], files: { 'tiny.gguf': OTHER } }] },
];

let wandb: FakeWandb;
let running: FakeWandb | undefined;
let cacheDir: string;
/** (Re)starts the stand-in; every test starts with the default one. */
const start = async (extra: Partial<FakeWandbOptions> = {}) => {
  await running?.close();
  running = wandb = await startFakeWandb({ artifacts, orgEntities: { acme: 'acme-org' }, ...extra });
};
/** Production's retry count with short waits; NO_RETRY shows how a single failure is mapped. */
const FAST: Partial<RetryPolicy> = { baseDelayMs: 5, maxDelayMs: 20 };
const NO_RETRY = { retry: { retries: 0 } };
const access = (extra: Partial<WandbAccessOptions> = {}): WandbAccessOptions => ({
  baseUrl: wandb.url,
  apiKey: FAKE_WANDB_KEY,
  retry: FAST,
  ...extra,
});
const resolve = (ref: string, extra: Partial<WandbAccessOptions> = {}) => resolveArtifact(ref, access(extra));
const fileGets = () => wandb.requests.filter((r) => r.route === 'download' || r.route === 'storage');

async function expectCode(promise: Promise<unknown>, code: ModelSourceErrorCode): Promise<ModelSourceError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ModelSourceError);
  expect((err as ModelSourceError).code).toBe(code);
  expect((err as ModelSourceError).message).not.toContain(FAKE_WANDB_KEY);
  expect((err as ModelSourceError).message).not.toContain(Buffer.from(`api:${FAKE_WANDB_KEY}`).toString('base64'));
  return err as ModelSourceError;
}

beforeEach(async () => {
  await start();
  cacheDir = await mkdtemp(join(tmpdir(), 'wandb-cache-test-'));
});

afterEach(async () => {
  await running?.close();
  running = undefined;
  await rm(cacheDir, { recursive: true, force: true });
});

describe('parseArtifactName', () => {
  it('accepts <org>/<registry>/<name>:<version> with a version or an alias', () => {
    expect(parseArtifactName('acme/model/llama-3.1_8b:v3')).toEqual({
      type: 'ok',
      value: { org: 'acme', registry: 'model', name: 'llama-3.1_8b', version: 'v3' },
    });
    expect(parseArtifactName('acme/model/llama:latest')).toMatchObject({ type: 'ok', value: { version: 'latest' } });
    expect(parseArtifactName('acme/model/llama:prod-2.1_b')).toMatchObject({ type: 'ok', value: { version: 'prod-2.1_b' } });
    // The SDK's spelling of the registry project is accepted too.
    expect(parseArtifactName('acme/wandb-registry-model/llama:v0')).toMatchObject({ type: 'ok', value: { registry: 'model' } });
  });

  it.each([
    ['', /empty/],
    ['llama:v1', /1 slash-separated part before/],
    ['acme/llama:v1', /2 slash-separated parts/],
    ['a/b/c/d:v1', /4 slash-separated parts/],
    ['acme/model/llama', /version is missing/],
    ['acme/model/llama:', /version is empty/],
    ['acme//llama:v1', /registry is empty/],
    ['acme/wandb-registry-/llama:v1', /registry is empty/],
    ['acme/model/ll ama:v1', /name may only contain/],
    ['acme/model/llama:v1:extra', /version may only contain/],
    ['../model/llama:v1', /organization may only contain/],
    [`acme/model/${'x'.repeat(129)}:v1`, /longer than 128/],
  ])('rejects %j, saying what shape is expected', (name, why) => {
    const result = parseArtifactName(name);
    expect(result.type).toBe('error');
    if (result.type === 'ok') return;
    expect(result.error).toMatch(why);
    expect(result.error).toContain('<org>/<registry>/<name>:<version>');
  });
});

describe('resolveArtifact', () => {
  it("resolves a version through the SDK's queries, with basic auth, and lists its files with their download URLs", async () => {
    const resolved = await resolve('acme/model/llama:v0');
    const { digest, artifactId } = wandb.manifestOf('acme', 'model', 'llama', 'v0');
    expect(resolved).toMatchObject({
      org: 'acme',
      registry: 'model',
      name: 'llama',
      version: 'v0',
      aliases: [],
      type: 'model',
      artifactId,
      digest,
      entity: 'acme-org',
      project: 'wandb-registry-model',
    });
    const hex = (data: Buffer) => md5(data).digest('hex');
    expect(resolved.files.map((f) => f.path).sort()).toEqual(['README.md', 'model-Q4_K_M.gguf', 'model-Q8_0.gguf']);
    expect(resolved.files.find((f) => f.path === 'model-Q8_0.gguf')).toEqual({
      path: 'model-Q8_0.gguf',
      size: Q8.length,
      md5: md5(Q8).digest('base64'),
      url: `${wandb.url}/artifactsV2/default/acme-org/wandb-registry-model/llama/${encodeURIComponent(artifactId)}/${encodeURIComponent(artifactId)}/${hex(Q8)}/model-Q8_0.gguf`,
    });

    const graphql = wandb.requests.filter((r) => r.route === 'graphql');
    expect(graphql.map((r) => `${r.operation} ${r.status}`)).toEqual([
      'FetchOrganization 200',
      'ArtifactMembershipByName 200',
      'FetchArtifactManifest 200',
      'ServerFeaturesQuery 200',
    ]);
    expect(graphql.every((r) => r.method === 'POST' && r.path === '/graphql' && r.authorization === basic(FAKE_WANDB_KEY))).toBe(true);
    // The manifest comes from its signed URL on the storage host, which never sees the key.
    const manifestGets = wandb.requests.filter((r) => r.route === 'manifest');
    expect(manifestGets).toEqual([expect.objectContaining({ method: 'GET', status: 200 })]);
    expect(manifestGets[0]!.authorization).toBeUndefined();
  });

  it('resolves an alias to the concrete version and reports its aliases', async () => {
    const resolved = await resolve('acme/model/llama:latest');
    expect(resolved).toMatchObject({ version: 'v1', aliases: ['latest', 'production'] });
    expect(resolved.files.map((f) => f.path).sort()).toEqual(['config.json', 'model.gguf']);
    expect((await resolve('acme/wandb-registry-model/llama:production')).version).toBe('v1');
  });

  it('uses the organization name as the entity when W&B knows no organization by that name', async () => {
    const resolved = await resolve('solo/model/tiny:latest');
    expect(resolved).toMatchObject({ version: 'v2', entity: 'solo' });
  });

  it('builds the URL without the artifact id on servers without that feature, and V1 URLs for V1 manifests', async () => {
    await start({ features: [] });
    const [v2] = (await resolve('acme/model/linked:v0')).files;
    const { artifactId } = wandb.manifestOf('acme', 'model', 'linked', 'v0');
    expect(v2!.url).toBe(
      `${wandb.url}/artifactsV2/default/acme-org/wandb-registry-model/linked/${encodeURIComponent(artifactId)}/${md5(OTHER).digest('hex')}/model.gguf`,
    );

    const [v1] = (await resolve('acme/model/flat:latest')).files;
    expect(v1).toMatchObject({ path: 'weights/model.gguf', url: `${wandb.url}/artifacts/acme-org/${md5(OTHER).digest('hex')}` });
    expect(wandb.requests.filter((r) => r.operation === 'ServerFeaturesQuery')).toHaveLength(1); // V1 needs no features
  });

  it('leaves reference entries out of the files', async () => {
    const resolved = await resolve('acme/model/linked:v0');
    expect(resolved.files.map((f) => f.path)).toEqual(['model.gguf']);
    // ...but they count in the digest, as in the SDK.
    expect(
      manifestDigest(
        (wandb.manifestOf('acme', 'model', 'linked', 'v0').manifest as { contents: Record<string, { digest: string }> }).contents,
      ),
    ).toBe(resolved.digest);
  });

  it('reads WANDB_BASE_URL and WANDB_API_KEY when no options are given', async () => {
    const saved = { url: process.env.WANDB_BASE_URL, key: process.env.WANDB_API_KEY };
    process.env.WANDB_BASE_URL = `${wandb.url}/`;
    process.env.WANDB_API_KEY = FAKE_WANDB_KEY;
    try {
      expect((await resolveArtifact('acme/model/llama:latest')).version).toBe('v1');
      await expectCode(resolveArtifact('acme/model/llama:latest', { apiKey: 'local-wrong' }), 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
    } finally {
      for (const [name, value] of [
        ['WANDB_BASE_URL', saved.url],
        ['WANDB_API_KEY', saved.key],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});

describe('resolveArtifact failures', () => {
  it('reports unknown artifacts, versions, aliases and registries as MANIFEST_NOT_FOUND', async () => {
    const unknown = await expectCode(resolve('acme/model/nope:v0'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    expect(unknown.message).toContain('acme/model/nope:v0');
    await expectCode(resolve('acme/model/llama:v7'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    await expectCode(resolve('acme/model/llama:staging'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    const registry = await expectCode(resolve('acme/nothing/llama:v0'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    expect(registry.message).toMatch(/Registry "nothing"/);
    await expectCode(resolve('acme/model/uploading:v0'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    const bad = await expectCode(resolve('llama:v0'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    expect(bad.message).toContain('<org>/<registry>/<name>:<version>');
  });

  it('reports a missing manifest as MANIFEST_NOT_FOUND', async () => {
    wandb.setFault({ type: 'missing-manifest' });
    const err = await expectCode(resolve('acme/model/llama:latest'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    expect(err.message).toMatch(/acme\/model\/llama:v1 has no manifest/);
    wandb.setFault(null);
    wandb.setFault({ type: 'manifest-not-found' });
    await expectCode(resolve('acme/model/llama:latest'), 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    expect(wandb.requests.at(-1)).toMatchObject({ route: 'manifest', status: 404 });
  });

  it('refuses artifacts that are not models with MANIFEST_TYPE', async () => {
    const err = await expectCode(resolve('acme/datasets/corpus:v0'), 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR');
    expect(err.message).toMatch(/type "dataset", not "model"/);
    expect(wandb.requests.some((r) => r.operation === 'FetchArtifactManifest')).toBe(false);
  });

  it('maps 401 to INVALID_TOKEN, with or without a key', async () => {
    const wrong = await expectCode(resolve('acme/model/llama:v0', { apiKey: 'local-not-a-key' }), 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
    expect(wrong.message).toMatch(/rejected the API key/);
    expect(wrong.message).not.toContain('local-not-a-key');
    expect(wandb.requests.at(-1)).toMatchObject({ route: 'graphql', status: 401 });
    const none = await expectCode(resolve('acme/model/llama:v0', { apiKey: '' }), 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
    expect(none.message).toMatch(/set WANDB_API_KEY/);
    wandb.setFault({ type: 'invalid-key' });
    await expectCode(resolve('acme/model/llama:v0'), 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
  });

  it('maps 403 to CANNOT_ACCESS_REPO', async () => {
    wandb.setFault({ type: 'forbidden' }, { operation: 'ArtifactMembershipByName' });
    const err = await expectCode(resolve('acme/model/llama:v0'), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect(err.message).toMatch(/permission denied/);
    expect(err.message).toMatch(/member of organization "acme"/);
  });

  it('maps 5xx, GraphQL errors in the answer, malformed answers and an unreachable server to HF_WANDB_API_ERROR', async () => {
    wandb.setFault({ type: 'server-error' }, { times: 1 });
    await expectCode(resolve('acme/model/llama:v0', NO_RETRY), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    wandb.setFault({ type: 'server-error', status: 503 }, { operation: 'FetchArtifactManifest', times: 1 });
    expect((await expectCode(resolve('acme/model/llama:v0', NO_RETRY), 'WORKLOAD_INIT_HF_WANDB_API_ERROR')).message).toMatch(/503/);
    wandb.setFault({ type: 'server-error', status: 503 }, { operation: 'FetchArtifactManifest' });
    const persistent = await expectCode(resolve('acme/model/llama:v0'), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    expect(persistent.message).toMatch(/503.*gave up after 6 attempts/);
    wandb.setFault(null);

    wandb.setFault({ type: 'graphql-error', message: 'resolver exploded' }, { operation: 'ArtifactMembershipByName', times: 1 });
    const gql = await expectCode(resolve('acme/model/llama:v0'), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    expect(gql.message).toMatch(/resolver exploded/);
    expect(wandb.requests.at(-1)).toMatchObject({ operation: 'ArtifactMembershipByName', status: 200 });

    wandb.setFault({ type: 'malformed' }, { times: 1 });
    await expectCode(resolve('acme/model/llama:v0'), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    wandb.setFault(
      {
        type: 'malformed',
        contentType: 'application/json',
        body: '{"data":{"project":{"artifactCollectionMembership":{"id":"x","aliases":"none"}}}}',
      },
      { operation: 'ArtifactMembershipByName', times: 1 },
    );
    expect((await expectCode(resolve('acme/model/llama:v0'), 'WORKLOAD_INIT_HF_WANDB_API_ERROR')).message).toMatch(/unexpected/);
    wandb.setFault(
      { type: 'malformed', contentType: 'application/json', body: '{"version":1,"contents":"nope"}' },
      { on: ['manifest'], times: 1 },
    );
    expect((await expectCode(resolve('acme/model/llama:v0'), 'WORKLOAD_INIT_HF_WANDB_API_ERROR')).message).toMatch(/manifest/);

    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const { port } = closed.address() as AddressInfo;
    await new Promise((r) => closed.close(r));
    const unreachable = await expectCode(
      resolve('acme/model/llama:v0', { baseUrl: `http://127.0.0.1:${port}`, ...NO_RETRY }),
      'WORKLOAD_INIT_HF_WANDB_API_ERROR',
    );
    expect(unreachable.message).toMatch(/Could not reach W&B/);
  });

  it('tolerates GraphQL errors from the organization and feature lookups, as the SDK does', async () => {
    wandb.setFault({ type: 'graphql-error' }, { operation: 'FetchOrganization' });
    expect((await resolve('solo/model/tiny:latest')).version).toBe('v2');
    wandb.setFault({ type: 'graphql-error' }, { operation: 'ServerFeaturesQuery' });
    const { artifactId } = wandb.manifestOf('solo', 'model', 'tiny', 'v2');
    expect((await resolve('solo/model/tiny:latest')).files[0]!.url).not.toContain(
      encodeURIComponent(artifactId) + '/' + encodeURIComponent(artifactId),
    );
  });

  it('fails a manifest that does not match the artifact digest, or arrives cut, with DOWNLOAD_ERROR', async () => {
    wandb.setFault({ type: 'corrupt' }, { on: ['manifest'], times: 1 });
    const err = await expectCode(resolve('acme/model/llama:v0'), 'WORKLOAD_INIT_DOWNLOAD_ERROR');
    expect(err.message).toMatch(/does not match the artifact's digest/);
    wandb.setFault({ type: 'truncate', afterBytes: 20 }, { on: ['manifest'], times: 1 });
    await expectCode(resolve('acme/model/llama:v0', NO_RETRY), 'WORKLOAD_INIT_DOWNLOAD_ERROR');
    expect((await resolve('acme/model/llama:v0')).version).toBe('v0');
  });

  it('retries 5xx answers and cut manifests, reporting each retry, and never a 401 or 403', async () => {
    const notices: RetryNotice[] = [];
    const onRetry = (n: RetryNotice) => void notices.push(n);
    wandb.setFault({ type: 'server-error', status: 503 }, { operation: 'ArtifactMembershipByName', times: 2 });
    expect((await resolve('acme/model/llama:v0', { onRetry })).version).toBe('v0');
    wandb.setFault({ type: 'truncate', afterBytes: 20 }, { on: ['manifest'], times: 1 });
    expect((await resolve('acme/model/llama:v0', { onRetry })).version).toBe('v0');
    expect(notices.map((n) => [n.source, n.attempt, n.operation])).toEqual([
      ['W&B', 2, 'looking up acme/model/llama:v0'],
      ['W&B', 3, 'looking up acme/model/llama:v0'],
      ['W&B', 2, 'reading the manifest of acme/model/llama:v0'],
    ]);
    notices.length = 0;
    wandb.setFault({ type: 'invalid-key' });
    await expectCode(resolve('acme/model/llama:v0', { onRetry }), 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
    wandb.setFault({ type: 'forbidden' });
    await expectCode(resolve('acme/model/llama:v0', { onRetry }), 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect(notices).toEqual([]);
  });
});

describe('the resolution deadline', () => {
  const host = () => new URL(wandb.url).host;
  const overdue = (ms: number) =>
    `Resolving acme/model/llama:v0 in W&B's registry "model" of "acme" (${host()}) took longer than ${ms / 1000} s; W&B is too slow, or keeps failing.`;
  /** Requests W&B has neither answered nor seen given up: none once a resolution has ended. */
  const open = () => wandb.requests.filter((r) => r.open).map((r) => r.operation ?? r.route);

  it('ends a resolution that a registry stalls, at any step, with HF_WANDB_API_ERROR; its request is cut', async () => {
    wandb.setFault({ type: 'stall' });
    const error = await expectCode(resolve('acme/model/llama:v0', { deadlineMs: 300 }), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    expect(error.message).toBe(overdue(300));
    await expect.poll(open).toEqual([]);
    expect(wandb.requests.map((r) => r.operation)).toEqual(['FetchOrganization']);

    // Answered step by step, then stalled at the manifest (the deadline leaves a loaded machine time for the steps).
    wandb.setFault(null);
    wandb.requests.length = 0;
    wandb.setFault({ type: 'stall' }, { on: ['manifest'] });
    expect((await expectCode(resolve('acme/model/llama:v0', { deadlineMs: 3000 }), 'WORKLOAD_INIT_HF_WANDB_API_ERROR')).message).toBe(
      overdue(3000),
    );
    await expect.poll(open).toEqual([]);
    expect(wandb.requests.map((r) => r.operation ?? r.route)).toEqual([
      'FetchOrganization',
      'ArtifactMembershipByName',
      'FetchArtifactManifest',
      'manifest',
    ]);
  });

  it('ends a resolution whose calls keep failing within their retry budgets, in the middle of a wait', async () => {
    wandb.setFault({ type: 'server-error', status: 503 });
    const retry = { retries: 1_000_000, baseDelayMs: 5, maxDelayMs: 20, maxTimeMs: 3_600_000 };
    const error = await expectCode(resolve('acme/model/llama:v0', { retry, deadlineMs: 1000 }), 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    expect(error.message).toBe(overdue(1000));
    expect(wandb.requests.length).toBeGreaterThan(1);
    await expect.poll(open).toEqual([]);
  });

  it('a cancellation before the deadline keeps its own reason, and cuts the request too', async () => {
    wandb.setFault({ type: 'stall' });
    const cancelled = new AbortController();
    const pending = resolve('acme/model/llama:v0', { signal: cancelled.signal, deadlineMs: 60_000 });
    await expect.poll(open).toEqual(['FetchOrganization']);
    cancelled.abort(new Error('endpoint deleted'));
    await expect(pending).rejects.toThrow('endpoint deleted');
    await expect.poll(open).toEqual([]);
  });
});

describe('downloading artifact files into the model cache', () => {
  const fetchFile = async (cache: ModelCache, ref: string, apiKey = FAKE_WANDB_KEY, retry: Partial<RetryPolicy> = FAST) => {
    const artifact = await resolve(ref);
    const file = pickModelFile(artifact.files, { artifact: ref });
    return { artifact, file, cached: await cache.ensureUrlFile({ ...wandbFileDownload(artifact, file, { apiKey }), retry }) };
  };

  it('downloads with basic auth through the storage redirect, verifies md5, and stores the blob by sha256', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    const seen: number[] = [];
    const artifact = await resolve('acme/model/llama:v0');
    const file = pickModelFile(artifact.files, { artifact: 'acme/model/llama:v0' });
    expect(file.path).toBe('model-Q4_K_M.gguf');
    const result = await cache.ensureUrlFile({
      ...wandbFileDownload(artifact, file, { apiKey: FAKE_WANDB_KEY }),
      onProgress: (p) => seen.push(p.bytesDone),
    });
    expect(result).toEqual({ path: join(cacheDir, 'blobs', sha256(Q4)), sha256: sha256(Q4), size: Q4.length, cached: false });
    expect(await readFile(result.path)).toEqual(Q4);
    expect(seen.at(-1)).toBe(Q4.length);
    expect(fileGets().map((r) => `${r.route} ${r.status} ${r.authorization === basic(FAKE_WANDB_KEY) ? 'auth' : 'no-auth'}`)).toEqual([
      'download 302 auth', // W&B, with the key
      'storage 200 no-auth', // the bucket it redirects to never sees the key
    ]);
    expect((await readFile(join(cacheDir, 'index', `md5-${md5(Q4).digest('hex')}`), 'utf8')).trim()).toBe(sha256(Q4));
    expect(await readdir(join(cacheDir, 'tmp'))).toEqual([]);
  });

  it('serves the second resolve of the same artifact from the cache without any file request', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    const first = await fetchFile(cache, 'acme/model/llama:latest');
    expect(first.cached.cached).toBe(false);
    const before = fileGets().length;

    const again = await fetchFile(new ModelCache({ dir: cacheDir }), 'acme/model/llama:v1');
    expect(again.cached).toEqual({ ...first.cached, cached: true });
    expect(fileGets()).toHaveLength(before);
    expect(await new ModelCache({ dir: cacheDir }).lookupMd5(first.file.md5, first.file.size)).toEqual({ ...first.cached, cached: true });
    expect(await new ModelCache({ dir: cacheDir }).lookupMd5(first.file.md5, first.file.size + 1)).toBeUndefined();
  });

  it('fails a truncated transfer with DOWNLOAD_ERROR (retries off), then resumes it with a Range request', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    wandb.setFault({ type: 'truncate', afterBytes: 2000 }, { times: 1 });
    await expectCode(fetchFile(cache, 'acme/model/llama:latest', FAKE_WANDB_KEY, { retries: 0 }), 'WORKLOAD_INIT_DOWNLOAD_ERROR');
    const [partial] = await readdir(join(cacheDir, 'tmp'));
    expect(partial).toBe(`md5-${md5(SINGLE).digest('hex')}.partial`);
    const kept = (await stat(join(cacheDir, 'tmp', partial!))).size;
    expect(kept).toBeGreaterThan(0);

    const { cached } = await fetchFile(cache, 'acme/model/llama:latest');
    expect(cached).toMatchObject({ sha256: sha256(SINGLE), cached: false });
    expect(await readFile(cached.path)).toEqual(SINGLE);
    expect(wandb.requests.filter((r) => r.route === 'storage').at(-1)).toMatchObject({ range: `bytes=${kept}-`, status: 206 });
  });

  it('resumes a cut transfer by Range within one call when retries are on', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    wandb.setFault({ type: 'truncate', afterBytes: 2000 }, { times: 1 });
    const { cached } = await fetchFile(cache, 'acme/model/llama:latest');
    expect(cached).toMatchObject({ sha256: sha256(SINGLE), cached: false });
    expect(await readFile(cached.path)).toEqual(SINGLE);
    expect(wandb.requests.filter((r) => r.route === 'storage').at(-1)).toMatchObject({
      range: expect.stringMatching(/^bytes=\d+-$/),
      status: 206,
    });
  });

  it('rejects corrupt bytes by their md5 with DOWNLOAD_ERROR and keeps nothing', async () => {
    const cache = new ModelCache({ dir: cacheDir });
    wandb.setFault({ type: 'corrupt' });
    const err = await expectCode(fetchFile(cache, 'acme/model/llama:latest'), 'WORKLOAD_INIT_DOWNLOAD_ERROR');
    expect(err.message).toMatch(/model\.gguf from acme\/model\/llama:v1 failed its checksum check \(expected md5/);
    expect(err.message).not.toContain(cacheDir);
    expect(await readdir(join(cacheDir, 'blobs'))).toEqual([]);
    expect(await readdir(join(cacheDir, 'tmp'))).toEqual([]);
    expect(await readdir(join(cacheDir, 'index')).catch(() => [])).toEqual([]);
  });

  it('maps a rejected key on the file route to INVALID_TOKEN', async () => {
    const artifact = await resolve('acme/model/llama:latest');
    const file = pickModelFile(artifact.files);
    await expectCode(
      new ModelCache({ dir: cacheDir }).ensureUrlFile(wandbFileDownload(artifact, file, { apiKey: 'local-revoked' })),
      'WORKLOAD_INIT_INVALID_TOKEN_ERROR',
    );
    expect(fileGets().at(-1)).toMatchObject({ route: 'download', status: 401 });
  });

  it('shares one transfer between concurrent downloads of the same file', async () => {
    wandb.setFault({ type: 'slow', chunkBytes: 1000, delayMs: 5 });
    const artifact = await resolve('acme/model/llama:latest');
    const request = wandbFileDownload(artifact, pickModelFile(artifact.files), { apiKey: FAKE_WANDB_KEY });
    const [a, b] = await Promise.all([
      new ModelCache({ dir: cacheDir }).ensureUrlFile(request),
      new ModelCache({ dir: cacheDir }).ensureUrlFile(request),
    ]);
    expect(a).toEqual(b);
    expect(wandb.requests.filter((r) => r.route === 'storage')).toHaveLength(1);
  });
});

describe('pickModelFile', () => {
  const files = (...paths: string[]) => paths.map((path) => ({ path, size: 1 }));

  it('takes the only GGUF, or the preferred quantization among several', () => {
    expect(pickModelFile(files('config.json', 'model.gguf')).path).toBe('model.gguf');
    expect(pickModelFile(files('m-Q8_0.gguf', 'm-Q4_K_M.gguf', 'm-Q4_K.gguf', 'mmproj-m-f16.gguf')).path).toBe('m-Q4_K_M.gguf');
    expect(pickModelFile(files('m-Q8_0.gguf', 'm-Q4_K_M.gguf'), { quantPreference: ['Q8_0'] }).path).toBe('m-Q8_0.gguf');
  });

  it('works on the files of a resolved artifact', async () => {
    const resolved: ResolvedArtifact = await resolve('acme/model/llama:v0');
    expect(pickModelFile(resolved.files)).toBe(resolved.files.find((f) => f.path === 'model-Q4_K_M.gguf'));
  });

  it('explains why there is nothing to serve', () => {
    const other = (() => {
      try {
        pickModelFile(files('config.json', 'model.safetensors'), { artifact: 'acme/model/llama:v3' });
      } catch (err) {
        return err as ModelSourceError;
      }
    })();
    expect(other).toMatchObject({ code: 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR' });
    expect(other?.message).toMatch(/acme\/model\/llama:v3 contains safetensors weights/);
    expect(() => pickModelFile(files('a-00001-of-00002.gguf', 'a-00002-of-00002.gguf'))).toThrow(
      expect.objectContaining({ code: 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR' }),
    );
    expect(() => pickModelFile(files('README.md', 'config.json'))).toThrow(
      expect.objectContaining({ code: 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR' }),
    );
    expect(() => pickModelFile(files('m-IQ2_XS.gguf', 'm-IQ1_S.gguf'))).toThrow(
      expect.objectContaining({ code: 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR' }),
    );
  });
});
