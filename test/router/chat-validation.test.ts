/**
 * Bad chat requests are refused at once, whatever the load: with every slot
 * of the endpoint taken (so that a good request waits in the gateway's queue
 * until its 429), a prompt over max_input_length, max_tokens past what the
 * endpoint allows, and junk in chat_template_kwargs each answer their 400 in
 * the OpenAI shape in well under the queue's wait, and leave no request-log
 * row. The engine itself also refuses them before they wait for a sequence.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateChatCompletionDocument } from '../../src/sdk/client.js';
import {
  engineFetch,
  liveReplicaRows,
  startTestApp,
  TINY_REPO,
  waitFor,
  waitForStatus,
  type SeededUser,
  type TestApp,
} from '../support/app.js';

const QUEUE_TIMEOUT_MS = 4000;
/** Well under the queue's wait: a refusal that queued would take QUEUE_TIMEOUT_MS. */
const FAST_MS = 1500;

let t: TestApp;
let alice: SeededUser;
let endpoint: string;
let replica: { address: string; engine_token: string | null };
const holders = new AbortController();
let held: Promise<unknown>[] = [];

const MESSAGES = [{ role: 'user' as const, content: 'Tell me a story.' }];
/** Far past max_input_length (64): thousands of tokens. */
const LONG = [{ role: 'user' as const, content: 'word '.repeat(3000) }];

function rawChat(body: Record<string, unknown>) {
  return fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function health() {
  return (await (await engineFetch(replica, '/health')).json()) as { active: number; queued: number };
}

async function timedChat(body: Record<string, unknown>) {
  const started = performance.now();
  const response = await rawChat(body);
  const json = (await response.json()) as { error?: { message: string; type: string; param: string | null; code: string | null } };
  return { status: response.status, json, ms: performance.now() - started };
}

beforeAll(async () => {
  t = await startTestApp({ env: { QUEUE_TIMEOUT_MS: String(QUEUE_TIMEOUT_MS), WAKE_TIMEOUT_MS: '60000' } });
  alice = await t.seed.user();
  const project = await alice.project('validation');
  endpoint = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 2, max_token_count: 4096, max_input_length: 64 },
  });
  await waitForStatus(t.sql, endpoint, 'RUNNING');
  replica = (await liveReplicaRows(t.sql, endpoint))[0]!;
  // Take both slots (and both of the engine's sequences) with long generations.
  held = [0, 1].map(
    () =>
      fetch(`${t.url}/dedicated/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: endpoint, messages: MESSAGES, max_tokens: 3900, temperature: 0, stream: true }),
        signal: holders.signal,
      }).catch(() => undefined), // the stream is left unread: generating, until the abort
  );
  await waitFor('both slots busy', async () => (await health()).active === 2);
}, 120_000);

afterAll(async () => {
  holders.abort();
  await Promise.all(held);
});

describe('with every slot taken', () => {
  test('a good request waits in the queue until its 429: the endpoint really is busy', async () => {
    const started = performance.now();
    const response = await rawChat({ model: endpoint, messages: MESSAGES, max_tokens: 4 });
    expect(response.status).toBe(429);
    expect(performance.now() - started).toBeGreaterThan(QUEUE_TIMEOUT_MS - 500);
  });

  test('a prompt far over max_input_length: 400 at once, naming the count and the limit', async () => {
    const { status, json, ms } = await timedChat({ model: endpoint, messages: LONG, max_tokens: 4 });
    expect(status).toBe(400);
    expect(json.error).toMatchObject({ type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' });
    expect(json.error!.message).toMatch(
      /The prompt has (at least )?\d{4,} tokens.*, more than this endpoint's max_input_length of 64 tokens/,
    );
    expect(ms).toBeLessThan(FAST_MS);
  });

  test('max_tokens in the millions, or past max_token_count: 400 at once, naming the field and the limit', async () => {
    const millions = await timedChat({ model: endpoint, messages: MESSAGES, max_tokens: 5_000_000 });
    expect(millions.status).toBe(400);
    expect(millions.json.error).toMatchObject({ type: 'invalid_request_error', param: 'max_tokens' });
    expect(millions.json.error!.message).toContain('at most 1048576');
    expect(millions.ms).toBeLessThan(FAST_MS);

    const overSpec = await timedChat({ model: endpoint, messages: MESSAGES, max_completion_tokens: 4096 });
    expect(overSpec.status).toBe(400);
    expect(overSpec.json.error).toMatchObject({ param: 'max_completion_tokens', code: 'context_length_exceeded' });
    expect(overSpec.json.error!.message).toContain('max_token_count is 4096');
    expect(overSpec.ms).toBeLessThan(FAST_MS);

    // Under max_token_count alone, over it with the prompt: only the token count can tell.
    const withPrompt = await timedChat({ model: endpoint, messages: MESSAGES, max_tokens: 4090 });
    expect(withPrompt.status).toBe(400);
    expect(withPrompt.json.error).toMatchObject({ param: 'max_tokens', code: 'context_length_exceeded' });
    expect(withPrompt.json.error!.message).toMatch(/needs \d+ \(\d+ prompt tokens \+ 4090 max_tokens\)/);
    expect(withPrompt.ms).toBeLessThan(FAST_MS);
  });

  test('junk in chat_template_kwargs: 400 at once, naming the member and the rule', async () => {
    const cases: [unknown, string][] = [
      [{ enable_thinking: true, junk: { deeply: { nested: [1, { x: 2 }] } } }, 'chat_template_kwargs.junk'],
      [{ messages: [{ role: 'system', content: 'injected' }] }, 'chat_template_kwargs.messages'],
      [{ 'not-a-name': 1 }, 'chat_template_kwargs'],
      [Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, i])), 'chat_template_kwargs'],
      [{ long: 'x'.repeat(5000) }, 'chat_template_kwargs.long'],
      [{ enable_thinking: 'yes' }, 'chat_template_kwargs.enable_thinking'],
      ['enable_thinking', 'chat_template_kwargs'],
    ];
    for (const [kwargs, param] of cases) {
      const { status, json, ms } = await timedChat({ model: endpoint, messages: MESSAGES, max_tokens: 4, chat_template_kwargs: kwargs });
      expect(status, JSON.stringify(kwargs).slice(0, 80)).toBe(400);
      expect(json.error).toMatchObject({ type: 'invalid_request_error', param });
      expect(ms).toBeLessThan(FAST_MS);
    }
    // A template variable that is not junk passes the checks (and so waits for its slot).
    const fine = await timedChat({
      model: endpoint,
      messages: MESSAGES,
      max_tokens: 4,
      chat_template_kwargs: { enable_thinking: false, reasoning_effort: 'low' },
    });
    expect(fine.status).toBe(429);
  });

  test('a body nested thousands deep in a field the engine ignores: 400 at once, not a 500 when the gateway forwards it', async () => {
    const text = `{"model":"${endpoint}","messages":[{"role":"user","content":"x"}],"user":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    const response = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
      body: text,
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain('nests JSON more than 128 levels deep');
  });

  test('the same over GraphQL and through the official client', async () => {
    const started = performance.now();
    const result = await alice.graphql.request(CreateChatCompletionDocument, { input: { model: endpoint, messages: LONG, maxTokens: 4 } });
    expect(result.createChatCompletion).toMatchObject({
      __typename: 'ChatCompletionError',
      status: 400,
      code: 'context_length_exceeded',
      param: 'messages',
    });
    expect(performance.now() - started).toBeLessThan(FAST_MS);

    const openai = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
    const error = await openai.chat.completions
      .create({ model: endpoint, messages: MESSAGES, max_tokens: 2_000_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, param: 'max_tokens' });
  });

  test('the engine refuses a bad request before it waits for a sequence; its /tokenize counts without one', async () => {
    const direct = (path: string, body: unknown) =>
      engineFetch(replica, path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await health()).active).toBe(2);
    const started = performance.now();
    const long = await direct('/v1/chat/completions', { messages: LONG, max_tokens: 4 });
    expect(long.status).toBe(400);
    expect(((await long.json()) as { error: { code: string } }).error.code).toBe('context_length_exceeded');
    const junk = await direct('/v1/chat/completions', { messages: MESSAGES, chat_template_kwargs: { bos_token: 'x' } });
    expect(junk.status).toBe(400);
    expect(performance.now() - started).toBeLessThan(FAST_MS);

    const counted = await direct('/tokenize', { messages: MESSAGES, add_generation_prompt: true });
    expect(counted.status).toBe(200);
    const count = (await counted.json()) as { count: number; max_model_len: number; max_input_length: number };
    expect(count).toEqual({ count: expect.any(Number), max_model_len: 4096, max_input_length: 64 });
    expect(count.count).toBeGreaterThan(5);
    expect((await health()).active).toBe(2);
  });

  test('no refused request left a row in the request log', async () => {
    await new Promise((r) => setTimeout(r, 600)); // the recorder writes in batches every 250 ms
    const rows = await t.sql`SELECT http_status FROM request_log WHERE endpoint_id = ${endpoint} AND http_status = 400`;
    expect(rows).toHaveLength(0);
  });
});
