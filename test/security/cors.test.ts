/**
 * CORS over real sockets, for GraphQL (HTTP and SSE), REST and the health
 * routes: an allowlisted origin is answered with itself, `*` with `*`, a
 * foreign origin with no CORS header at all; credentials are never allowed.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { rawExchange, rawGet, rawRequest, startSecuredGateway, type RawResponse, type SecuredGateway } from './harness.js';

const APP = 'https://app.example.com';
const EVIL = 'https://evil.example';

let listed: SecuredGateway;
let any: SecuredGateway;
let none: SecuredGateway;

beforeAll(async () => {
  listed = await startSecuredGateway({ corsOrigins: [APP, 'http://localhost:3000'] });
  any = await startSecuredGateway({ corsOrigins: ['*'] });
  // The production default.
  none = await startSecuredGateway({ corsOrigins: loadConfig({ NODE_ENV: 'production' }).corsOrigins });
});

function corsHeaders(response: RawResponse): Record<string, string> {
  return Object.fromEntries(Object.entries(response.headers).filter(([name]) => name.startsWith('access-control-')));
}

/** The same request on GraphQL (POST and GET), REST and /healthz. */
async function everyRoute(g: SecuredGateway, key: string, origin: string): Promise<RawResponse[]> {
  const headers = { origin, authorization: `Bearer ${key}` };
  const body = JSON.stringify({ query: '{ me { user { id } } }' });
  return [
    await rawRequest(g.port, 'POST', '/graphql', { ...headers, 'content-type': 'application/json', accept: 'application/json' }, body),
    await rawGet(g.port, `/graphql?query=${encodeURIComponent('{ __typename }')}`, { ...headers, accept: 'application/json' }),
    await rawGet(g.port, '/dedicated/beta/endpoint', headers),
    await rawGet(g.port, '/dedicated/beta/endpoint/nope', headers),
    await rawGet(g.port, '/healthz', { origin }),
  ];
}

describe('an allowlist', () => {
  test('a listed origin gets itself back, never credentials, on every route', async () => {
    const alice = await listed.seed.user();
    for (const response of await everyRoute(listed, alice.key, APP)) {
      expect(response.status).toBeLessThan(500);
      expect(response.headers['access-control-allow-origin']).toBe(APP);
      expect(response.headers['access-control-allow-credentials']).toBeUndefined();
      expect(response.headers.vary).toMatch(/Origin/i);
    }
  });

  test('a foreign origin gets no CORS header at all, and the request is still answered', async () => {
    const alice = await listed.seed.user();
    const responses = await everyRoute(listed, alice.key, EVIL);
    for (const response of responses) {
      expect(corsHeaders(response)).toEqual({});
      expect(response.headers.vary).toMatch(/Origin/i);
    }
    expect(JSON.parse(responses[0]!.body).data.me.user.id).toBe(alice.user.id);
    // Look-alikes are foreign too.
    for (const origin of [`${APP}.evil.example`, 'http://app.example.com', `${APP}:443`, 'null', `${APP}/`]) {
      const [graphql] = await everyRoute(listed, alice.key, origin);
      expect(corsHeaders(graphql!), origin).toEqual({});
    }
  });

  test('preflights: a listed origin gets 204 with methods and headers; a foreign one a 403 without CORS headers', async () => {
    for (const path of ['/graphql', '/dedicated/beta/endpoint', '/dedicated/beta/endpoint/x', '/dedicated/v1/chat/completions']) {
      const preflight = (origin: string) =>
        rawGet(
          listed.port,
          path,
          { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
          'OPTIONS',
        );
      const ok = await preflight(APP);
      expect(ok.status, path).toBe(204);
      expect(corsHeaders(ok)).toMatchObject({
        'access-control-allow-origin': APP,
        'access-control-allow-methods': expect.stringContaining('POST'),
      });
      expect(ok.headers['access-control-allow-headers']).toMatch(/Authorization/);
      expect(ok.headers['access-control-allow-headers']).toMatch(/Content-Type/);
      expect(ok.headers['access-control-allow-credentials']).toBeUndefined();
      const refused = await preflight(EVIL);
      expect(refused.status, path).toBe(403);
      expect(corsHeaders(refused)).toEqual({});
      expect(JSON.parse(refused.body).error.message).toContain('CORS_ORIGINS');
    }
  });

  test('the SSE stream of a subscription carries the same headers (no echo, no credentials)', async () => {
    const alice = await listed.seed.user();
    const project = await alice.project('cors');
    const endpointId = await project.endpoint();
    const body = JSON.stringify({
      query: 'subscription($id: ID!) { endpointStatus(endpointId: $id) { status { status } } }',
      variables: { id: endpointId },
    });
    const head = async (origin: string) => {
      const raw = await rawExchange(
        listed.port,
        `POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: ${origin}\r\nAuthorization: Bearer ${alice.key}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        1500,
      );
      expect(raw).toMatch(/^HTTP\/1\.1 200/);
      expect(raw).toContain('text/event-stream');
      return raw.slice(0, raw.indexOf('\r\n\r\n')).toLowerCase();
    };
    const allowed = await head(APP);
    expect(allowed).toContain(`access-control-allow-origin: ${APP}`);
    expect(allowed).not.toContain('access-control-allow-credentials');
    const foreign = await head(EVIL);
    expect(foreign).not.toContain('access-control-');
  });
});

describe('"*"', () => {
  test('any origin gets the literal *, never its own origin, never credentials', async () => {
    const alice = await any.seed.user();
    for (const response of await everyRoute(any, alice.key, EVIL)) {
      expect(response.headers['access-control-allow-origin']).toBe('*');
      expect(response.headers['access-control-allow-credentials']).toBeUndefined();
    }
    const preflight = await rawGet(any.port, '/graphql', { origin: EVIL, 'access-control-request-method': 'POST' }, 'OPTIONS');
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('*');
    expect(preflight.headers['access-control-allow-credentials']).toBeUndefined();
  });
});

describe('none (the production default)', () => {
  test('no CORS header at all, whatever the origin; preflights are refused', async () => {
    const alice = await none.seed.user();
    for (const origin of [APP, EVIL, 'http://localhost:3000']) {
      for (const response of await everyRoute(none, alice.key, origin)) expect(corsHeaders(response)).toEqual({});
      const preflight = await rawGet(none.port, '/dedicated/beta/endpoint', { origin, 'access-control-request-method': 'GET' }, 'OPTIONS');
      expect(preflight.status).toBe(403);
      expect(corsHeaders(preflight)).toEqual({});
    }
  });

  test('requests without Origin are unaffected, and OPTIONS that is not a preflight is routed as usual', async () => {
    const alice = await none.seed.user();
    const list = await rawGet(none.port, '/dedicated/beta/endpoint', { authorization: `Bearer ${alice.key}` });
    expect(list.status).toBe(200);
    expect(corsHeaders(list)).toEqual({});
    const options = await rawGet(none.port, '/dedicated/beta/endpoint', { authorization: `Bearer ${alice.key}` }, 'OPTIONS');
    // The route's answer to a method it does not take: 405 with the methods it does.
    expect(options.status).toBe(405);
    expect(options.headers.allow).toBe('POST, GET, HEAD');
  });
});
