/**
 * The field names in GraphQL's error messages (src/http/graphql/field-names.ts), against a client's hostile text:
 * quoted text is never renamed, a quote never closed runs to the end, and the rewrite is one linear scan (a message
 * holding a client's `"\"\"…`, never closed, took over a second of the event loop with a split on a regular
 * expression for quoted text). Through a real gateway (no replicas needed: the request is refused before any
 * endpoint is looked up): a JSON schema's property names come back whole, quoted as JSON, in GraphQL's chat error;
 * and SafeInt shows at most the first 40 characters of a literal it refuses.
 */
import { performance } from 'node:perf_hooks';
import { beforeAll, describe, expect, test } from 'vitest';
import { inGraphqlNames } from '../../src/http/graphql/field-names.js';
import { openSse } from '../support/live-clients.js';
import { startTestGateway, type SeededUser, type TestGateway } from '../support/gateway.js';

const chat = (name: string) => ['max_tokens', 'response_format', 'messages'].includes(name);
const json = new Set(['responseFormat']);

describe('inGraphqlNames: quoted text as the client wrote it', () => {
  test('a quote never closed runs to the end: nothing after it is renamed', () => {
    expect(inGraphqlNames('max_tokens must be at least 1 (got "max_tokens and max_tokens', chat, json)).toBe(
      'maxTokens must be at least 1 (got "max_tokens and max_tokens',
    );
  });

  test('an escaped quote does not close; the text after the closing quote is renamed again', () => {
    expect(inGraphqlNames('max_tokens "a\\" max_tokens \\\\" max_tokens', chat, json)).toBe('maxTokens "a\\" max_tokens \\\\" maxTokens');
    expect(inGraphqlNames('"" max_tokens ""', chat, json)).toBe('"" maxTokens ""');
    expect(inGraphqlNames('"max_tokens"', chat, json)).toBe('"max_tokens"');
    expect(inGraphqlNames('"', chat, json)).toBe('"');
    expect(inGraphqlNames('', chat, json)).toBe('');
  });

  test('linear work: a message with a quote never closed costs what a balanced one of the same length does', () => {
    // The message the reviewer's request made, a property name `"\"\"…` (30 KB); the benign one closes its quote.
    const prefix = 'response_format.json_schema.schema.required must list every property (missing: ';
    const count = 15_000;
    const hostile = `${prefix}"${'\\"'.repeat(count)}`;
    const benign = `${prefix}"${'\\"'.repeat(count - 1)}x"`;
    expect(benign.length).toBe(hostile.length);
    expect(inGraphqlNames(hostile, chat, json)).toBe(hostile.replace('response_format', 'responseFormat'));
    expect(inGraphqlNames(benign, chat, json)).toBe(benign.replace('response_format', 'responseFormat'));

    // A ratio of the two, not a time: the same work measured side by side, each the fastest of several runs (the
    // one the machine's load disturbed least). Linear, the two are about equal; the split took hundreds of times
    // longer on the hostile one (quadratic). A run of the hostile text stops as soon as it is past the bound.
    const batch = 10;
    let benignBatch = Infinity;
    for (let run = 0; run < 5; run++) {
      const start = performance.now();
      for (let i = 0; i < batch; i++) inGraphqlNames(benign, chat, json);
      benignBatch = Math.min(benignBatch, performance.now() - start);
    }
    const bound = 20 * benignBatch;
    let best = Infinity;
    for (let run = 0; run < 5 && best > bound; run++) {
      const start = performance.now();
      for (let i = 0; i < batch && performance.now() - start <= bound; i++) inGraphqlNames(hostile, chat, json);
      best = Math.min(best, performance.now() - start);
    }
    expect(best / benignBatch, 'time of the hostile message over the benign one').toBeLessThanOrEqual(20);
  }, 60_000);
});

describe('through a real gateway', () => {
  let t: TestGateway;
  let alice: SeededUser;

  beforeAll(async () => {
    t = await startTestGateway();
    alice = await t.seed.user();
  });

  const MUTATION = `mutation($input: ChatCompletionInput!) { createChatCompletion(input: $input) {
    __typename ... on ChatCompletionError { message errorType code param status } } }`;
  /** A chat input whose response format's schema has these properties, all but the first left out of `required`. */
  const input = (names: string[]) => ({
    // Refused before any endpoint is looked up: any model will do.
    model: 'no-such-endpoint',
    messages: [{ role: 'user', content: 'hi' }],
    responseFormat: {
      type: 'json_schema',
      json_schema: {
        name: 'x',
        schema: { type: 'object', properties: Object.fromEntries(names.map((n) => [n, { type: 'null' }])), required: names.slice(0, 1) },
      },
    },
  });
  const chatError = async (names: string[]) => {
    const res = await alice.rest('POST', '/graphql', { query: MUTATION, variables: { input: input(names) } });
    expect(res.status).toBe(200);
    return res.body.data.createChatCompletion as { message: string; param: string; status: number };
  };

  test('the reviewer\'s request, a property name `"` and `\\"` 16,000 times: a 400 naming the field, the name whole', async () => {
    const hostile = `"${'\\"'.repeat(16_000)}`;
    const error = await chatError(['a', hostile]);
    expect(error).toMatchObject({ status: 400, param: 'responseFormat.json_schema.schema' });
    expect(error.message).toBe(
      `responseFormat.json_schema.schema.required must list every property, as in OpenAI's strict mode (missing: ${JSON.stringify(hostile)}); make an optional one nullable instead`,
    );

    // The subscription too, sent as a POST body (64 KiB would not fit a URL).
    const subscription = 'subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { id } }';
    const stream = await openSse(t.url, alice.key, subscription, { input: input(['a', hostile]) }, {}, 'POST');
    await expect.poll(() => stream.ended, { timeout: 20_000 }).toBeDefined();
    const errors = stream.events.filter((e) => e.event === 'next').flatMap((e) => (e.data as { errors?: unknown[] }).errors ?? []);
    expect(errors).toEqual([
      expect.objectContaining({
        message: error.message,
        extensions: expect.objectContaining({ param: 'responseFormat.json_schema.schema', status: 400 }),
      }),
    ]);
  });

  test('property names are the client’s, quoted: one named as a REST field (max_tokens) is not renamed', async () => {
    const error = await chatError(['a', 'max_tokens', 'b c']);
    expect(error.message).toContain('(missing: "max_tokens", "b c")');
  });

  test('a SafeInt literal of 400 digits: the error shows its first 40 characters', async () => {
    const literal = '9'.repeat(400);
    const res = await alice.rest('POST', '/graphql', {
      query: `mutation { createChatCompletion(input: { model: "m", messages: [], seed: ${literal} }) { __typename } }`,
    });
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors).toEqual([
      expect.objectContaining({
        message: `SafeInt must be an integer from -9007199254740991 to 9007199254740991 (got ${'9'.repeat(40)}…)`,
      }),
    ]);
  });
});
