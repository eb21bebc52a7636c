/**
 * What each surface names, and what the contract's shapes hold, through a real gateway (no replicas needed):
 * GraphQL's InvalidArgumentError speaks GraphQL's names (`advanced.maxBatchSize`) in its message and its fields'
 * messages while REST keeps its own (`advanced.max_batch_size`); a chat body that sends both max_tokens and
 * max_completion_tokens is refused as OpenAI refuses it (400 invalid_parameter_combination, naming max_tokens), whatever
 * their values; and the spec object that GET and PUT answer holds `wandbArtifact`, as each version history entry does.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { advancedNames, inGraphqlNames } from '../../src/http/graphql/field-names.js';
import { H100_X1, startTestGateway, type SeededProject, type SeededUser, type TestGateway } from '../support/gateway.js';

let t: TestGateway;
let alice: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestGateway();
  alice = await t.seed.user();
  project = await alice.project('contract names');
});

describe('InvalidArgumentError in GraphQL names, REST in its own', () => {
  // A field out of its range; then, the fields each valid, a rule between two of them.
  const cases = [
    { advanced: { maxBatchSize: 0 }, field: 'advanced.maxBatchSize', message: /^must be from 1 to \d+$/ },
    {
      advanced: { maxTokenCount: 100, maxInputLength: 500 },
      field: 'advanced.maxInputLength',
      message: /^must not exceed maxTokenCount \(500 > 100\)$/,
    },
  ];

  test.each(cases)('createEndpoint: the message and its field (path and message) name the GraphQL input fields: $field', async (c) => {
    const res = await alice.rest('POST', '/graphql', {
      query: `mutation($input: CreateEndpointInput!) { createEndpoint(input: $input) {
        __typename ... on InvalidArgumentError { message fields { field message } } } }`,
      variables: { input: { projectId: project.id, name: 'n', instanceOptionId: H100_X1, hfModelRepo: 'org/m', advanced: c.advanced } },
    });
    const error = res.body.data.createEndpoint;
    expect(error).toEqual({
      __typename: 'InvalidArgumentError',
      message: expect.stringContaining(`${c.field}: must`),
      fields: [{ field: c.field, message: expect.stringMatching(c.message) }],
    });
    expect(JSON.stringify([error.message, error.fields])).not.toMatch(/_/);
  });

  test.each(cases)('REST answers the same request in its own names: $field', async (c) => {
    const rest = (name: string) => name.replace(/[A-Z]/g, (l) => `_${l.toLowerCase()}`);
    const res = await alice.rest('POST', '/dedicated/beta/endpoint', {
      projectId: project.id,
      name: 'n',
      instanceOptionId: H100_X1,
      hfModelRepo: 'org/m',
      advanced: Object.fromEntries(Object.entries(c.advanced).map(([k, v]) => [rest(k), v])),
    });
    expect(res.status).toBe(400);
    const message = new RegExp(c.message.source.replace('maxTokenCount', 'max_token_count'));
    expect(res.body.error.details.fields).toEqual([{ field: rest(c.field), message: expect.stringMatching(message) }]);
  });

  test('renaming leaves quoted values, names inside other words, and JSON members below a JSON field as they are', () => {
    const chat = (name: string) => ['max_tokens', 'chat_template_kwargs', 'messages'].includes(name);
    const json = new Set(['chatTemplateKwargs']);
    expect(inGraphqlNames('max_tokens must be at least 1 (got string "max_tokens"); lower max_tokens.', chat, json)).toBe(
      'maxTokens must be at least 1 (got string "max_tokens"); lower maxTokens.',
    );
    expect(inGraphqlNames('chat_template_kwargs.enable_thinking and messages[2].tool_call_id', chat, json)).toBe(
      'chatTemplateKwargs.enable_thinking and messages[2].toolCallId',
    );
    // Not a name of the input: the engine's template variable, an endpoint setting the caller did not send here.
    expect(inGraphqlNames('add_generation_prompt is set by the engine', chat, json)).toBe('add_generation_prompt is set by the engine');
    expect(inGraphqlNames('x.max_tokens', chat, json)).toBe('x.max_tokens');
    expect(inGraphqlNames('advanced.max_input_length: must not exceed max_token_count', advancedNames)).toBe(
      'advanced.maxInputLength: must not exceed maxTokenCount',
    );
    // What the client or the hub wrote is no field: a repository, a name, a revision, as written.
    expect(inGraphqlNames('hfModelRepo: repository my_org/my_model was not found at revision dev_branch', advancedNames)).toBe(
      'hfModelRepo: repository my_org/my_model was not found at revision dev_branch',
    );
  });
});

describe('max_tokens with max_completion_tokens', () => {
  const chat = (body: Record<string, unknown>) =>
    alice.rest('POST', '/dedicated/v1/chat/completions', { model: 'ep_none', messages: [{ role: 'user', content: 'hi' }], ...body });

  test.each([
    ['both valid', { max_tokens: 10, max_completion_tokens: 20 }],
    ['a bad max_tokens', { max_tokens: 0, max_completion_tokens: 20 }],
    ['a bad max_completion_tokens', { max_tokens: 10, max_completion_tokens: 'many' }],
  ])('%s: 400 invalid_parameter_combination naming max_tokens, as OpenAI answers', async (_, body) => {
    const res = await chat(body);
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({
      message: expect.stringMatching(/max_tokens and max_completion_tokens cannot be sent together/),
      type: 'invalid_request_error',
      param: 'max_tokens',
      code: 'invalid_parameter_combination',
    });
  });

  test('either alone, or the other null, is read (the request goes on to its model)', async () => {
    for (const body of [{ max_completion_tokens: 20 }, { max_tokens: 20 }, { max_tokens: null, max_completion_tokens: 20 }]) {
      const res = await chat(body);
      expect(res.status, JSON.stringify(body)).toBe(404);
      expect(res.body.error.code).toBe('model_not_found');
    }
  });
});

describe('the spec object holds wandbArtifact', () => {
  const ARTIFACT = 'acme/model/spec-llama:v0';

  test("GET and PUT answer it, as the version history's entries hold it: null for a hub model", async () => {
    const created = await alice.rest('POST', '/dedicated/endpoint/wandb-artifact-create', {
      wandbArtifactVersionName: ARTIFACT,
      projectId: project.id,
    });
    expect(created.status).toBe(200);
    const id = created.body.endpointId as string;
    const unresolved = { name: ARTIFACT, version: null, digest: null, file: null };

    const spec = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(spec.status).toBe(200);
    expect(spec.body).toMatchObject({ hfModelRepo: null, wandbArtifact: unresolved });
    const updated = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { newVersionComment: 'again' });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ versionIndex: 1, wandbArtifact: unresolved });
    const history = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/version`);
    expect(history.body.data['1'].wandbArtifact).toEqual(updated.body.wandbArtifact);

    const hub = await project.endpoint();
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${hub}`)).body).toMatchObject({
      hfModelRepo: 'org/tiny-model',
      wandbArtifact: null,
    });
  });
});
