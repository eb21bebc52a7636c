/**
 * Hostile request targets over raw sockets: every target that is not a path is
 * a 400 naming the rule, and the process keeps serving. A handler that throws
 * or rejects is a masked 500 and a log line, never a crash.
 */
import { beforeAll, expect, test } from 'vitest';
import { parseRequestTarget } from '../../src/http/request-target.js';
import { parseResponses, rawExchange, rawGet, startSecuredGateway, type SecuredGateway } from './harness.js';

let t: SecuredGateway;

beforeAll(async () => {
  t = await startSecuredGateway();
});

async function expectServing(): Promise<void> {
  const health = await rawGet(t.port, '/healthz');
  expect(health.status).toBe(200);
  expect(JSON.parse(health.body)).toEqual({ status: 'ok' });
}

const REFUSED: [target: string, rule: string][] = [
  ['//', 'origin-form'],
  ['//[', 'origin-form'],
  ['//a%20b/x', 'origin-form'],
  ['//h:99999/', 'origin-form'],
  ['//evil.example/graphql', 'origin-form'],
  ['http://evil.example/graphql', 'origin-form'],
  ['HTTP://127.0.0.1/healthz', 'origin-form'],
  ['*', 'origin-form'],
  ['/dedicated/beta/endpoint/a%zzb', 'percent-encoding'],
  ['/dedicated/beta/endpoint/%', 'percent-encoding'],
  ['/dedicated/beta/endpoint/%ed%a0%80', 'percent-encoding'],
  ['/dedicated/beta/endpoint/%ff', 'percent-encoding'],
  ['/healthz?q=%zz', 'percent-encoding'],
  ['/\\evil.example/x', 'path-characters'],
  ['/graphql/[', 'path-characters'],
  ['/dedicated/beta/endpoint/a"b', 'path-characters'],
  ['/graphql/../healthz', 'dot-segments'],
  ['/dedicated/%2e%2e/graphql', 'dot-segments'],
  ['/dedicated/./beta/endpoint', 'dot-segments'],
];

test.each(REFUSED)('%s is a 400 naming rule %s, and the process keeps serving', async (target, rule) => {
  const response = await rawGet(t.port, target);
  expect(response.status, response.body).toBe(400);
  expect(response.headers['content-type']).toContain('application/json');
  const body = JSON.parse(response.body);
  expect(body.error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { rule } });
  expect(body.error.message).toMatch(rule === 'origin-form' ? /origin-form/ : /./);
  await expectServing();
});

test('every method: OPTIONS, POST and DELETE with a target that is not a path are 400 too', async () => {
  for (const method of ['OPTIONS', 'POST', 'DELETE', 'PUT']) {
    const response = await rawGet(t.port, '//', { 'content-length': '0' }, method);
    expect(response.status, method).toBe(400);
  }
  await expectServing();
});

test('a Host header that is not a host is a 400 naming the rule', async () => {
  for (const host of ['[', 'h:99999', 'a b', 'evil.example/path', 'x@y:1:2']) {
    const response = await rawGet(t.port, '/healthz', { host });
    expect(response.status, host).toBe(400);
    expect(JSON.parse(response.body).error.details).toEqual({ rule: 'host' });
  }
  // The GraphQL route builds a URL from Host: a bad one must not reach it.
  const graphql = await rawGet(t.port, '/graphql?query=%7B__typename%7D', { host: '[' });
  expect(graphql.status).toBe(400);
  await expectServing();
});

test('WebSocket upgrades and CONNECT with targets that are not paths are refused, and the process keeps serving', async () => {
  const upgrade = (target: string) =>
    rawExchange(
      t.port,
      `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n`,
      2000,
    );
  for (const target of ['//', '//[', '//h:99999/graphql', 'http://evil.example/graphql', '/graphql/../graphql', '/x%zz']) {
    expect(await upgrade(target), target).toMatch(/^HTTP\/1\.1 4\d\d/);
  }
  // The real path still upgrades.
  expect(await upgrade('/graphql')).toMatch(/^HTTP\/1\.1 101/);
  const connect = await rawExchange(t.port, 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n', 2000);
  expect(connect).not.toMatch(/^HTTP\/1\.1 2/);
  // CONNECT with a path is no proxy request either: a 405 that says so, not a connection closed unanswered.
  const connectPath = await rawExchange(
    t.port,
    'CONNECT /dedicated/beta/endpoint/%% HTTP/1.1\r\nHost: gateway\r\ncontent-length: 2\r\n\r\n-0',
    2000,
  );
  expect(connectPath).toMatch(/^HTTP\/1\.1 405 /);
  expect(connectPath).toContain('CONNECT is not supported');
  await expectServing();
});

test('a refused target on a keep-alive connection leaves the connection serving the next request', async () => {
  const host = `127.0.0.1:${t.port}`;
  const raw = await rawExchange(
    t.port,
    `GET //[ HTTP/1.1\r\nHost: ${host}\r\n\r\nGET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
  );
  const [first, second] = parseResponses(raw);
  expect(first?.status).toBe(400);
  expect(second?.status).toBe(200);
});

test('targets Node itself refuses get the same JSON 400, then the connection closes', async () => {
  for (const target of ['evil.example:443', 'graphql', 'a b']) {
    const raw = await rawExchange(t.port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    const [response] = parseResponses(raw);
    expect(response?.status, target).toBe(400);
    expect(JSON.parse(response!.body).error).toMatchObject({ code: 'INVALID_ARGUMENT' });
  }
  await expectServing();
});

test('a hundred hostile targets in a row, pipelined on one connection, then a normal request', async () => {
  const host = `127.0.0.1:${t.port}`;
  // Only targets that reach the server's handler: one Node's parser refuses closes the connection (previous test).
  const ours = REFUSED.map(([target]) => target).filter(
    (target) => target.startsWith('/') || target.startsWith('http') || target.startsWith('HTTP') || target === '*',
  );
  const targets = Array.from({ length: 100 }, (_, i) => ours[i % ours.length]!);
  const raw = await rawExchange(
    t.port,
    targets.map((target) => `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n\r\n`).join('') +
      `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
  );
  const responses = parseResponses(raw);
  expect(responses).toHaveLength(101);
  expect(responses.slice(0, 100).every((r) => r.status === 400)).toBe(true);
  expect(responses[100]!.status).toBe(200);
});

test('well-formed targets still route: paths with escapes, queries, REST and GraphQL', async () => {
  const alice = await t.seed.user();
  const auth = { authorization: `Bearer ${alice.key}` };
  const missing = await rawGet(t.port, '/dedicated/beta/endpoint/no%20such%2Fid', auth);
  expect(missing.status).toBe(404);
  expect(JSON.parse(missing.body).error.code).toBe('NOT_FOUND');
  const graphql = await rawGet(t.port, `/graphql?query=${encodeURIComponent('{ me { user { id } } }')}`, {
    ...auth,
    accept: 'application/json',
  });
  expect(graphql.status).toBe(200);
  expect(JSON.parse(graphql.body).data.me.user.id).toBe(alice.user.id);
  const unknown = await rawGet(t.port, '/nowhere?x=1');
  expect(unknown.status).toBe(404);
  // A query with characters clients often leave raw (RFC 3986 wants them escaped) is still read.
  const raw = await rawGet(t.port, `/graphql?query={__typename}`, { ...auth, accept: 'application/json' });
  expect(raw.status).toBe(200);
  expect(JSON.parse(raw.body)).toEqual({ data: { __typename: 'Query' } });
});

test('a handler that rejects is a masked 500 and a log line; the process keeps serving', async () => {
  const authenticate = t.services.auth.authenticate;
  t.services.auth.authenticate = () => Promise.reject(new Error('secret detail: database password is hunter2'));
  try {
    const body = JSON.stringify({
      query: 'subscription($id: ID!) { endpointStatus(endpointId: $id) { status { status } } }',
      variables: { id: 'x' },
    });
    const host = `127.0.0.1:${t.port}`;
    const [answer] = parseResponses(
      await rawExchange(
        t.port,
        `POST /graphql HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\nAuthorization: Bearer x\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      ),
    );
    expect(answer?.status).toBe(500);
    expect(answer!.body).not.toContain('hunter2');
    expect(JSON.parse(answer!.body).errors).toMatchObject([{ message: 'Unexpected error.' }]);
    expect(t.logs.some((l) => l.message.includes('POST') && String(l.error).includes('hunter2'))).toBe(true);
  } finally {
    t.services.auth.authenticate = authenticate;
  }
  await expectServing();
});

test('parseRequestTarget is total: no input throws', () => {
  const samples = [
    '',
    '/',
    '//',
    '/%',
    '/%%',
    '/?%',
    '/\u0000',
    '/\uffff',
    '/\ud800',
    '/a?b#c',
    '#',
    '?',
    '/a/../',
    'x'.repeat(10_000),
    `/${'%41'.repeat(5000)}`,
  ];
  for (let i = 0; i < 2000; i++) {
    let s = '/';
    for (let j = 0; j < 12; j++) s += String.fromCharCode(Math.floor(Math.random() * 0x80));
    samples.push(s, s.slice(1));
  }
  for (const sample of samples) {
    const result = parseRequestTarget(sample, sample);
    if (result.type === 'ok') {
      expect(result.value.host).toBe('gateway');
      expect(result.value.pathname.startsWith('/')).toBe(true);
    } else {
      expect(result.error.message.length).toBeLessThan(400);
    }
  }
  expect(parseRequestTarget(undefined).type).toBe('error');
});
