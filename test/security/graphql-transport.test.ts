/**
 * What reaches GraphQL over HTTP, and how: a POST's key is checked before its
 * body is read, bodies are bounded, every subscription goes through the
 * counted and watched transports (never yoga's own streams), one key holds a
 * bounded number of subscriptions, slow clients are cut, and an Upgrade other
 * than WebSocket is served as the plain request it also is.
 */
import net from 'node:net';
import { beforeAll, describe, expect, test } from 'vitest';
import { openSocket, openSse } from '../support/live-clients.js';
import { waitFor } from '../support/app.js';
import type { SeededUser } from '../support/gateway.js';
import { parseResponses, rawExchange, rawRequest, startSecuredGateway, type SecuredGateway } from './harness.js';

const STATUS = 'subscription($id: ID!) { endpointStatus(endpointId: $id) { status { status } } }';
const EVENTS = 'subscription($p: ID!) { endpointEvents(projectId: $p) { id type } }';
const KEY_QUOTA = 3;

let t: SecuredGateway;
let alice: SeededUser;
let aliceProject: string;

beforeAll(async () => {
  t = await startSecuredGateway({ userMaxSubscriptions: KEY_QUOTA, requestTimeoutMs: 1500, headersTimeoutMs: 1000 });
  alice = await t.seed.user();
  aliceProject = (await alice.project()).id;
});

/**
 * Sends a request head, then `sent` bytes of a body announced much larger, and reads what comes back until the
 * server closes (or, with `untilHead`, until an answer's head has come).
 */
function partialBody(headers: Record<string, string>, announced: number, sent: number, { path = '/graphql', untilHead = false } = {}) {
  return new Promise<{ raw: string; ms: number; closed: boolean }>((resolve) => {
    const socket = net.connect(t.port, '127.0.0.1');
    const t0 = performance.now();
    let raw = '';
    const done = (closed: boolean) => resolve({ raw, ms: performance.now() - t0, closed });
    const timer = setTimeout(() => {
      socket.destroy();
      done(false);
    }, 5000);
    socket.on('data', (chunk) => {
      raw += chunk.toString('latin1');
      if (untilHead && raw.includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      done(true);
    });
    const head = Object.entries({ host: 'x', 'content-type': 'application/json', 'content-length': String(announced), ...headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n{"query":"{ __typename }","variables":{"x":"${'a'.repeat(sent)}`);
  });
}

/** A POST of a JSON body with alice's key, over its own connection. */
const postWithKey = (path: string, body: string) =>
  rawRequest(t.port, 'POST', path, { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' }, body);

describe('POST /graphql', () => {
  test('without a valid key, the answer comes before the body is read, and the connection closes', async () => {
    for (const headers of [{}, { authorization: 'Bearer not-a-key' }] as Record<string, string>[]) {
      const { raw, ms, closed } = await partialBody(headers, 200_000_000, 64 * 1024);
      const [answer] = parseResponses(raw);
      expect(answer?.status, raw.slice(0, 200)).toBe(401);
      expect(JSON.parse(answer!.body).errors[0].extensions.code).toBe('UNAUTHENTICATED');
      expect(answer!.headers.connection).toBe('close');
      expect(closed).toBe(true);
      expect(ms).toBeLessThan(3000);
    }
  });

  test('with a key, a body over 1 MiB is a 413 and nothing runs', async () => {
    const body = JSON.stringify({ query: '{ __typename }', variables: { x: 'a'.repeat(2 << 20) } });
    const answer = await postWithKey('/graphql', body);
    expect(answer.status).toBe(413);
    const [error] = JSON.parse(answer.body).errors;
    expect(error.message).toMatch(/exceeds 1048576 bytes/);
    // The shape of every other GraphQL 4xx: its code.
    expect(error.extensions).toMatchObject({ code: 'INVALID_ARGUMENT' });
    // Under the limit it is served.
    const small = await rawRequest(
      t.port,
      'POST',
      '/graphql',
      { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'application/json' },
      JSON.stringify({ query: '{ __typename }' }),
    );
    expect(small.status).toBe(200);
    expect(JSON.parse(small.body)).toEqual({ data: { __typename: 'Query' } });
  });

  test("a subscription is never one of yoga's own streams: JSON-only or multipart clients get a 400 naming the transports", async () => {
    const body = JSON.stringify({ query: EVENTS, variables: { p: aliceProject } });
    for (const accept of ['application/json', 'multipart/mixed', 'application/graphql-response+json']) {
      const answer = await rawExchange(
        t.port,
        `POST /graphql HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${alice.key}\r\nContent-Type: application/json\r\nAccept: ${accept}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        3000,
      );
      // Answered and ended: not a stream left open (yoga itself refuses multipart with a 406).
      expect(answer, accept).toMatch(/^HTTP\/1\.1 40[06] /);
      if (!accept.startsWith('multipart')) expect(answer, accept).toContain('subscriptions are served over the WebSocket');
      expect(answer).not.toContain('event: next');
    }
    // With Accept */* (curl's), it is the gateway's own SSE stream.
    const posted = await openSse(t.url, alice.key, EVENTS, { p: aliceProject }, { accept: '*/*' }, 'POST');
    expect(posted.status).toBe(200);
    posted.close();
  });
});

describe('/graphql/ and below', () => {
  test('are no second GraphQL endpoint: a 404 without the key check or the body limit being skipped', async () => {
    // Anonymous, with a huge body announced: answered at once, the body unread.
    for (const path of ['/graphql/', '/graphql/x']) {
      const { raw, ms } = await partialBody({}, 200_000_000, 64 * 1024, { path, untilHead: true });
      expect(raw, path).toMatch(/^HTTP\/1\.1 404 /);
      expect(ms, path).toBeLessThan(3000);
    }
    // With a key and a valid operation: still not served there.
    const body = JSON.stringify({ query: '{ __typename }' });
    const answer = await postWithKey('/graphql/', body);
    expect(answer.status).toBe(404);
    expect(answer.body).not.toContain('__typename');
    expect((await rawRequest(t.port, 'GET', '/graphql/?query=%7B__typename%7D', { authorization: `Bearer ${alice.key}` })).status).toBe(
      404,
    );
  });
});

describe('Expect: 100-continue', () => {
  /** Sends the head; sends the body only after a `100 Continue`; reads until the server closes or 3 s pass. */
  const expectContinue = (path: string, headers: Record<string, string>, body: string) =>
    new Promise<string>((resolve) => {
      const socket = net.connect(t.port, '127.0.0.1');
      let raw = '';
      let sent = false;
      const timer = setTimeout(() => socket.destroy(), 3000);
      socket.on('data', (chunk) => {
        raw += chunk.toString('latin1');
        if (!sent && raw.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
          sent = true;
          socket.write(body);
        }
      });
      socket.on('error', () => {});
      socket.on('close', () => {
        clearTimeout(timer);
        resolve(raw);
      });
      const head = Object.entries({
        host: 'x',
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
        expect: '100-continue',
        ...headers,
      })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`);
    });

  test('a request refused before its body (no key) gets its final answer without a 100 Continue, and the connection closes', async () => {
    // (Chat reads its body while the key is checked, so it asks for it at once.)
    for (const path of ['/graphql', '/dedicated/beta/endpoint']) {
      const raw = await expectContinue(path, {}, JSON.stringify({ query: '{ __typename }' }));
      expect(raw, path).toMatch(/^HTTP\/1\.1 401 /);
      expect(raw, path).not.toContain('100 Continue');
      expect(parseResponses(raw)[0]!.headers.connection, path).toBe('close');
    }
  });

  test('with a key, the body is asked for (100 Continue) once the key is checked, and served', async () => {
    const raw = await expectContinue(
      '/graphql',
      { authorization: `Bearer ${alice.key}`, connection: 'close' },
      JSON.stringify({ query: '{ __typename }' }),
    );
    expect(raw).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect(raw).toContain('{"data":{"__typename":"Query"}}');
  });
});

describe('one user holds at most USER_MAX_SUBSCRIPTIONS subscriptions, whatever keys they use', () => {
  test('over SSE and WebSocket together; one more is refused with RESOURCE_EXHAUSTED, and a place freed is taken again', async () => {
    const bob = await t.seed.user();
    const bobProject = (await bob.project()).id;
    const first = await openSse(t.url, bob.key, EVENTS, { p: bobProject });
    const posted = await openSse(t.url, bob.key, EVENTS, { p: bobProject }, {}, 'POST');
    expect([first.status, posted.status]).toEqual([200, 200]);
    const ws = await openSocket(t.url, { authorization: `Bearer ${bob.key}` });
    ws.subscribe('a', EVENTS, { p: bobProject });
    ws.subscribe('b', EVENTS, { p: bobProject });
    await waitFor('the fourth operation to be refused', async () => ws.of('b').length > 0, 5000);
    expect(ws.of('a')).toEqual([]);
    expect(ws.of('b')[0]).toMatchObject({ type: 'error', payload: [{ extensions: { code: 'RESOURCE_EXHAUSTED' } }] });
    expect(ws.of('b')[0]!.payload[0].message).toBe(
      `too many subscriptions open for this user (all their API keys): at most ${KEY_QUOTA} at once; end one first`,
    );
    // Another of bob's keys counts against the same places: making keys is no way around the cap.
    const second = await t.services.identity.createApiKey('system', { name: 'second', user: bob.user.id });
    if (second.type !== 'ok') throw new Error(second.error.message);
    const sse = await openSse(t.url, second.value.secret, EVENTS, { p: bobProject });
    expect(sse.status).toBe(429);
    // Another user is not held back by bob's.
    const other = await openSse(t.url, alice.key, STATUS, { id: 'ep_none' });
    expect(other.status).toBe(200);
    other.close();

    // Completing an operation frees its place: a new one is served.
    ws.send({ id: 'a', type: 'complete' });
    await new Promise((r) => setTimeout(r, 200));
    ws.subscribe('c', EVENTS, { p: bobProject });
    await new Promise((r) => setTimeout(r, 300));
    expect(ws.of('c')).toEqual([]);
    // Closing a stream frees its place too.
    first.close();
    await waitFor(
      'the place of the closed stream',
      async () => (await openSse(t.url, bob.key, EVENTS, { p: bobProject })).status === 200,
      3000,
    );
    ws.socket.close();
    posted.close();
  });
});

describe('slow and odd connections', () => {
  test('a body that trickles in is cut with a 408 once the request timeout passes', async () => {
    const { raw, ms, closed } = await partialBody({ authorization: `Bearer ${alice.key}` }, 10_000, 10);
    expect(closed).toBe(true);
    expect(parseResponses(raw)[0]?.status).toBe(408);
    expect(ms).toBeGreaterThan(1000);
    expect(ms).toBeLessThan(4900);
  });

  test('Upgrade: h2c (curl --http2) is served as plain HTTP/1.1; with a body it is a JSON 400 naming the header', async () => {
    const upgrade = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n';
    const [health] = parseResponses(await rawExchange(t.port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${upgrade}\r\n`, 3000));
    expect(health?.status).toBe(200);
    expect(JSON.parse(health!.body)).toEqual({ status: 'ok' });
    expect(health!.headers['x-request-id']).toMatch(/\S/);
    const [list] = parseResponses(
      await rawExchange(
        t.port,
        `GET /dedicated/beta/endpoint HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.key}\r\n${upgrade}\r\n`,
        3000,
      ),
    );
    expect(list?.status).toBe(200);
    expect(JSON.parse(list!.body)).toHaveProperty('data');
    const [posted] = parseResponses(
      await rawExchange(t.port, `POST /dedicated/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n${upgrade}\r\n{}`, 3000),
    );
    expect(posted?.status).toBe(400);
    expect(JSON.parse(posted!.body).error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { rule: 'upgrade' } });
    // A WebSocket anywhere but /graphql is a JSON 404.
    const [elsewhere] = parseResponses(
      await rawExchange(
        t.port,
        'GET /healthz HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
        3000,
      ),
    );
    expect(elsewhere?.status).toBe(404);
    expect(JSON.parse(elsewhere!.body).error.code).toBe('NOT_FOUND');
  });

  test('subscriptions served over an h2c upgrade give their places back when they end', async () => {
    const carol = await t.seed.user();
    const upgrade = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n';
    const target = `/graphql?query=${encodeURIComponent(STATUS)}&variables=${encodeURIComponent(JSON.stringify({ id: 'ep_none' }))}`;
    // More than the key's quota, one after another: each ends (NOT_FOUND) and must free its place.
    for (let i = 0; i < KEY_QUOTA + 2; i++) {
      const raw = await rawExchange(
        t.port,
        `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${carol.key}\r\nAccept: text/event-stream\r\n${upgrade}\r\n`,
        3000,
      );
      expect(raw, raw.slice(0, 300)).toMatch(/^HTTP\/1\.1 200/);
      expect(raw).toContain('event: complete');
    }
    const after = await openSse(t.url, carol.key, STATUS, { id: 'ep_none' });
    expect(after.status).toBe(200);
    after.close();
  });
});

describe('compressed bodies', () => {
  test('Content-Encoding: gzip is a 415 naming the header on GraphQL, REST and chat, not "must be valid JSON"', async () => {
    const { gzipSync } = await import('node:zlib');
    const send = (path: string, json: unknown) =>
      rawRequest(
        t.port,
        'POST',
        path,
        { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
        gzipSync(JSON.stringify(json)).toString('latin1'),
      );
    const graphql = await send('/graphql', { query: '{ __typename }' });
    expect(graphql.status).toBe(415);
    expect(graphql.body).toContain('Content-Encoding');
    const rest = await send('/dedicated/beta/endpoint', { name: 'x' });
    expect(rest.status).toBe(415);
    expect(JSON.parse(rest.body).error.details.fields).toEqual([
      { field: 'Content-Encoding', message: 'is not supported (got "gzip"): send the body uncompressed' },
    ]);
    const chat = await send('/dedicated/v1/chat/completions', { model: 'x', messages: [] });
    expect(chat.status).toBe(415);
    expect(JSON.parse(chat.body).error.message).toContain('Content-Encoding');
  });
});

describe('SSE subscriptions that fail before their stream', () => {
  test('variables that do not coerce: one next event with the error, then complete', async () => {
    const posted = await openSse(t.url, alice.key, STATUS, { id: null }, {}, 'POST');
    expect(posted.status).toBe(200);
    await waitFor('the stream to end', async () => posted.ended, 3000);
    expect(posted.events.map((e) => e.event)).toEqual(['next', 'complete']);
    expect(posted.events[0]!.data.errors[0].message).toMatch(/\$id/);
    expect(posted.events[0]!.data.errors[0].extensions ?? {}).not.toHaveProperty('http');
  });
});
