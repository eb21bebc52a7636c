/**
 * Failures a user can read, and token limits that fit the model (issue 19):
 * a max_token_count past the model's context fails the start with
 * WORKLOAD_INIT_SETTINGS_ERROR and a message saying what to do, on REST, on
 * GraphQL, and in the chat route's 409; a max_token_count left out follows
 * the model's context; the REST spec shows every advanced setting.
 */
import OpenAI from 'openai';
import { beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, TINY_REPO, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import type { SeededProject } from '../support/gateway.js';

/** The stand-in hub's model with a 256-token context. */
const SHORT = 'test-org/short-context-GGUF';

let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  project = await alice.project('user path');
});

const STATUS_QUERY = 'query($id: ID!) { endpoint(id: $id) { status { status errorCode errorMessage } } }';

describe('a settings failure', () => {
  test('says what to do on REST, GraphQL and chat, and is gone after the fix', async () => {
    const id = await project.endpoint({ name: 'too-long', hfModelRepo: SHORT, advanced: { max_token_count: 1024 } });
    await waitForStatus(t.sql, id, 'FAILED');
    const expected =
      "max_token_count (1024) is larger than the model's context (256 tokens): lower max_token_count to at most 256 " +
      "(or leave it out to use the model's context) with an update, then restart the endpoint.";

    const rest = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    expect(rest.body).toMatchObject({ status: 'FAILED', errorCode: 'WORKLOAD_INIT_SETTINGS_ERROR', errorMessage: expected });

    const gql = await alice.rest('POST', '/graphql', { query: STATUS_QUERY, variables: { id } });
    expect(gql.body.data.endpoint.status).toEqual({ status: 'FAILED', errorCode: 'WORKLOAD_INIT_SETTINGS_ERROR', errorMessage: expected });

    // The chat route's 409 says the same: an update first, not just a restart.
    const openai = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
    const refused = await openai.chat.completions
      .create({ model: id, messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect(refused).toMatchObject({ status: 409, code: 'endpoint_not_running' });
    expect((refused as InstanceType<typeof OpenAI.APIError>).message).toContain(
      `endpoint '${id}' is FAILED (WORKLOAD_INIT_SETTINGS_ERROR) and serves no requests. ${expected}`,
    );

    // Following the advice: update, then restart.
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_token_count: 256 } })).status).toBe(200);
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/restart`)).status).toBe(200);
    await waitForStatus(t.sql, id, 'RUNNING');
    const fixed = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    expect(fixed.body.errorCode).toBeNull();
    expect('errorMessage' in fixed.body).toBe(false);
    expect(
      (await alice.rest('POST', '/graphql', { query: STATUS_QUERY, variables: { id } })).body.data.endpoint.status.errorMessage,
    ).toBeNull();

    // The versions list shows what changed.
    const versions = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/version`);
    expect(versions.body.data['0']).toMatchObject({ maxTokenCount: 1024, maxInputLength: 1024, maxTokenCountFromModel: false });
    expect(versions.body.data['1']).toMatchObject({ maxTokenCount: 256, maxInputLength: 256, maxTokenCountFromModel: false });
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 120_000);

  test('a hub failure says what to do too', async () => {
    const id = await project.endpoint({ name: 'private', hfModelRepo: 'test-org/private-GGUF' });
    await waitForStatus(t.sql, id, 'FAILED');
    const rest = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    expect(rest.body.errorCode).toBe('WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
    expect(rest.body.errorMessage).toMatch(/test-org\/private-GGUF.*: check the repository's name .* then restart the endpoint\.$/);
  }, 60_000);
});

describe('limits left out follow the model', () => {
  test("max_token_count left out becomes the model's context, shown in the spec once the model is read", async () => {
    const id = await project.endpoint({ name: 'short-default', hfModelRepo: SHORT, advanced: {} });
    const created = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(created.body).toMatchObject({ maxTokenCountFromModel: true, enableContentLogging: false });
    await waitForStatus(t.sql, id, 'RUNNING');
    const spec = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(spec.body).toMatchObject({ maxTokenCount: 256, maxInputLength: 256, maxTokenCountFromModel: true });
    const gql = await alice.rest('POST', '/graphql', {
      query: 'query($id: ID!) { endpoint(id: $id) { spec { maxTokenCount maxInputLength } } }',
      variables: { id },
    });
    expect(gql.body.data.endpoint.spec).toEqual({ maxTokenCount: 256, maxInputLength: 256 });
    // A request is checked against the resolved limit.
    const openai = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
    const tooMany = await openai.chat.completions
      .create({ model: id, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 300 })
      .catch((e: unknown) => e);
    expect(tooMany).toMatchObject({ status: 400, code: 'context_length_exceeded' });
    const answer = await openai.chat.completions.create({ model: id, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 });
    expect(answer.choices[0]!.message.content).toBeTypeOf('string');
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 120_000);

  test('on the tiny model (4096 tokens) the default is 4096, as before', async () => {
    const id = await project.endpoint({ name: 'tiny-default', hfModelRepo: TINY_REPO });
    await waitForStatus(t.sql, id, 'RUNNING');
    const spec = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(spec.body).toMatchObject({ maxTokenCount: 4096, maxInputLength: 2048, maxTokenCountFromModel: true });
    // An update that sets the limit fixes it; the input limit left out follows it down.
    const updated = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_token_count: 1024 } });
    expect(updated.body).toMatchObject({ maxTokenCount: 1024, maxInputLength: 1024, maxTokenCountFromModel: false });
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 120_000);
});
