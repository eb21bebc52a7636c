/**
 * Request ids: every answer names its request in `x-request-id` (a sane id the
 * client sent is kept), and an internal error — a bug, answered with a
 * message that says nothing — leaves exactly one log line, which names that
 * id, on REST, GraphQL (HTTP and WebSocket) and chat. GraphQL's masked error
 * carries the id in its extensions too.
 */
import { afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../support/app.js';
import { openSocket } from '../support/live-clients.js';
import type { SeededUser } from '../support/gateway.js';
import { startSecuredGateway, type SecuredGateway } from './harness.js';

let g: SecuredGateway;
let alice: SeededUser;

beforeAll(async () => {
  g = await startSecuredGateway();
  alice = await g.seed.user();
});

afterEach(() => {
  vi.restoreAllMocks();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function call(path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  return fetch(`${g.url}${path}`, {
    method: init.method ?? 'GET',
    headers: {
      authorization: `Bearer ${alice.key}`,
      ...(init.body !== undefined ? { 'content-type': 'application/json', accept: 'application/json' } : {}),
      ...init.headers,
    },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
}

/** The log lines that name the request id. */
const linesOf = (id: string) => g.logs.filter((line) => line.message.includes(id));

/** Makes every endpoint listing (REST and GraphQL) throw a bug. */
function breakListing(): TypeError {
  const bug = new TypeError('listing is broken (a bug)');
  vi.spyOn(g.services.endpoints, 'list').mockRejectedValue(bug);
  return bug;
}

describe('x-request-id', () => {
  test('every answer carries one: REST, GraphQL, chat, health, and a route that does not exist', async () => {
    const answers = [
      await call('/dedicated/beta/endpoint'),
      await call('/dedicated/beta/endpoint/nope'),
      await call('/graphql', { method: 'POST', body: { query: '{ me { user { id } } }' } }),
      await call('/dedicated/v1/chat/completions', { method: 'POST', body: { model: 'nope', messages: [] } }),
      await call('/healthz'),
      await call('/nowhere'),
    ];
    const ids = answers.map((a) => a.headers.get('x-request-id'));
    for (const id of ids) expect(id).toMatch(UUID);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test('a sane incoming id is kept; anything else is replaced', async () => {
    const kept = await call('/healthz', { headers: { 'x-request-id': 'edge-proxy:42.a_b-c' } });
    expect(kept.headers.get('x-request-id')).toBe('edge-proxy:42.a_b-c');
    for (const given of ['x'.repeat(129), 'has space', 'quote"d', '']) {
      const replaced = await call('/healthz', { headers: { 'x-request-id': given } });
      expect(replaced.headers.get('x-request-id'), given).toMatch(UUID);
    }
  });

  test('a WebSocket upgrade answers one too', async () => {
    const socket = new WebSocket(`${g.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws', {
      headers: { 'x-request-id': 'ws-upgrade-1' },
    });
    const headers = await new Promise<Record<string, unknown>>((resolve, reject) => {
      socket.once('upgrade', (response) => resolve(response.headers));
      socket.once('error', reject);
    });
    socket.close();
    expect(headers['x-request-id']).toBe('ws-upgrade-1');
  });
});

describe('an internal error is logged once, with the request id the client sees', () => {
  test('REST: a 500 that says nothing, and one log line naming the id', async () => {
    const bug = breakListing();
    const res = await call('/dedicated/beta/endpoint', { headers: { 'x-request-id': 'rest-bug-1' } });
    expect(res.status).toBe(500);
    expect(res.headers.get('x-request-id')).toBe('rest-bug-1');
    expect(await res.json()).toEqual({ error: { code: 'INTERNAL', message: 'internal error' } });
    expect(linesOf('rest-bug-1')).toEqual([{ message: expect.stringContaining('GET /dedicated/beta/endpoint'), error: bug }]);
    expect(g.logs.filter((line) => line.error === bug)).toHaveLength(1);
  });

  test('GraphQL, a field: masked, with the id in its extensions, and one log line naming it', async () => {
    const bug = breakListing();
    const res = await call('/graphql', {
      method: 'POST',
      body: { query: '{ endpoints { edges { node { id } } } }' },
      headers: { 'x-request-id': 'graphql-bug-1' },
    });
    expect(res.headers.get('x-request-id')).toBe('graphql-bug-1');
    const body = (await res.json()) as { errors: { message: string; extensions: Record<string, unknown> }[] };
    expect(body.errors).toHaveLength(1);
    expect(body.errors[0]).toMatchObject({
      message: 'Unexpected error.',
      extensions: { code: 'INTERNAL_SERVER_ERROR', requestId: 'graphql-bug-1' },
    });
    expect(JSON.stringify(body)).not.toContain('listing is broken');
    expect(linesOf('graphql-bug-1')).toEqual([{ message: expect.any(String), error: bug }]);
    expect(g.logs.filter((line) => line.error === bug)).toHaveLength(1);
  });

  test('GraphQL, the whole request (authentication throws): masked, and one log line naming the id', async () => {
    const bug = new TypeError('authentication is broken (a bug)');
    vi.spyOn(g.services.auth, 'authenticate').mockRejectedValue(bug);
    const res = await call('/graphql', {
      method: 'POST',
      body: { query: '{ me { user { id } } }' },
      headers: { 'x-request-id': 'graphql-bug-2' },
    });
    expect(res.status).toBe(500);
    const body = (await res.json()) as { errors: { message: string; extensions: Record<string, unknown> }[] };
    expect(body.errors[0]).toMatchObject({ message: 'Unexpected error.', extensions: { requestId: 'graphql-bug-2' } });
    expect(linesOf('graphql-bug-2')).toEqual([{ message: expect.any(String), error: bug }]);
    expect(g.logs.filter((line) => line.error === bug)).toHaveLength(1);
  });

  test('GraphQL over WebSocket: the socket’s request id, in the error and in one log line', async () => {
    const raw = await openSocket(g.url, { authorization: `Bearer ${alice.key}` });
    const bug = breakListing();
    raw.subscribe('1', '{ endpoints { edges { node { id } } } }');
    await waitFor('the answer', async () => raw.of('1').some((m) => m.type === 'complete' || m.type === 'error'), 5000);
    raw.socket.close();
    const next = raw.of('1').find((m) => m.type === 'next');
    const requestId = next?.payload.errors[0].extensions.requestId as string;
    expect(next?.payload.errors[0]).toMatchObject({ message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } });
    expect(requestId).toMatch(UUID);
    expect(linesOf(requestId)).toEqual([{ message: expect.any(String), error: bug }]);
    expect(g.logs.filter((line) => line.error === bug)).toHaveLength(1);
  });

  test('chat: a 500 in the OpenAI shape, and one log line naming the id', async () => {
    const bug = new TypeError('authentication is broken (a bug)');
    vi.spyOn(g.services.auth, 'authenticate').mockRejectedValue(bug);
    const res = await call('/dedicated/v1/chat/completions', {
      method: 'POST',
      body: { model: 'x', messages: [{ role: 'user', content: 'hi' }] },
      headers: { 'x-request-id': 'chat-bug-1' },
    });
    expect(res.status).toBe(500);
    expect(res.headers.get('x-request-id')).toBe('chat-bug-1');
    expect(await res.json()).toEqual({ error: { message: 'internal error', type: 'server_error', param: null, code: 'internal_error' } });
    expect(linesOf('chat-bug-1')).toEqual([{ message: expect.stringContaining('/dedicated/v1/chat/completions'), error: bug }]);
    expect(g.logs.filter((line) => line.error === bug)).toHaveLength(1);
  });

  test('a client’s mistake is not logged', async () => {
    const before = g.logs.length;
    await call('/dedicated/beta/endpoint', { method: 'POST', body: { name: '' } });
    await call('/graphql', { method: 'POST', body: { query: '{ endpoint(id: "nope") { id } }' } });
    expect(g.logs.length).toBe(before);
  });
});
