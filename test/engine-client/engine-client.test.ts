/**
 * The engine client against a real HTTP server that answers as engines do,
 * and as broken ones do. Every call ends in a value or a rejection, never an
 * uncaught error (vitest fails a file on one): an answer abandoned half-read,
 * a health check answered 503 or too large, a request aborted mid-answer.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import {
  EngineAnswerTooLargeError,
  EngineClient,
  EngineStatusError,
  EngineUnreachableError,
} from '../../src/engine-client/engine-client.js';

let server: http.Server;
let address: string;
const client = new EngineClient({ healthTimeoutMs: 300 });
const seen: { authorization?: string | undefined; body?: string }[] = [];
/** How the server answers /health and the warm-up's chat, as the test sets it. */
let mode: 'ok' | '503' | 'huge' | 'slow' = 'ok';

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      seen.push({ authorization: req.headers.authorization, body });
      const path = req.url ?? '';
      if (path === '/health') {
        if (mode === '503') return void res.writeHead(503).end('loading');
        if (mode === 'huge') return void res.writeHead(200).end(`{"x":"${'a'.repeat(200_000)}"}`);
        if (mode === 'slow') return void setTimeout(() => res.writeHead(200).end('{}'), 2000);
        return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok","active":0}');
      }
      if (path === '/forever') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const timer = setInterval(() => res.write('data: {"x":1}\n\n'), 5);
        return void res.once('close', () => clearInterval(timer));
      }
      if (path === '/v1/chat/completions') return void res.writeHead(mode === '503' ? 503 : 200).end('{}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echoed: body.length }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  mode = 'ok';
});

afterAll(async () => {
  await client.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('health', () => {
  test('a 200 with JSON is the health; a 503, an answer over the bound, a slow one and an unreachable engine are undefined', async () => {
    const target = { address, token: 'tok' };
    expect(await client.health(target)).toEqual({ status: 'ok', active: 0 });
    expect(seen.at(-1)!.authorization).toBe('Bearer tok');
    for (const broken of ['503', 'huge', 'slow'] as const) {
      mode = broken;
      expect(await client.health(target), broken).toBeUndefined();
    }
    mode = 'ok';
    expect(await client.health(target)).toEqual({ status: 'ok', active: 0 });
    expect(await client.health({ address: 'http://127.0.0.1:9', token: null })).toBeUndefined();
    expect(await client.health({ address: null, token: null })).toBeUndefined();
    expect(await client.health({ address: 'http://[bad', token: null })).toBeUndefined();
  });
});

describe('post', () => {
  test('an answer abandoned half-read ends its request without an uncaught error', async () => {
    const answer = await client.post({ address, token: null }, '/forever', '{}', new AbortController().signal);
    expect(answer.status).toBe(200);
    expect(answer.contentType).toBe('text/event-stream');
    await new Promise((resolve) => answer.body.once('data', resolve));
    answer.body.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
  });

  test('a request aborted mid-answer rejects its reader with the abort, not an uncaught error', async () => {
    const stop = new AbortController();
    const answer = await client.post({ address, token: null }, '/forever', '{}', stop.signal);
    stop.abort();
    await expect(
      (async () => {
        for await (const _ of answer.body) void _;
      })(),
    ).rejects.toBeTruthy();
  });

  test('an unreachable engine rejects with EngineUnreachableError; a signal already aborted with its reason', async () => {
    await expect(
      client.post({ address: 'http://127.0.0.1:9', token: null }, '/x', '{}', new AbortController().signal),
    ).rejects.toBeInstanceOf(EngineUnreachableError);
    const reason = new Error('gone');
    await expect(client.post({ address, token: null }, '/x', '{}', AbortSignal.abort(reason))).rejects.toBe(reason);
  });

  test('postJson reads JSON up to its bound; past it, EngineAnswerTooLargeError', async () => {
    expect(await client.postJson({ address, token: null }, '/echo', { a: 1 }, new AbortController().signal, 1000)).toEqual({
      status: 200,
      body: { echoed: 7 },
    });
    await expect(client.postJson({ address, token: null }, '/forever', {}, new AbortController().signal, 1000)).rejects.toBeInstanceOf(
      EngineAnswerTooLargeError,
    );
  });

  test('warmUp resolves on a 200 and rejects with the status otherwise', async () => {
    await expect(client.warmUp({ address, token: null })).resolves.toBeUndefined();
    expect(JSON.parse(seen.at(-1)!.body!)).toMatchObject({ max_tokens: 1 });
    mode = '503';
    await expect(client.warmUp({ address, token: null })).rejects.toMatchObject({ status: 503 });
    await expect(client.warmUp({ address, token: null })).rejects.toBeInstanceOf(EngineStatusError);
  });
});

describe('keep-alive', () => {
  /** A server that keeps idle connections `keepAliveMs` (and says so); `connections()`: how many it accepted. */
  async function keepingServer(keepAliveMs: number) {
    let accepted = 0;
    const s = http.createServer((_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}'));
    s.keepAliveTimeout = keepAliveMs;
    s.on('connection', () => accepted++);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    return {
      address: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
      connections: () => accepted,
      close: async () => {
        s.closeAllConnections();
        await new Promise((resolve) => s.close(resolve));
      },
    };
  }

  test("an engine's Keep-Alive hint is followed, up to a bound: checks 4.5 s apart share one connection to an engine that keeps it 65 s, not to one that keeps it 5 s, nor past the bound", async () => {
    const long = await keepingServer(65_000);
    const short = await keepingServer(5_000);
    const bounded = await keepingServer(65_000);
    const own = new EngineClient();
    const capped = new EngineClient({ keepAliveMaxMs: 1000 });
    const checkAll = async () => {
      for (const s of [long, short]) expect(await own.health({ address: s.address })).toEqual({ status: 'ok' });
      expect(await capped.health({ address: bounded.address })).toEqual({ status: 'ok' });
    };
    try {
      await checkAll();
      await new Promise((resolve) => setTimeout(resolve, 4500));
      await checkAll();
      // Kept up to the hint less 2 s: 63 s (60 s at most) for the one, 3 s for the other; 1 s where that is the bound.
      expect(long.connections()).toBe(1);
      expect(short.connections()).toBe(2);
      expect(bounded.connections()).toBe(2);
    } finally {
      await Promise.all([own.close(), capped.close()]);
      await Promise.all([long.close(), short.close(), bounded.close()]);
    }
  });
});
