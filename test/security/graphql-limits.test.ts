/**
 * GraphQL operation limits (depth, aliases, directives, tokens, cost) and
 * introspection, over HTTP, SSE and WebSocket, against real gateways: an
 * operation over a limit is a 400 naming the limit before any SQL runs, and
 * the operations our SDK sends still pass.
 */
import { print } from 'graphql';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { DEFAULT_GRAPHQL_LIMITS } from '../../src/http/graphql/limits.js';
import { EndpointsDocument, EndpointVersionsDocument, MeDocument, TeamsDocument } from '../../src/sdk/generated/graphql.js';
import { postGraphQL, rawRequest, startSecuredGateway, type SecuredGateway } from './harness.js';

let t: SecuredGateway;
/** Small limits, introspection off. */
let small: SecuredGateway;

const SMALL = { maxDepth: 3, maxAliases: 1, maxDirectives: 1, maxTokens: 60, maxCost: 50 };

beforeAll(async () => {
  t = await startSecuredGateway();
  small = await startSecuredGateway({ graphql: { limits: SMALL, introspection: false } });
});

/** endpoints → nodes → project → endpoints → … `levels` fields deep, `id` last. */
function deepQuery(levels: number, first = 100): string {
  const cycle = [`endpoints(first: ${first}) {`, 'nodes {', 'project {'];
  let open = '';
  for (let i = 0; i < levels - 1; i++) open += `${cycle[i % 3]} `;
  return `{ ${open}id ${'} '.repeat(levels - 1)}}`;
}

function expectLimit(response: { status: number; body: any }, variable: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(400);
  expect(response.body.data).toBeUndefined();
  const error = response.body.errors.find((e: any) => e.extensions?.limit === variable);
  expect(error, JSON.stringify(response.body.errors)).toBeDefined();
  expect(error.message).toContain(variable);
  expect(error.extensions.code).toBe('QUERY_LIMIT_EXCEEDED');
  expect(error.extensions.http).toBeUndefined();
}

/**
 * Starts counting statements with the key's principal freshly cached: a POST looks its key up before it reads the
 * body, and a cached principal serves for PRINCIPAL_TTL_MS (1 s), which a wait for quiet on a loaded machine can
 * outlast. `{ __typename }` costs that lookup alone.
 */
async function quietStart(key: string): Promise<void> {
  expect((await postGraphQL(t.url, key, '{ __typename }')).status).toBe(200);
  t.queries.reset();
}

describe('over HTTP, default limits', () => {
  test('depth 18 (endpoints → project → endpoints …) is refused before any SQL runs, naming GRAPHQL_MAX_DEPTH', async () => {
    const mallory = await t.seed.user();
    const project = await mallory.project('deep');
    await project.endpoint();
    await t.queries.settled(); // the router reads the new endpoint when its creation is announced
    await quietStart(mallory.key);
    const response = await postGraphQL(t.url, mallory.key, deepQuery(18));
    expectLimit(response, 'GRAPHQL_MAX_DEPTH');
    expect(response.body.errors[0].message).toMatch(/depth 18 exceeds the limit of 10/);
    expect(response.body.errors[0].extensions).toMatchObject({ max: 10, actual: 18 });
    expect(t.queries.count).toBe(0);
    // The counter counts: a query that runs costs statements.
    t.queries.reset();
    const ok = await postGraphQL(t.url, mallory.key, deepQuery(7, 5));
    expect(ok.status).toBe(200);
    expect(ok.body.errors).toBeUndefined();
    expect(t.queries.count).toBeGreaterThan(0);
  });

  test('depth 10 passes, 11 does not', async () => {
    const alice = await t.seed.user();
    expect((await postGraphQL(t.url, alice.key, deepQuery(10, 3))).status).toBe(200);
    expectLimit(await postGraphQL(t.url, alice.key, deepQuery(11, 3)), 'GRAPHQL_MAX_DEPTH');
  });

  test('fragments do not hide depth', async () => {
    const alice = await t.seed.user();
    const query = `{ ...A } fragment A on Query { endpoints { nodes { ...B } } } fragment B on Endpoint { project { endpoints { nodes { ...C } } } }
      fragment C on Endpoint { project { endpoints { nodes { project { endpoints { nodes { id } } } } } } }`;
    expectLimit(await postGraphQL(t.url, alice.key, query), 'GRAPHQL_MAX_DEPTH');
  });

  test('aliases: 15 pass, 16 are refused naming GRAPHQL_MAX_ALIASES', async () => {
    const alice = await t.seed.user();
    const aliased = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: me { user { id } }`).join(' ')} }`;
    const ok = await postGraphQL(t.url, alice.key, aliased(15));
    expect(ok.status).toBe(200);
    expect(ok.body.data.a14.user.id).toBe(alice.user.id);
    await t.queries.settled(); // a key's first use records it (lastUsedAt) in the background
    await quietStart(alice.key);
    expectLimit(await postGraphQL(t.url, alice.key, aliased(16)), 'GRAPHQL_MAX_ALIASES');
    expect(t.queries.count).toBe(0);
  });

  test('directives: 20 pass, 21 are refused naming GRAPHQL_MAX_DIRECTIVES', async () => {
    const alice = await t.seed.user();
    const directed = (n: number) => `{ ${'__typename @include(if: true) '.repeat(n)}}`;
    expect(await postGraphQL(t.url, alice.key, directed(20))).toMatchObject({ status: 200, body: { data: { __typename: 'Query' } } });
    expectLimit(await postGraphQL(t.url, alice.key, directed(21)), 'GRAPHQL_MAX_DIRECTIVES');
  });

  test('tokens: 1000 pass, 1001 are refused naming GRAPHQL_MAX_TOKENS', async () => {
    const alice = await t.seed.user();
    const tokens = (n: number) => `{ ${'__typename '.repeat(n - 2)}}`; // n - 2 names and two braces
    expect((await postGraphQL(t.url, alice.key, tokens(1000))).status).toBe(200);
    const response = await postGraphQL(t.url, alice.key, tokens(1001));
    expectLimit(response, 'GRAPHQL_MAX_TOKENS');
  });

  test('5,000 nested braces, in the query or in the body, are a 400 and never a 500', async () => {
    const alice = await t.seed.user();
    const auth = { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'application/json' };
    // Braces alone are a syntax error at the second token (yoga's usual answer: 200 to application/json, 400 to graphql-response+json).
    const braces = await postGraphQL(t.url, alice.key, '{'.repeat(5000) + '}'.repeat(5000));
    expect(braces.status).toBeLessThan(500);
    expect(braces.body.errors[0].message).toMatch(/Syntax Error/);
    const strict = await postGraphQL(t.url, alice.key, '{'.repeat(5000) + '}'.repeat(5000), undefined, {
      accept: 'application/graphql-response+json',
    });
    expect(strict.status).toBe(400);
    expectLimit(await postGraphQL(t.url, alice.key, `${'{ a '.repeat(5000)}${'}'.repeat(5000)}`), 'GRAPHQL_MAX_TOKENS');
    for (const body of ['{'.repeat(5000), '['.repeat(5000) + ']'.repeat(5000)]) {
      const response = await rawRequest(t.port, 'POST', '/graphql', auth, body);
      expect(response.status, response.body.slice(0, 300)).toBe(400);
    }
  });

  test('variables nested 5,000 deep are not a 500', async () => {
    const alice = await t.seed.user();
    const auth = { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'application/json' };
    const body = `{"query":"{ __typename }","variables":{"x":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}}`;
    const response = await rawRequest(t.port, 'POST', '/graphql', auth, body);
    expect(response.status, response.body.slice(0, 300)).toBeLessThan(500);
  });

  test('cost: lists multiply by their page size; 100 × 100 is refused naming GRAPHQL_MAX_COST before any SQL', async () => {
    const alice = await t.seed.user();
    const query = (first: number) =>
      `{ endpoints(first: ${first}) { nodes { versions(first: ${first}) { nodes { versionIndex comment } } } } }`;
    expect((await postGraphQL(t.url, alice.key, query(10))).body.errors).toBeUndefined();
    await t.queries.settled(); // a key's first use records it (lastUsedAt) in the background
    await quietStart(alice.key);
    const response = await postGraphQL(t.url, alice.key, query(100));
    expectLimit(response, 'GRAPHQL_MAX_COST');
    // 1 + 100 × (nodes 1 + versions (1 + 100 × (nodes 1 + 2)))
    expect(response.body.errors[0].extensions).toMatchObject({ max: 10_000, actual: 1 + 100 * (1 + 1 + 100 * 3) });
    expect(t.queries.count).toBe(0);
  });

  test('cost follows the variables on every request: a cheap run does not let the same document through with a large page', async () => {
    const alice = await t.seed.user();
    const query = 'query($n: Int) { endpoints(first: $n) { nodes { versions(first: $n) { nodes { versionIndex comment } } } } }';
    for (let round = 0; round < 2; round++) {
      const cheap = await postGraphQL(t.url, alice.key, query, { n: 5 });
      expect(cheap.status).toBe(200);
      expect(cheap.body.errors).toBeUndefined();
      expectLimit(await postGraphQL(t.url, alice.key, query, { n: 100 }), 'GRAPHQL_MAX_COST');
    }
    // Omitted, `first` counts as the default page (20): 1 + 20 × (1 + 1 + 20 × 3) = 1241.
    expect((await postGraphQL(t.url, alice.key, query)).status).toBe(200);
  });

  test('measured costs are reused only where nothing that counts changed: the operation chosen, variables that did not coerce', async () => {
    const alice = await t.seed.user();
    const expensive = '{ endpoints(first: 100) { nodes { versions(first: 100) { nodes { versionIndex comment } } } } }';
    // Two operations in one document: the name chosen is part of what was measured.
    const two = `query Cheap { me { user { email } } } query Costly ${expensive}`;
    expect((await postGraphQL(t.url, alice.key, two, undefined, {}, 'Cheap')).body.errors).toBeUndefined();
    expectLimit(await postGraphQL(t.url, alice.key, two, undefined, {}, 'Costly'), 'GRAPHQL_MAX_COST');
    // A first request whose other variable does not coerce measures nothing (and fails on its variables); the same
    // document with a good variable is then measured, and refused.
    const withId =
      'query($id: ID!, $n: Int) { endpoint(id: $id) { id } endpoints(first: $n) { nodes { versions(first: $n) { nodes { versionIndex } } } } }';
    const bad = await postGraphQL(t.url, alice.key, withId, { id: { not: 'an id' }, n: 100 });
    expect(bad.body.errors?.length).toBeGreaterThan(0);
    expectLimit(await postGraphQL(t.url, alice.key, withId, { id: 'ep_none', n: 100 }), 'GRAPHQL_MAX_COST');
  });

  test('every SDK operation still passes at full page size', async () => {
    const alice = await t.seed.user();
    const project = await alice.project('sdk');
    const endpointId = await project.endpoint();
    for (const [document, variables] of [
      [EndpointsDocument, { projectId: project.id, first: 100 }],
      [EndpointVersionsDocument, { id: endpointId, first: 100 }],
      [TeamsDocument, {}],
      [MeDocument, {}],
    ] as const) {
      const response = await postGraphQL(t.url, alice.key, print(document), variables);
      expect(response.status, print(document)).toBe(200);
      expect(response.body.errors).toBeUndefined();
    }
    const typed = await alice.graphql.request(EndpointVersionsDocument, { id: endpointId, first: 100 });
    expect(typed.endpoint?.versions.edges).toHaveLength(1);
  });

  test('with introspection on, depth does not count it (the GraphiQL query is 15 deep), and graphql-js caps its list nesting', async () => {
    const alice = await t.seed.user();
    const { getIntrospectionQuery } = await import('graphql');
    const full = await postGraphQL(t.url, alice.key, getIntrospectionQuery());
    expect(full.status).toBe(200);
    expect(full.body.data.__schema.queryType.name).toBe('Query');
    const bomb = await postGraphQL(
      t.url,
      alice.key,
      '{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }',
    );
    expect(bomb.body.data).toBeUndefined();
    expect(bomb.body.errors[0].message).toMatch(/Maximum introspection depth exceeded/);
  });

  test('introspection and GraphiQL are on by default outside production', async () => {
    const alice = await t.seed.user();
    const response = await postGraphQL(t.url, alice.key, '{ __schema { queryType { name } } }');
    expect(response.body.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
    const page = await fetch(`${t.url}/graphql`, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('GraphiQL');
  });
});

describe('configured limits (small gateway), introspection off', () => {
  test('each limit is the configured one', async () => {
    const alice = await small.seed.user();
    expectLimit(await postGraphQL(small.url, alice.key, '{ me { defaultTeam { projects { id } } } }'), 'GRAPHQL_MAX_DEPTH');
    expect((await postGraphQL(small.url, alice.key, '{ me { user { id } } }')).status).toBe(200);
    expectLimit(await postGraphQL(small.url, alice.key, '{ a: me { user { id } } b: me { user { id } } }'), 'GRAPHQL_MAX_ALIASES');
    expectLimit(
      await postGraphQL(small.url, alice.key, '{ __typename @include(if: true) __typename @skip(if: false) }'),
      'GRAPHQL_MAX_DIRECTIVES',
    );
    expectLimit(await postGraphQL(small.url, alice.key, `{ ${'__typename '.repeat(60)}}`), 'GRAPHQL_MAX_TOKENS');
    expectLimit(await postGraphQL(small.url, alice.key, '{ endpoints(first: 30) { nodes { id } } }'), 'GRAPHQL_MAX_COST');
    expect((await postGraphQL(small.url, alice.key, '{ endpoints(first: 20) { nodes { id } } }')).status).toBe(200);
  });

  test('introspection is refused (400), __typename is not, and there is no GraphiQL', async () => {
    const alice = await small.seed.user();
    for (const query of ['{ __schema { queryType { name } } }', '{ __type(name: "Query") { name } }']) {
      const response = await postGraphQL(small.url, alice.key, query);
      expect(response.status).toBe(400);
      expect(response.body.errors[0].message).toMatch(/introspection has been disabled/);
    }
    expect((await postGraphQL(small.url, alice.key, '{ __typename }')).body).toEqual({ data: { __typename: 'Query' } });
    // A browser gets no page, but a 404 that says why and what to do (not an empty 406).
    const page = await fetch(`${small.url}/graphql`, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(404);
    const text = await page.text();
    expect(text).not.toContain('renderYogaGraphiQL');
    expect(JSON.parse(text).errors[0].message).toMatch(
      /^GraphiQL is off on this gateway \(GRAPHQL_INTROSPECTION.*GRAPHQL_INTROSPECTION=true$/,
    );
  });

  test('production defaults from the configuration: no introspection', async () => {
    const config = loadConfig({ NODE_ENV: 'production' });
    expect(config.graphqlLimits).toEqual(DEFAULT_GRAPHQL_LIMITS);
    const prod = await startSecuredGateway({
      graphql: { limits: config.graphqlLimits, introspection: config.graphqlIntrospection },
      corsOrigins: config.corsOrigins,
    });
    const alice = await prod.seed.user();
    const response = await postGraphQL(prod.url, alice.key, '{ __schema { types { name } } }');
    expect(response.status).toBe(400);
    expect(response.body.errors[0].message).toMatch(/introspection/);
    expect((await postGraphQL(prod.url, alice.key, '{ me { user { id } } }')).body.data.me.user.id).toBe(alice.user.id);
  });

  test('SSE: a subscription over a limit is a 400 naming it', async () => {
    const alice = await small.seed.user();
    const project = await alice.project('sse');
    const endpointId = await project.endpoint();
    const response = await fetch(`${small.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: 'subscription($id: ID!) { endpointStatus(endpointId: $id) { status { downloadProgress { bytesDone } } } }',
        variables: { id: endpointId },
      }),
    });
    const text = await response.text();
    expect(response.status, text).toBe(400);
    expect(text).toContain('GRAPHQL_MAX_DEPTH');
  });
});

describe('over WebSocket (graphql-ws)', () => {
  function connect(g: SecuredGateway, key: string, closes: number[]): Client {
    return createClient({
      url: `${g.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${key}` },
      retryAttempts: 0,
      lazy: false,
      on: { closed: (event) => void closes.push((event as CloseEvent).code) },
      onNonLazyError: () => {},
    });
  }

  /** The result of a query, or the `error` message of an operation (only ones that end by themselves are run). */
  function run(client: Client, query: string, variables?: Record<string, unknown>): Promise<{ data?: any; errors?: readonly any[] }> {
    return new Promise((resolve, reject) => {
      let result: { data?: any; errors?: readonly any[] } | undefined;
      client.subscribe(
        { query, ...(variables ? { variables } : {}) },
        {
          next: (value) => void (result = value as never),
          error: (error) => (Array.isArray(error) ? resolve({ errors: error }) : reject(error)),
          complete: () => resolve(result ?? {}),
        },
      );
    });
  }

  function expectWsLimit(result: { errors?: readonly any[] }, variable: string) {
    const error = result.errors?.find((e) => e.extensions?.limit === variable);
    expect(error, JSON.stringify(result)).toBeDefined();
    expect(error.message).toContain(variable);
  }

  test('each limit and introspection apply to subscriptions and queries on a socket, which stays open', async () => {
    const alice = await small.seed.user();
    const project = await alice.project('ws');
    const endpointId = await project.endpoint();
    const closes: number[] = [];
    const client = connect(small, alice.key, closes);
    try {
      expect(await run(client, '{ __typename }')).toEqual({ data: { __typename: 'Query' } }); // connected and authenticated
      await small.queries.settled(); // the router reads the new endpoint when its creation is announced
      small.queries.reset();
      expectWsLimit(
        await run(client, 'subscription($id: ID!) { endpointStatus(endpointId: $id) { status { downloadProgress { bytesDone } } } }', {
          id: endpointId,
        }),
        'GRAPHQL_MAX_DEPTH',
      );
      expectWsLimit(
        await run(
          client,
          'subscription($id: ID!) { a: endpointStatus(endpointId: $id) { status { status } } b: endpointStatus(endpointId: $id) { status { status } } }',
          { id: endpointId },
        ),
        'GRAPHQL_MAX_ALIASES',
      );
      expectWsLimit(await run(client, '{ __typename @include(if: true) __typename @skip(if: false) }'), 'GRAPHQL_MAX_DIRECTIVES');
      expectWsLimit(await run(client, `{ ${'__typename '.repeat(60)}}`), 'GRAPHQL_MAX_TOKENS');
      expectWsLimit(await run(client, '{ endpoints(first: 100) { nodes { id } } }'), 'GRAPHQL_MAX_COST');
      expectWsLimit(await run(client, 'query($n: Int) { endpoints(first: $n) { nodes { id } } }', { n: 100 }), 'GRAPHQL_MAX_COST');
      const introspection = await run(client, '{ __schema { queryType { name } } }');
      expect(introspection.errors?.[0].message).toMatch(/introspection has been disabled/);
      expect(small.queries.count).toBe(0);
      // The socket still serves.
      expect(await run(client, '{ me { user { id } } }')).toEqual({ data: { me: { user: { id: alice.user.id } } } });
      expect(await run(client, 'query($n: Int) { endpoints(first: $n) { nodes { id } } }', { n: 10 })).toMatchObject({
        data: { endpoints: { nodes: [{ id: endpointId }] } },
      });
      expect(closes).toEqual([]);
    } finally {
      await client.dispose();
    }
  });

  test('default limits: the depth-18 query is refused over a socket too', async () => {
    const alice = await t.seed.user();
    const closes: number[] = [];
    const client = connect(t, alice.key, closes);
    try {
      const result = await run(client, deepQuery(18));
      expectWsLimit(result, 'GRAPHQL_MAX_DEPTH');
      expect(await run(client, '{ __typename }')).toEqual({ data: { __typename: 'Query' } });
      expect(closes).toEqual([]);
    } finally {
      await client.dispose();
    }
  });
});

test('a document nested past the stack is a 400, even with a huge token budget', async () => {
  const loose = await startSecuredGateway({
    graphql: { limits: { ...DEFAULT_GRAPHQL_LIMITS, maxTokens: 1_000_000, maxDepth: 1000 }, introspection: true },
  });
  const alice = await loose.seed.user();
  const response = await postGraphQL(loose.url, alice.key, `${'{ a '.repeat(100_000)}${'}'.repeat(100_000)}`);
  expect(response.status, JSON.stringify(response.body).slice(0, 300)).toBe(400);
  expect((await postGraphQL(loose.url, alice.key, '{ __typename }')).status).toBe(200);
});
