/**
 * Hostile input: every error a client can cause is a 4xx naming the field and
 * the rule, on REST, GraphQL and chat, and a refused request writes nothing.
 * Each case here answered 500 before (a NUL that PostgreSQL refuses, a cursor
 * outside the integer column, a body yoga could not parse), or was accepted
 * when it should not have been (a lone surrogate, stored replaced; a body
 * sent as text/plain).
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { EVENT_ID_RULE } from '../../src/domain/endpoint.js';
import { httpStatusOf } from '../../src/domain/errors.js';
import { TIMESTAMP_RULE } from '../../src/domain/field-checker.js';
import { failureOf } from '../../src/http/failures.js';
import { openAIErrorOf } from '../../src/http/rest/chat-errors.js';
import { restErrorOf } from '../../src/http/rest/errors.js';
import { waitFor } from '../support/app.js';
import { startTestGateway, createBody, type SeededUser, type TestGateway } from '../support/gateway.js';
import { openSocket } from '../support/live-clients.js';

let g: TestGateway;
let alice: SeededUser;
let projectId: string;
let endpointId: string;

beforeAll(async () => {
  g = await startTestGateway();
  alice = await g.seed.user();
  const project = await alice.project('hostile');
  projectId = project.id;
  endpointId = await project.endpoint({ name: 'target' });
});

/** Rows that a refused request must not have added. */
async function rowCounts() {
  const [row] = await g.sql<{ endpoints: number; versions: number; events: number; projects: number }[]>`
    SELECT (SELECT count(*)::int FROM endpoints) AS endpoints, (SELECT count(*)::int FROM endpoint_versions) AS versions,
           (SELECT count(*)::int FROM endpoint_events) AS events, (SELECT count(*)::int FROM projects) AS projects`;
  return row!;
}

async function raw(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
  const response = await fetch(`${g.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${alice.key}`, ...init.headers },
    ...(init.body !== undefined ? { body: init.body } : {}),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
}

const JSON_TYPE = { 'content-type': 'application/json' };
const cursor = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

describe('REST', () => {
  test('a NUL in any string field is a 400 naming the field; nothing is written', async () => {
    const before = await rowCounts();
    const cases: [string, string, unknown, string][] = [
      ['POST', '/dedicated/beta/endpoint', createBody(projectId, { initialVersionComment: 'a\u0000b' }), 'initialVersionComment'],
      ['POST', '/dedicated/beta/endpoint', createBody(projectId, { name: 'a\u0000b' }), 'name'],
      ['POST', '/dedicated/beta/endpoint', createBody(projectId, { hfModelRepoRevision: 'main\u0000' }), 'hfModelRepoRevision'],
      ['PUT', `/dedicated/beta/endpoint/${endpointId}`, { newVersionComment: '\u0000' }, 'newVersionComment'],
      ['PUT', `/dedicated/beta/endpoint/${endpointId}`, { advanced: { 'max_\u0000': 1 } }, 'advanced.max_\u0000'],
      [
        'POST',
        '/dedicated/endpoint/wandb-artifact-create',
        { wandbArtifactVersionName: 'acme/models/llama:v1', projectId, idempotencyKey: 'k\u0000' },
        'idempotencyKey',
      ],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await alice.rest(method, path, body);
      expect(res.status, field).toBe(400);
      expect(res.body.error).toMatchObject({
        code: 'INVALID_ARGUMENT',
        details: { fields: [{ field, message: 'must not contain NUL (\\u0000) characters' }] },
      });
    }
    expect(await rowCounts()).toEqual(before);
  });

  test('a NUL at the bottom of a body nested 20,000 deep is found (a 400, not a stack overflow)', async () => {
    const body = `{"advanced":${'{"a":'.repeat(20_000)}"\\u0000"${'}'.repeat(20_000)}}`;
    const res = await raw('PUT', `/dedicated/beta/endpoint/${endpointId}`, { body, headers: JSON_TYPE });
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields[0]).toEqual({
      field: `advanced${'.a'.repeat(20_000)}`,
      message: 'must not contain NUL (\\u0000) characters',
    });
  });

  test('a refused artifact create leaves no project behind (it created one before checking the policy)', async () => {
    const before = await rowCounts();
    const res = await alice.rest('POST', '/dedicated/endpoint/wandb-artifact-create', {
      wandbArtifactVersionName: 'acme/models/llama:latest',
      autoscalingPolicy: { minReplica: 1, maxReplica: 0 },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields).toEqual([
      { field: 'autoscalingPolicy.minReplica', message: 'must not exceed maxReplica (1 > 0)' },
    ]);
    expect(await rowCounts()).toEqual(before);
  });

  test('an unpaired surrogate in stored text is a 400 (it would be stored replaced)', async () => {
    const before = await rowCounts();
    const body = JSON.stringify(createBody(projectId, { initialVersionComment: 'X' })).replace('"X"', '"broken \\ud83d emoji"');
    const res = await raw('POST', '/dedicated/beta/endpoint', { body, headers: JSON_TYPE });
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields).toEqual([
      { field: 'initialVersionComment', message: 'must be valid Unicode text (it contains an unpaired UTF-16 surrogate)' },
    ]);
    const name = JSON.stringify(createBody(projectId, { name: 'X' })).replace('"X"', '"\\udc00"');
    expect((await raw('POST', '/dedicated/beta/endpoint', { body: name, headers: JSON_TYPE })).body.error.details.fields[0].field).toBe(
      'name',
    );
    // A proper pair is fine.
    expect(
      (
        await alice.rest(
          'POST',
          '/dedicated/beta/endpoint',
          createBody(projectId, { name: 'ok', initialVersionComment: 'emoji \ud83d\ude00' }),
        )
      ).status,
    ).toBe(200);
    expect((await rowCounts()).endpoints).toBe(before.endpoints + 1);
  });

  test('a NUL in a path parameter or a query parameter is a 400 naming it', async () => {
    for (const path of [
      `/dedicated/beta/endpoint/ep%00x`,
      `/dedicated/beta/endpoint/ep%00x/status`,
      `/dedicated/beta/endpoint/ep%00/version`,
    ]) {
      const res = await alice.rest('GET', path);
      expect(res.status, path).toBe(400);
      expect(res.body.error.details.fields).toEqual([{ field: 'id', message: 'must not contain NUL (\\u0000) characters' }]);
    }
    const sleep = await alice.rest('PUT', `/dedicated/beta/endpoint/x%00/sleep`);
    expect(sleep.status).toBe(400);
    const listed = await alice.rest('GET', `/dedicated/beta/endpoint?projectId=prj%00`);
    expect(listed.status).toBe(400);
    expect(listed.body.error.details.fields).toEqual([{ field: 'projectId', message: 'must not contain NUL (\\u0000) characters' }]);
  });

  test('a version cursor outside the integer column, negative, or not ours is a 400 naming cursor', async () => {
    for (const text of ['ver:999999999999999', 'ver:2147483648', 'ver:-5', 'ver:-99999999999', 'ver:1:2', 'ver:1e3', 'ep:1']) {
      const res = await alice.rest('GET', `/dedicated/beta/endpoint/${endpointId}/version?cursor=${cursor(text)}`);
      expect(res.status, text).toBe(400);
      expect(res.body.error.details.fields).toEqual([{ field: 'cursor', message: 'is not a cursor returned by this list' }]);
    }
    // The largest version position is still a cursor (of an empty page).
    const last = await alice.rest('GET', `/dedicated/beta/endpoint/${endpointId}/version?cursor=${cursor('ver:2147483647')}`);
    expect(last.status).toBe(200);
    expect(last.body).toEqual({ data: {}, nextCursor: null });
    const endpoints = await alice.rest('GET', `/dedicated/beta/endpoint?projectId=${projectId}&cursor=${cursor('ep:-1')}`);
    expect(endpoints.status).toBe(400);
  });

  test('advanced values out of range, not integers, or past what a column holds are 400s naming the field', async () => {
    const before = await rowCounts();
    const cases: [string, unknown, string][] = [
      ['max_batch_size', 2 ** 31, 'must be from 1 to 1024'],
      ['max_batch_size', -(2 ** 31) - 1, 'must be from 1 to 1024'],
      ['max_token_count', 2 ** 53 + 2, 'must be from 1 to 1048576'],
      ['max_token_count', 1e300, 'must be from 1 to 1048576'],
      ['max_input_length', 0, 'must be from 1 to 1048576'],
      ['max_input_length', -1, 'must be from 1 to 1048576'],
      ['max_batch_size', 1.5, 'must be an integer'],
      ['max_batch_size', '8', 'must be an integer'],
      ['tokenizer_skip_special_tokens', 'yes', 'must be a boolean'],
    ];
    for (const [key, value, message] of cases) {
      const res = await alice.rest('POST', '/dedicated/beta/endpoint', createBody(projectId, { advanced: { [key]: value } }));
      expect(res.status, `${key}=${value}`).toBe(400);
      expect(res.body.error.details.fields).toEqual([{ field: `advanced.${key}`, message }]);
    }
    // Number literals JSON.parse reads as Infinity, or that overflow: still 400s.
    for (const literal of ['1e400', '-1e400', '123456789012345678901234567890']) {
      const body = JSON.stringify(createBody(projectId, { advanced: { max_token_count: 7 } })).replace(':7', `:${literal}`);
      const res = await raw('POST', '/dedicated/beta/endpoint', { body, headers: JSON_TYPE });
      expect(res.status, literal).toBe(400);
      expect(res.body.error.details.fields[0].field).toBe('advanced.max_token_count');
    }
    const update = await alice.rest('PUT', `/dedicated/beta/endpoint/${endpointId}`, { autoscalingPolicy: { cooldownPeriod: 2 ** 40 } });
    expect(update.status).toBe(400);
    expect(update.body.error.details.fields).toEqual([{ field: 'autoscalingPolicy.cooldownPeriod', message: 'must be from 0 to 604800' }]);
    expect(await rowCounts()).toEqual(before);
  });

  test('a body that is not JSON is a 400; one sent as another content type is a 415 naming Content-Type', async () => {
    const before = await rowCounts();
    const broken = await raw('POST', '/dedicated/beta/endpoint', { body: '{"projectId":', headers: JSON_TYPE });
    expect(broken.status).toBe(400);
    expect(broken.body.error).toMatchObject({
      code: 'INVALID_ARGUMENT',
      details: {
        fields: [{ field: 'body', message: 'must be valid JSON: unexpected end of input (expected a value) at line 1, column 14' }],
      },
    });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx']) {
      const res = await raw('POST', '/dedicated/beta/endpoint', {
        body: JSON.stringify(createBody(projectId)),
        headers: { 'content-type': type },
      });
      expect(res.status, type).toBe(415);
      expect(res.body.error).toMatchObject({
        code: 'INVALID_ARGUMENT',
        details: { fields: [{ field: 'Content-Type', message: expect.stringContaining('must be application/json') }] },
      });
    }
    expect(await rowCounts()).toEqual(before);
    // JSON with parameters, and a +json type, are JSON.
    const withCharset = await raw('PUT', `/dedicated/beta/endpoint/${endpointId}`, {
      body: '{}',
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(withCharset.status).toBe(200);
  });
});

describe('GraphQL', () => {
  const post = (body: string, headers: Record<string, string> = JSON_TYPE) =>
    raw('POST', '/graphql', { body, headers: { accept: 'application/json', ...headers } });
  const ENDPOINT = 'query($id: ID!) { endpoint(id: $id) { id name } }';

  test('a content type yoga cannot read is a 415 naming Content-Type (it was an empty 415)', async () => {
    for (const type of ['text/plain', 'application/xml', 'application/octet-stream']) {
      const res = await post(JSON.stringify({ query: '{ __typename }' }), { 'content-type': type });
      expect(res.status, type).toBe(415);
      expect(res.body.errors[0]).toMatchObject({
        extensions: {
          code: 'INVALID_ARGUMENT',
          fields: [{ field: 'Content-Type', message: expect.stringContaining('must be application/json') }],
        },
      });
    }
  });

  test('a GET, or a form body, whose variables (or extensions) are not JSON is a 400 naming them (it was a 500)', async () => {
    const get = await raw('GET', `/graphql?query=${encodeURIComponent(ENDPOINT)}&variables=%7Bnope`, {
      headers: { accept: 'application/json' },
    });
    expect(get.status).toBe(400);
    expect(get.body.errors[0].extensions).toEqual({
      code: 'INVALID_ARGUMENT',
      fields: [{ field: 'variables', message: 'must be a JSON object' }],
    });
    const extensions = await raw('GET', `/graphql?query=${encodeURIComponent('{ __typename }')}&extensions=%5B`, {
      headers: { accept: 'application/json' },
    });
    expect(extensions.status).toBe(400);
    expect(extensions.body.errors[0].extensions.fields).toEqual([{ field: 'extensions', message: 'must be a JSON object' }]);
    const form = await post(`query=${encodeURIComponent(ENDPOINT)}&variables=%7B`, { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.status).toBe(400);
    expect(form.body.errors[0].extensions.fields).toEqual([{ field: 'variables', message: 'must be a JSON object' }]);
    // A well-formed GET still works.
    const fine = await raw(
      'GET',
      `/graphql?query=${encodeURIComponent(ENDPOINT)}&variables=${encodeURIComponent(JSON.stringify({ id: endpointId }))}`,
      {
        headers: { accept: 'application/json' },
      },
    );
    expect(fine.status).toBe(200);
    expect(fine.body.data.endpoint).toEqual({ id: endpointId, name: 'target' });
  });

  test('a body its parser refuses is a 400 naming the body (a broken multipart one was a 500)', async () => {
    const multipart = await post('not multipart at all', { 'content-type': 'multipart/form-data; boundary=zzz' });
    expect(multipart.status).toBe(400);
    expect(multipart.body.errors[0].extensions).toMatchObject({ code: 'INVALID_ARGUMENT', fields: [{ field: 'body' }] });
    const json = await post('{"query":');
    expect(json.status).toBe(400);
    expect(json.body.errors[0].extensions).toMatchObject({ code: 'INVALID_ARGUMENT', fields: [{ field: 'body' }] });
  });

  test('a NUL in a variable or a literal is a 400 naming it, before any resolver runs', async () => {
    const before = await rowCounts();
    const id = await post(JSON.stringify({ query: ENDPOINT, variables: { id: 'ep_\u0000' } }));
    expect(id.status).toBe(400);
    expect(id.body.errors[0]).toMatchObject({
      extensions: { code: 'INVALID_ARGUMENT', fields: [{ field: '$id', message: 'must not contain NUL (\\u0000) characters' }] },
    });
    expect(id.body.data).toBeUndefined();

    const literal = await post(
      JSON.stringify({
        query: `mutation { updateEndpoint(id: "${endpointId}", input: { newVersionComment: "a\\u0000b" }) { __typename } }`,
      }),
    );
    expect(literal.status).toBe(400);
    expect(literal.body.errors[0].extensions.fields).toEqual([
      { field: 'input.newVersionComment', message: 'must not contain NUL (\\u0000) characters' },
    ]);

    const nested = await post(
      JSON.stringify({
        query: 'mutation($input: CreateEndpointInput!) { createEndpoint(input: $input) { __typename } }',
        variables: {
          input: {
            projectId,
            name: 'x',
            instanceOptionId: 'TwD5AqnBSVN0',
            hfModelRepo: 'org/m',
            advanced: {},
            initialVersionComment: '\u0000',
          },
        },
      }),
    );
    expect(nested.status).toBe(400);
    expect(nested.body.errors[0].extensions.fields[0].field).toBe('$input.initialVersionComment');

    const project = await post(JSON.stringify({ query: 'mutation { createProject(name: "p\\u0000") { __typename } }' }));
    expect(project.status).toBe(400);
    expect(await rowCounts()).toEqual(before);
  });

  test('a versions cursor outside the integer range is a 400 naming after (it was a 500)', async () => {
    const query = 'query($id: ID!, $after: String) { endpoint(id: $id) { versions(after: $after) { edges { cursor } } } }';
    for (const text of ['ver:999999999999999', 'ver:-1', 'garbage']) {
      const res = await post(JSON.stringify({ query, variables: { id: endpointId, after: cursor(text) } }));
      expect(res.status, text).toBe(400);
      expect(res.body.errors[0]).toMatchObject({
        path: ['endpoint', 'versions'],
        extensions: { code: 'INVALID_ARGUMENT', fields: [{ field: 'after', message: 'is not a cursor returned by this list' }] },
      });
    }
  });

  test("a subscription's `after` that is no event id is INVALID_ARGUMENT naming after (it reached PostgreSQL as a bigint cast)", async () => {
    const STATUS = 'subscription($id: ID!, $after: ID) { endpointStatus(endpointId: $id, after: $after) { status { status } } }';
    const EVENTS = 'subscription($p: ID!, $after: ID) { endpointEvents(projectId: $p, after: $after) { id } }';
    const s = await openSocket(g.url, { authorization: `Bearer ${alice.key}` });
    const bad = ['abc', '99999999999999999999999', '9223372036854775808', '-1', '1.5', '1e3', ' 1', ''];
    bad.forEach((after, i) => {
      s.subscribe(`status-${i}`, STATUS, { id: endpointId, after });
      s.subscribe(`events-${i}`, EVENTS, { p: projectId, after });
    });
    s.subscribe('literal', `subscription { endpointStatus(endpointId: "${endpointId}", after: "abc") { status { status } } }`);
    const ids = [...bad.flatMap((_, i) => [`status-${i}`, `events-${i}`]), 'literal'];
    await waitFor('every refusal', async () => ids.every((id) => s.of(id).length > 0), 5000);
    for (const id of ids) {
      const first = s.of(id)[0]!;
      const errors = (first.type === 'error' ? first.payload : first.payload.errors) as { message: string; extensions: unknown }[];
      expect(errors, id).toHaveLength(1);
      expect(errors[0]!.extensions, id).toEqual({ code: 'INVALID_ARGUMENT', fields: [{ field: 'after', message: EVENT_ID_RULE }] });
      expect(errors[0]!.message).not.toMatch(/bigint|database/);
    }
    // The largest event id, and 0, are positions to resume from.
    s.subscribe('largest', STATUS, { id: endpointId, after: '9223372036854775807' });
    s.subscribe('zero', EVENTS, { p: projectId, after: '0' });
    await waitFor('the replay from 0', async () => s.of('zero').some((m) => m.type === 'next'), 5000);
    expect(s.of('zero').every((m) => m.type === 'next' && m.payload.data.endpointEvents.id)).toBe(true);
    expect(s.of('largest')).toEqual([]);
    s.socket.close();
  });

  test('a DateTime that is no timestamp, or one PostgreSQL cannot hold, is a 400 naming the argument (not database text)', async () => {
    const METRICS =
      'query($id: ID!, $from: DateTime!, $to: DateTime) { endpoint(id: $id) { metrics(from: $from, to: $to) { stepSeconds } } }';
    const REQUESTS = 'query($id: ID!, $filter: RequestActivityFilter) { endpoint(id: $id) { requests(filter: $filter) { nodes { id } } } }';
    const cases: [string, Record<string, unknown>, string[]][] = [
      [METRICS, { from: '-271821-04-20T00:00:00.000Z' }, ['from']],
      [METRICS, { from: '2024-01-01T00:00:00Z', to: '+275760-09-13T00:00:00.000Z' }, ['to']],
      [METRICS, { from: '0000-12-31T23:59:59.999Z' }, ['from']],
      [METRICS, { from: 'not a date', to: '' }, ['from', 'to']],
      [REQUESTS, { filter: { from: '-271821-04-20T00:00:00.000Z', to: '+010000-01-01T00:00:00Z' } }, ['filter.from', 'filter.to']],
      [REQUESTS, { filter: { to: 'yesterday' } }, ['filter.to']],
      // Not ISO 8601 (Date would read "1" as 2001, and a time without an offset in the server's zone).
      [METRICS, { from: '1', to: '2024-01-01 10:00' }, ['from', 'to']],
      [METRICS, { from: '2024-01-01T10:00' }, ['from']],
    ];
    for (const [query, variables, fields] of cases) {
      const res = await post(JSON.stringify({ query, variables: { id: endpointId, ...variables } }));
      const what = JSON.stringify(variables);
      expect(res.status, what).toBe(400);
      expect(res.body.errors, what).toHaveLength(1);
      expect(res.body.errors[0].extensions, what).toEqual({
        code: 'INVALID_ARGUMENT',
        fields: fields.map((field) => ({ field, message: TIMESTAMP_RULE })),
      });
      expect(JSON.stringify(res.body)).not.toMatch(/time zone|database|Unexpected error/);
    }
    // Literals too.
    const literal = await post(
      JSON.stringify({
        query: `query { endpoint(id: "${endpointId}") { requests(filter: { from: "-271821-04-20T00:00:00.000Z" }) { nodes { id } } } }`,
      }),
    );
    expect(literal.status).toBe(400);
    expect(literal.body.errors[0].extensions.fields).toEqual([{ field: 'filter.from', message: TIMESTAMP_RULE }]);
    const metrics = await post(
      JSON.stringify({ query: `query { endpoint(id: "${endpointId}") { metrics(from: "-271821-04-20T00:00:00.000Z") { stepSeconds } } }` }),
    );
    expect(metrics.body.errors[0].extensions.fields).toEqual([{ field: 'from', message: TIMESTAMP_RULE }]);
    // The ends of the range are fine.
    const ends = await post(
      JSON.stringify({
        query: REQUESTS,
        variables: { id: endpointId, filter: { from: '0001-01-01T00:00:00.000Z', to: '9999-12-31T23:59:59.999Z' } },
      }),
    );
    expect(ends.status).toBe(200);
    expect(ends.body.data.endpoint.requests.nodes).toEqual([]);
    const first = await post(
      JSON.stringify({ query: METRICS, variables: { id: endpointId, from: '0001-01-01T00:00:00Z', to: '0001-01-01T02:00:00Z' } }),
    );
    expect(first.status).toBe(200);
    expect(first.body.data.endpoint.metrics.stepSeconds).toBe(60);
  });

  test('stored-text rules hold over GraphQL too', async () => {
    const res = await post(
      JSON.stringify({
        query:
          'mutation($id: ID!, $input: UpdateEndpointInput!) { updateEndpoint(id: $id, input: $input) { __typename ... on InvalidArgumentError { fields { field message } } } }',
        variables: { id: endpointId, input: { name: 'x' } },
      }).replace('"name":"x"', '"name":"\\ud800"'),
    );
    expect(res.status).toBe(200);
    expect(res.body.data.updateEndpoint).toEqual({
      __typename: 'InvalidArgumentError',
      fields: [{ field: 'name', message: 'must be valid Unicode text (it contains an unpaired UTF-16 surrogate)' }],
    });
  });
});

describe('chat', () => {
  const chat = (body: string, type = 'application/json') =>
    raw('POST', '/dedicated/v1/chat/completions', { body, headers: { 'content-type': type } });

  test('a NUL in a message, a wrong content type, and malformed JSON: 4xx in the OpenAI shape naming the param', async () => {
    const nul = await chat(JSON.stringify({ model: endpointId, messages: [{ role: 'user', content: 'hi\u0000' }] }));
    expect(nul.status).toBe(400);
    expect(nul.body).toEqual({
      error: {
        message: expect.stringContaining('NUL'),
        type: 'invalid_request_error',
        param: 'messages[0].content',
        code: 'invalid_value',
      },
    });
    const text = await chat(JSON.stringify({ model: endpointId, messages: [] }), 'text/plain');
    expect(text.status).toBe(415);
    expect(text.body.error).toMatchObject({ type: 'invalid_request_error', param: 'Content-Type', code: 'unsupported_media_type' });
    const broken = await chat('{"model":');
    expect(broken.status).toBe(400);
    expect(broken.body.error).toMatchObject({ type: 'invalid_request_error', param: 'body', code: 'invalid_json' });
  });
});

describe('chat: text and numbers', () => {
  const chat = (body: string) => raw('POST', '/dedicated/v1/chat/completions', { body, headers: JSON_TYPE });

  test('an unpaired surrogate in any text of a chat request is a 400 naming it (it failed the content log batch)', async () => {
    const hi = [{ role: 'user', content: 'hi' }];
    const cases: [Record<string, unknown>, string][] = [
      [{ messages: [{ role: 'user', content: 'BBB-\ud800' }] }, 'messages[0].content'],
      [
        {
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'ok' },
                { type: 'text', text: '\udc00x' },
              ],
            },
          ],
        },
        'messages[0].content[1].text',
      ],
      [{ messages: [{ role: 'user', content: 'hi', name: 'bob\ud83d' }] }, 'messages[0].name'],
      [{ messages: hi, stop: ['ok', 'end\udfff'] }, 'stop[1]'],
      [{ messages: hi, stop: '\ud800' }, 'stop'],
      [{ messages: hi, user: '\ud800' }, 'user'],
      [{ messages: hi, chat_template_kwargs: { reasoning_effort: 'low\udc00' } }, 'chat_template_kwargs.reasoning_effort'],
    ];
    for (const [body, param] of cases) {
      const res = await chat(JSON.stringify({ model: endpointId, ...body }));
      expect(res.status, param).toBe(400);
      expect(res.body).toEqual({
        error: {
          message: `${param} must be valid Unicode text (it contains an unpaired UTF-16 surrogate)`,
          type: 'invalid_request_error',
          param,
          code: 'invalid_value',
        },
      });
    }
    // A proper pair is text: the request gets past the parser, to the model lookup.
    const pair = await chat(JSON.stringify({ model: 'ep_nosuchmodel', messages: [{ role: 'user', content: 'emoji \ud83d\ude00' }] }));
    expect(pair.status).toBe(404);
    expect(pair.body.error).toMatchObject({ param: 'model' });
  });

  test('a number JSON cannot hold exactly is described, never quoted as a value the client did not send', async () => {
    const base = `{"model":"${endpointId}","messages":[{"role":"user","content":"hi"}]`;
    const cases: [string, string, string][] = [
      ['"temperature":1e400', 'temperature', 'temperature must be between 0 and 2 (got a number too large)'],
      ['"top_p":-1e400', 'top_p', 'top_p must be between 0 and 1 (got a negative number too large)'],
      [
        '"seed":9007199254740993',
        'seed',
        'seed must be from -9007199254740991 to 9007199254740991 (got a number too large to be read exactly)',
      ],
      ['"seed":1e400', 'seed', 'seed must be from -9007199254740991 to 9007199254740991 (got a number too large)'],
      [
        '"max_tokens":99999999999999999999',
        'max_tokens',
        'max_tokens must be at most 1048576, the largest max_token_count an endpoint can have (got a number too large to be read exactly)',
      ],
      ['"max_tokens":-1e400', 'max_tokens', 'max_tokens must be at least 1 (got a negative number too large)'],
    ];
    for (const [member, param, message] of cases) {
      const res = await chat(`${base},${member}}`);
      expect(res.status, member).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', param, message });
      expect(res.body.error.message).not.toMatch(/null|9007199254740992|100000000000000000000/);
    }
    // Exact numbers are still quoted.
    const exact = await chat(`${base},"temperature":2.5}`);
    expect(exact.body.error.message).toBe('temperature must be between 0 and 2 (got 2.5)');
  });
});

describe('the safety net: PostgreSQL data exceptions that slip through', () => {
  test('22021 (NUL), 22003 (out of range) and 22P02 (bad text) map to 400 on every surface; other errors stay 500', async () => {
    const errors = await Promise.all([
      g.sql`SELECT ${'a\u0000b'}::text`.catch((e: unknown) => e),
      g.sql`SELECT ${'99999999999'}::int`.catch((e: unknown) => e),
      g.sql`SELECT ${'twelve'}::int`.catch((e: unknown) => e),
    ]);
    expect(errors.map((e) => (e as { code: string }).code)).toEqual(['22021', '22003', '22P02']);
    for (const error of errors) {
      expect(failureOf(error)).toMatchObject({ kind: 'invalid', fields: [{ field: 'request' }] });
      expect(httpStatusOf(failureOf(error))).toBe(400);
      expect(restErrorOf(error)).toMatchObject({ status: 400, code: 'INVALID_ARGUMENT' });
      expect(openAIErrorOf(error)).toMatchObject({ status: 400, type: 'invalid_request_error' });
    }
    const bug = await g.sql`SELECT * FROM no_such_table`.catch((e: unknown) => e);
    expect(restErrorOf(bug)).toMatchObject({ status: 500, code: 'INTERNAL', message: 'internal error' });
    expect(restErrorOf(new TypeError('x is undefined'))).toMatchObject({ status: 500 });
  });
});
