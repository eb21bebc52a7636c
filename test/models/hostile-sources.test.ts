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
import { resolveHubModel } from '../../src/models/hf-hub.js';
import { manifestDigest, parseManifest } from '../../src/models/wandb/manifest.js';

const SHA = 'a'.repeat(40);
let server: http.Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

/** Serves `handle` on a free port; answers its base URL. */
async function serve(handle: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<string> {
  server = http.createServer(handle);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
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

  test('an answer larger than 32 MiB is refused', async () => {
    const endpoint = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"sha":"${SHA}","pad":"${'p'.repeat(33 << 20)}"}`);
    });
    await expect(resolve(endpoint)).rejects.toThrow(/larger than 32 MiB/);
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
