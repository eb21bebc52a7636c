/**
 * The console's files as the gateway serves them (src/http/console-route.ts), on a real node:http server over a
 * build folder this test writes: a build replaced while the gateway runs, a file gone mid-build, odd ranges. None of
 * them may end the process (vitest fails a run on an uncaught exception).
 */
import { mkdir, mkdtemp, rm, unlink, utimes, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { consoleRoute } from '../../src/http/console-route.js';

let dir: string;
let server: http.Server;
let base: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'console-route-'));
  const route = consoleRoute(dir);
  server = http.createServer((req, res) => route(req, res, new URL(req.url!, 'http://x').pathname));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

/** Writes a build: index.html naming `asset`, stamped with its own modification time. */
async function build(asset: string, stamp: number): Promise<void> {
  await mkdir(path.join(dir, 'assets'), { recursive: true });
  await writeFile(path.join(dir, 'assets', asset), `console.log(${JSON.stringify(asset)});`.repeat(10));
  await writeFile(path.join(dir, 'index.html'), `<script src="/assets/${asset}"></script>`);
  await utimes(path.join(dir, 'index.html'), stamp, stamp);
}

test('a build replaced while serving: the old assets are 404s, the new ones served', async () => {
  await build('index-old.js', 1_000);
  expect((await fetch(`${base}/`)).status).toBe(200);
  expect((await fetch(`${base}/assets/index-old.js`)).status).toBe(200);
  // npm run build: the old asset deleted, a new one and a new page written.
  await unlink(path.join(dir, 'assets', 'index-old.js'));
  await build('index-new.js', 2_000);
  // An old page still open asks for its asset before anyone loads the new page.
  expect((await fetch(`${base}/assets/index-old.js`)).status).toBe(404);
  expect((await fetch(`${base}/assets/index-new.js`)).status).toBe(200);
});

test('a file gone between the listing and the read ends that answer, not the process', async () => {
  await build('index-a.js', 3_000);
  expect((await fetch(`${base}/assets/index-a.js`)).status).toBe(200);
  // Deleted with the page unchanged (a build half-way): the listing still names it.
  await unlink(path.join(dir, 'assets', 'index-a.js'));
  await expect(fetch(`${base}/assets/index-a.js`).then((r) => r.text())).rejects.toThrow();
  expect((await fetch(`${base}/`)).status).toBe(200);
});

test('every answer, an error too, carries the protective headers', async () => {
  await build('index-h.js', 5_000);
  for (const [method, target, status] of [
    ['GET', '/', 200],
    ['GET', '/assets/index-h.js', 200],
    ['GET', '/assets/nothing.js', 404],
    ['POST', '/', 405],
  ] as const) {
    const res = await fetch(`${base}${target}`, { method });
    expect(res.status, `${method} ${target}`).toBe(status);
    expect(res.headers.get('x-content-type-options'), `${method} ${target}`).toBe('nosniff');
    expect(res.headers.get('x-frame-options'), `${method} ${target}`).toBe('DENY');
    expect(res.headers.get('content-security-policy'), `${method} ${target}`).toContain("frame-ancestors 'none'");
  }
});

test('ranges are not honoured: every answer is the whole file', async () => {
  await build('index-r.js', 4_000);
  const whole = await (await fetch(`${base}/assets/index-r.js`)).text();
  for (const range of ['bytes=10-3', 'bytes=-5', 'bytes=0-1', 'bytes=x']) {
    const res = await fetch(`${base}/assets/index-r.js`, { headers: { range } });
    expect(res.status, range).toBe(200);
    expect(await res.text(), range).toBe(whole);
  }
});
