/**
 * close(graceMs) keeps its word while a client is still sending a request body: once the grace is
 * over, a request still reading its body is answered 503 (engine_shutting_down) and stops holding
 * close(). It used to wait for the body's end, which a client trickling one byte a second could put
 * off for as long as it liked, so a stopping replica never freed its model.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { getLlama, LlamaLogLevel, type Llama } from 'node-llama-cpp';
import { startEngineServer, type EngineServer } from '../../src/engine/server.js';
import { writeTinyGguf } from '../support/tiny-gguf.js';

let dir: string;
let llama: Llama;
let modelPath: string;
/** Each test closes an engine of its own; any left open are closed at the end. */
const engines: EngineServer[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'close-during-body-'));
  modelPath = (await writeTinyGguf(join(dir, 'tiny.gguf'))).path;
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
}, 60_000);

afterAll(async () => {
  await Promise.all(engines.map((engine) => engine.close(0)));
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function totalRequests(url: string): Promise<number> {
  const res = await fetch(`${url}/health`);
  return ((await res.json()) as { totalRequests: number }).totalRequests;
}

for (const path of ['/v1/chat/completions', '/tokenize']) {
  test(`close(100) finishes while a client is still sending a ${path} body, which gets a 503`, async () => {
    const engine = await startEngineServer({ llama, gpu: false, threads: 1, modelPath, contextSize: 256, maxBatchSize: 1 });
    engines.push(engine);
    const before = await totalRequests(engine.url);
    const socket = net.connect(engine.port, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('utf8')));
    const gone = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => {});
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"messages":`);
    // A byte now and then: the body never ends while the test runs.
    const trickle = setInterval(() => socket.write(' '), 100);
    try {
      if (path === '/v1/chat/completions') {
        // The request is counted once its route took it (and began reading its body).
        while ((await totalRequests(engine.url)) === before) await new Promise((resolve) => setTimeout(resolve, 20));
      } else {
        // /tokenize counts no request: a pause for the route to take it. Were it not taken yet, the draining engine
        // would refuse it with the same 503, and close() would not wait for it either.
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      const closed = engine.close(100).then(() => 'closed');
      // Generous for a loaded machine: without the fix close() waits for as long as the body keeps coming.
      const limit = new Promise((resolve) => setTimeout(() => resolve('still closing after 10 s'), 10_000));
      expect(await Promise.race([closed, limit])).toBe('closed');
      await gone;
      expect(answer).toMatch(/^HTTP\/1\.1 503 /);
      expect(answer).toContain('engine_shutting_down');
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  }, 30_000);
}
