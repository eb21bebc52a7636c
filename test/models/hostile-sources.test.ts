/**
 * A hub or registry that answers as an attacker (or a broken server) would, on a real node:http server speaking
 * just enough of the hub's wire format: endless pages, huge and slow answers, bad sizes, long messages and names.
 * Each ends in a bounded error naming the problem, with nothing held past the bounds.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { download } from '../../src/models/blob-download.js';
import { BodyTimeoutError, readTextWithin } from '../../src/models/bounded-text.js';
import { ModelSourceError } from '../../src/models/errors.js';
import { resolveHubModel, treeListings } from '../../src/models/hf-hub.js';
import { FetchOrganizationDocument } from '../../src/models/wandb/generated.js';
import { manifestDigest, parseManifest } from '../../src/models/wandb/manifest.js';
import { resolveArtifact } from '../../src/models/wandb/registry-client.js';
import { graphqlCaller } from '../../src/models/wandb/wandb-http.js';

const SHA = 'a'.repeat(40);
/** The servers a test started (some start two), closed when it ends. */
const servers: http.Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Serves `handle` on a free port; answers its base URL. */
async function serve(handle: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<string> {
  const server = http.createServer(handle);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A hub whose model info is fine and whose tree is `tree(url)`. */
function hub(tree: (url: string, res: http.ServerResponse) => void) {
  return serve((req, res) => {
    if (req.url!.includes('/revision/'))
      return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ sha: SHA }));
    if (req.url!.includes('/tree/')) return tree(req.url!, res);
    res.writeHead(404).end();
  });
}

const resolve = (endpoint: string) => resolveHubModel({ endpoint, repo: 'org/model', retry: { retries: 0 } });
const json = (res: http.ServerResponse, body: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

describe('the hub', () => {
  test('a tree whose next page is one already read is refused, not paged forever', async () => {
    const endpoint = await hub((url, res) =>
      json(res, [{ type: 'file', path: `f${url.length}.txt`, size: 1 }], {
        link: `<${url.split('?')[0]}?recursive=true&expand=false>; rel="next"`,
      }),
    );
    await expect(resolve(endpoint)).rejects.toThrow(/unexpected pagination link/);
  });

  test('a tree of more than 100,000 files is refused with a message saying why (one page of 130,000 once threw a RangeError)', async () => {
    const many = Array.from({ length: 130_000 }, (_, i) => ({ type: 'file', path: `f${i}`, size: 1 }));
    const endpoint = await hub((_url, res) => json(res, many));
    await expect(resolve(endpoint)).rejects.toMatchObject({
      code: 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
      message: expect.stringContaining('more than 100000 files'),
    });
  });

  test.each([['"17"'], ['17.5'], ['-1']])('an LFS size of %s is an unexpected listing', async (size) => {
    const endpoint = await hub((_url, res) =>
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(`[{"type":"file","path":"m.gguf","size":1,"lfs":{"oid":"${'b'.repeat(64)}","size":${size}}}]`),
    );
    await expect(resolve(endpoint)).rejects.toThrow(/unexpected file listing/);
  });

  test('names and messages the hub chooses are bounded in what the owner is shown', async () => {
    const ggufs = Array.from({ length: 50 }, (_, i) => ({ type: 'file', path: `model-${i}-${'x'.repeat(300)}.gguf`, size: 1 }));
    const endpoint = await hub((_url, res) => json(res, ggufs));
    const error = (await resolve(endpoint).catch((e: unknown) => e)) as Error;
    expect(error.message).toContain('and 30 more');
    expect(error.message.length).toBeLessThan(20 * 210 + 400);
    const refusing = await serve((_req, res) => res.writeHead(403, { 'x-error-message': `no\t${'!'.repeat(15_000)}` }).end());
    const denied = (await resolve(refusing).catch((e: unknown) => e)) as Error;
    expect(denied.message).toMatch(/denied access to org\/model \(403: no !{10}/);
    expect(denied.message.length).toBeLessThan(400);
  });

  test('a tree that links a new page after every page is cut at 1,000 pages', async () => {
    let pages = 0;
    const endpoint = await hub((url, res) =>
      json(res, [], { link: `<${url.split('?')[0]}?recursive=true&cursor=${++pages}>; rel="next"` }),
    );
    await expect(resolve(endpoint)).rejects.toMatchObject({
      code: 'WORKLOAD_INIT_HF_WANDB_API_ERROR',
      message: expect.stringContaining('more than 1000 pages'),
    });
    expect(pages).toBe(1000);
  });

  test('a tree of pages padded with junk is cut at 64 MiB in all, and the junk is not kept', async () => {
    let pages = 0;
    const junk = 'j'.repeat(3 << 20);
    const endpoint = await hub((url, res) =>
      json(res, [{ type: 'file', path: `f${++pages}.txt`, size: 1, junk }], { link: `<${url.split('?')[0]}?cursor=${pages}>; rel="next"` }),
    );
    await expect(resolve(endpoint)).rejects.toThrow(/listing of org\/model runs to more than 64 MiB/);
    expect(pages).toBeLessThanOrEqual(22); // 64 MiB of 3 MiB pages, the last one read only in part

    const listings = treeListings();
    const padded = await hub((_url, res) =>
      json(res, [{ type: 'file', path: 'm.gguf', size: 1, lfs: { oid: 'b'.repeat(64), size: 9, junk }, junk }]),
    );
    await resolveHubModel({ endpoint: padded, repo: 'org/model', retry: { retries: 0 }, listings }).catch(() => {}); // its HEAD is refused
    expect([...listings.values()]).toEqual([[{ type: 'file', path: 'm.gguf', size: 1, lfs: { oid: 'b'.repeat(64), size: 9 } }]]);
  });

  test.each([
    ['longer than 1024 characters', `${'n'.repeat(8 << 20)}.gguf`],
    ['outside the repository', '../../other/model/resolve/main/model.gguf'],
    ['outside the repository', 'sub/../../model.gguf'],
    ['outside the repository', '/etc/model.gguf'],
  ])('a listed path %s is refused at resolution, and named within bounds', async (why, path) => {
    const endpoint = await hub((_url, res) => json(res, [{ type: 'file', path, size: 1 }]));
    const error = (await resolve(endpoint).catch((e: unknown) => e)) as ModelSourceError;
    expect(error).toBeInstanceOf(ModelSourceError);
    expect(error.code).toBe('WORKLOAD_INIT_HF_WANDB_API_ERROR');
    expect(error.message).toContain(`The hub listed a path ${why} in org/model`);
    expect(error.message.length).toBeLessThan(400);
  });

  test('a resolution ends at its deadline, however the hub stalls; a cancellation keeps its own reason', async () => {
    const endpoint = await serve(() => {}); // takes every request and never answers
    const started = performance.now();
    await expect(resolveHubModel({ endpoint, repo: 'org/model', deadlineMs: 300 })).rejects.toMatchObject({
      code: 'WORKLOAD_INIT_HF_WANDB_API_ERROR',
      message: 'Resolving org/model@main on the hub took longer than 0.3 s; the hub is too slow.',
    });
    expect(performance.now() - started).toBeLessThan(5000);
    const cancelled = new AbortController();
    const pending = resolveHubModel({ endpoint, repo: 'org/model', deadlineMs: 60_000, signal: cancelled.signal });
    cancelled.abort(new Error('endpoint deleted'));
    await expect(pending).rejects.toThrow('endpoint deleted');
  });

  test('an answer larger than 32 MiB is refused', async () => {
    const endpoint = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"sha":"${SHA}","pad":"${'p'.repeat(33 << 20)}"}`);
    });
    await expect(resolve(endpoint)).rejects.toThrow(/larger than 32 MiB/);
  });
});

describe('W&B', () => {
  const ctx = { label: 'acme/model/llama:v1', org: 'acme', registry: 'model', keySent: true, host: 'w&b' };

  test('a GraphQL answer that never ends is refused past 32 MiB, not read whole', async () => {
    let sent = 0;
    const baseUrl = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"data":{"organization":null},"junk":[');
      const chunk = `"${'x'.repeat(1 << 20)}",`;
      const pump = () => {
        while (!res.destroyed && res.write(chunk)) sent += chunk.length;
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    await expect(resolveArtifact('acme/model/llama:v1', { baseUrl, apiKey: 'k', retry: { retries: 0 } })).rejects.toMatchObject({
      code: 'WORKLOAD_INIT_HF_WANDB_API_ERROR',
      message: "W&B's answer while looking up the organization of acme/model/llama:v1 is larger than 32 MiB.",
    });
    expect(sent).toBeLessThan(200 << 20);
  });

  test('at most 20 of the GraphQL errors of an answer are shown, each cut to 200 characters', async () => {
    const errors = Array.from({ length: 20_000 }, (_, i) => ({ message: `error number ${i} `.padEnd(300, 'x') }));
    const baseUrl = await serve((_req, res) => json(res, { data: null, errors }));
    const error = (await resolveArtifact('acme/model/llama:v1', { baseUrl, apiKey: 'k', retry: { retries: 0 } }).catch(
      (e: unknown) => e,
    )) as Error;
    expect(error).toMatchObject({ code: 'WORKLOAD_INIT_HF_WANDB_API_ERROR' });
    expect(error.message).toMatch(
      /^W&B answered with an error while looking up acme\/model\/llama:v1: error number 0 x+…, error number 1 /,
    );
    expect(error.message).toMatch(/error number 19 x+… and 19980 more\.$/);
    expect(error.message.length).toBeLessThan(20 * 210 + 200);
  });

  test('a GraphQL answer that drips is given up at its time bound, and retried', async () => {
    let requests = 0;
    const baseUrl = await serve((_req, res) => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/json' }).write('{"data":');
      const drip = setInterval(() => res.write(' '), 20);
      res.on('close', () => clearInterval(drip));
    });
    const call = graphqlCaller(
      baseUrl,
      'k',
      ctx,
      { policy: { retries: 1, baseDelayMs: 1, maxDelayMs: 1 } },
      { maxBytes: 1 << 20, timeoutMs: 200 },
    );
    await expect(call(FetchOrganizationDocument, { org: 'acme' }, 'looking up the organization of')).rejects.toMatchObject({
      code: 'WORKLOAD_INIT_HF_WANDB_API_ERROR',
      message: expect.stringMatching(
        /answer while looking up the organization of acme\/model\/llama:v1 came too slowly .*gave up after 2 attempts/,
      ),
    });
    expect(requests).toBe(2);
  });
});

describe('readTextWithin', () => {
  test('stops at its byte bound, and at its time bound for a body that drips', async () => {
    const base = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (req.url === '/big') return res.end('x'.repeat(1000));
      const drip = setInterval(() => res.write('x'), 20);
      res.on('close', () => clearInterval(drip));
    });
    expect(await readTextWithin(await fetch(`${base}/big`), { maxBytes: 100, timeoutMs: 5000 })).toBeUndefined();
    expect(await readTextWithin(await fetch(`${base}/big`), { maxBytes: 1000, timeoutMs: 5000 })).toHaveLength(1000);
    await expect(readTextWithin(await fetch(`${base}/drip`), { maxBytes: 1 << 20, timeoutMs: 200 })).rejects.toBeInstanceOf(
      BodyTimeoutError,
    );
  });
});

describe('a W&B manifest', () => {
  const ctx = { label: 'team/project/model:v0' } as never;
  const manifest = (contents: string) =>
    JSON.parse(`{"version":1,"storagePolicy":"wandb-storage-policy-v1","contents":${contents}}`) as unknown;

  test('a file named __proto__ is a file like any other, and counts in the digest', () => {
    const parsed = parseManifest(manifest('{"__proto__":{"digest":"x"},"a":{"digest":"y"}}'), ctx);
    expect(Object.keys(parsed.contents).sort()).toEqual(['__proto__', 'a']);
    expect(manifestDigest(parsed.contents)).not.toBe(manifestDigest(parseManifest(manifest('{"a":{"digest":"y"}}'), ctx).contents));
  });

  test('more than 100,000 files are refused', () => {
    const entries = Array.from({ length: 100_001 }, (_, i) => `"f${i}":{"digest":"d"}`).join(',');
    expect(() => parseManifest(manifest(`{${entries}}`), ctx)).toThrow(/more than 100000 files/);
  });
});

describe('a model download', () => {
  test('one that falls below its minimum pace fails that attempt (retrying resumes it), rather than hanging', async () => {
    const base = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': '100000' });
      const drip = setInterval(() => res.write('x'), 20);
      res.on('close', () => clearInterval(drip));
    });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pace-'));
    try {
      const started = performance.now();
      const failure = await download(
        {
          key: 'k',
          size: 100_000,
          url: `${base}/blob`,
          headers: {},
          label: 'org/model/m.gguf',
          source: 'the hub',
          responseError: () => new ModelSourceError('WORKLOAD_INIT_DOWNLOAD_ERROR', 'refused'),
          retry: { policy: { retries: 0, baseDelayMs: 1, maxDelayMs: 1, maxTimeMs: 1 } },
          minPace: { bytes: 10_000, ms: 300 },
        },
        path.join(dir, 'partial'),
      ).catch((e: unknown) => e);
      expect(String(failure)).toMatch(/fell below 10000 bytes in 0.3 s after \d+ of 100000 bytes; retrying resumes it/);
      expect(performance.now() - started).toBeLessThan(5000);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
