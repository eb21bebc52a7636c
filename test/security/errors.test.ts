/**
 * Hostile input: every error a client can cause is a 4xx naming the field and
 * the rule, on REST, GraphQL and chat, and a refused request writes nothing.
 * Each case here answered 500 before (a NUL that PostgreSQL refuses, a cursor
 * outside the integer column, a body yoga could not parse), or was accepted
 * when it should not have been (a lone surrogate, stored replaced; a body
 * sent as text/plain).
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { httpStatusOf } from '../../src/domain/errors.js';
import { failureOf } from '../../src/http/failures.js';
import { openAIErrorOf } from '../../src/http/rest/chat-errors.js';
import { restErrorOf } from '../../src/http/rest/errors.js';
import { startTestGateway, createBody, type SeededUser, type TestGateway } from '../support/gateway.js';

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
      details: { fields: [{ field: 'body', message: 'must be valid JSON' }] },
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
