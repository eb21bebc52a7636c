/**
 * GraphQL chat against the contract, end to end through a real gateway whose engine is a small OpenAI-compatible
 * server run through ENGINE_COMMAND: a replica's answer that is not JSON, or past its bound, is the chat error it is
 * (502 `upstream_invalid`: in-band as a ChatCompletionError from createChatCompletion, the stream's error from the
 * chatCompletion subscription), and the request log records it so, not as a client's cancel; a refusal speaks the
 * GraphQL names the client sent (`maxTokens`, not `max_tokens`); and `seed` takes any safe integer, as REST does.
 * REST, a byte relay, passes an event that is not JSON on as it is, and records it as upstream_invalid (502) too.
 *
 * The engine: `GARBAGE` is answered with text where JSON should be (whole, or one event of a stream after a token);
 * `HUGE` with 2 MiB of JSON (whole) or a 2 MiB event (streamed), past the bound of a request of maxTokens 1; `SEED`
 * with the seed it received as the answer's text. Anything else gets a short valid answer.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openSse } from '../support/live-clients.js';
import { startTestApp, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { ANSWER_WHOLE_JS, CHUNK_JS, PUMP_JS } from '../support/scripted-engine.js';

const ENGINE = `
import http from 'node:http';
const port = Number(process.argv[2]);
${CHUNK_JS}
${ANSWER_WHOLE_JS}
${PUMP_JS}
http.createServer((req, res) => {
  if (req.method === 'GET') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok","active":0,"queued":0}');
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const request = JSON.parse(body);
    const text = JSON.stringify(request.messages ?? '');
    if (request.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: ' + chunk('hi') + '\\n\\n');
      if (text.includes('GARBAGE')) res.write('data: not json at all\\n\\n');
      if (text.includes('HUGE')) {
        res.write('data: {"id":"c","choices":[{"delta":{"content":"');
        return pump(res, 'y'.repeat(64 * 1024), 32, () => res.end('"}}]}\\n\\ndata: [DONE]\\n\\n'));
      }
      return res.end('data: [DONE]\\n\\n');
    }
    if (text.includes('GARBAGE')) return res.writeHead(200, { 'content-type': 'application/json' }).end('not json at all');
    if (text.includes('HUGE')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":"c","choices":[{"message":{"content":"');
      return pump(res, 'z'.repeat(64 * 1024), 32, () => res.end('"}}]}'));
    }
    if (text.includes('SEED')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm',
        choices: [{ index: 0, message: { role: 'assistant', content: JSON.stringify(request.seed) }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    }
    answerWhole(res);
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

let dir: string;
let t: TestApp;
let alice: SeededUser;
let endpoint: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'chat-contract-'));
  const script = path.join(dir, 'engine.mjs');
  await writeFile(script, ENGINE);
  t = await startTestApp({ env: { ENGINE_COMMAND: `"${process.execPath}" "${script}" {port} {model}` } });
  alice = await t.seed.user();
  const project = await alice.project('chat contract');
  endpoint = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_token_count: 4096, max_input_length: 1024 },
  });
  await waitForStatus(t.sql, endpoint, 'RUNNING', 60_000);
}, 90_000);

afterAll(() => rm(dir, { recursive: true, force: true }));

const MUTATION = `mutation($input: ChatCompletionInput!) { createChatCompletion(input: $input) {
  __typename
  ... on CreateChatCompletionSuccess { completion { choices { message { content } } } }
  ... on ChatCompletionError { message errorType code param status } } }`;
const SUBSCRIPTION = 'subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { choices { delta { content } } } }';

const input = (content: string, more: Record<string, unknown> = {}) => ({
  model: endpoint,
  messages: [{ role: 'user', content }],
  ...more,
});

async function mutate(variables: Record<string, unknown>, query = MUTATION) {
  const res = await alice.rest('POST', '/graphql', { query, variables });
  return res.body as { data?: { createChatCompletion: Record<string, unknown> }; errors?: { message: string }[] };
}

/** The request log's rows for the endpoint so far. */
const rows = () =>
  t.sql<{ http_status: number; error_code: string | null; cancelled: boolean }[]>`
    SELECT http_status, error_code, cancelled FROM request_log WHERE endpoint_id = ${endpoint} ORDER BY started_at`;

/** The row the next request leaves, once written (the log is written in batches). */
async function nextRow(send: () => Promise<void>) {
  const before = (await rows()).length;
  await send();
  return waitFor('the request recorded', async () => (await rows())[before]);
}

async function subscribe(variables: Record<string, unknown>) {
  const stream = await openSse(t.url, alice.key, SUBSCRIPTION, variables);
  await waitFor('the stream to end', async () => stream.ended !== undefined, 20_000);
  return stream.events.filter((e) => e.event === 'next').map((e) => e.data as { data?: unknown; errors?: unknown[] });
}

const INVALID = { http_status: 502, error_code: 'upstream_invalid', cancelled: false };

describe("a replica's answer that is not JSON, or past its bound", () => {
  test('subscription, a chunk that is not JSON: the stream ends with upstream_invalid, recorded as such (not as cancelled)', async () => {
    let nexts: Awaited<ReturnType<typeof subscribe>> = [];
    const row = await nextRow(async () => {
      nexts = await subscribe({ input: input('GARBAGE') });
    });
    expect(nexts[0]!.data).toEqual({ chatCompletion: { choices: [{ delta: { content: 'hi' } }] } });
    expect(nexts.at(-1)!.errors).toEqual([expect.objectContaining({ extensions: { code: 'upstream_invalid', status: 502 } })]);
    expect(row).toEqual(INVALID);
  });

  test('subscription, an event past the bound: the same chat error (upstream_invalid, 502), as a chunk that is not JSON', async () => {
    let nexts: Awaited<ReturnType<typeof subscribe>> = [];
    const row = await nextRow(async () => {
      nexts = await subscribe({ input: input('HUGE', { maxTokens: 1 }) });
    });
    expect(nexts.at(-1)!.errors).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/larger than this request can produce/),
        extensions: { code: 'upstream_invalid', status: 502 },
      }),
    ]);
    expect(row).toEqual(INVALID);
  });

  test('createChatCompletion, an answer past the bound: an in-band ChatCompletionError, as every other chat failure', async () => {
    let answer: Awaited<ReturnType<typeof mutate>> = {};
    const row = await nextRow(async () => {
      answer = await mutate({ input: input('HUGE', { maxTokens: 1 }) });
    });
    expect(answer.errors).toBeUndefined();
    expect(answer.data!.createChatCompletion).toEqual({
      __typename: 'ChatCompletionError',
      message: expect.stringMatching(/larger than this request can produce/),
      errorType: 'server_error',
      code: 'upstream_invalid',
      param: null,
      status: 502,
    });
    expect(row).toEqual(INVALID);
  });

  test('createChatCompletion, an answer that is not JSON: the ChatCompletionError, recorded as upstream_invalid (not a 200)', async () => {
    let answer: Awaited<ReturnType<typeof mutate>> = {};
    const row = await nextRow(async () => {
      answer = await mutate({ input: input('GARBAGE') });
    });
    expect(answer.data!.createChatCompletion).toMatchObject({ __typename: 'ChatCompletionError', code: 'upstream_invalid', status: 502 });
    expect(row).toEqual(INVALID);
  });
});

test('REST passes such an event on as it is, and records it as upstream_invalid (502), as GraphQL does', async () => {
  let text = '';
  const row = await nextRow(async () => {
    const res = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: endpoint, messages: [{ role: 'user', content: 'GARBAGE' }], stream: true }),
    });
    text = await res.text();
  });
  expect(text).toContain('data: not json at all\n\ndata: [DONE]');
  expect(row).toEqual(INVALID);
});

describe('refusals in the GraphQL names the client sent', () => {
  test.each([
    [{ maxTokens: 0 }, 'maxTokens', /^maxTokens must be at least 1/],
    [{ maxTokens: 5000 }, 'maxTokens', /maxTokenCount is 4096 tokens, but maxTokens asks for 5000.*Lower maxTokens below 4096/],
    [{ topLogprobs: 3 }, 'topLogprobs', /^topLogprobs /],
    [
      { chatTemplateKwargs: { add_generation_prompt: true } },
      'chatTemplateKwargs.add_generation_prompt',
      /^chatTemplateKwargs\.add_generation_prompt cannot be set: the engine passes add_generation_prompt/,
    ],
  ])('%j: param %s, and the message names it so', async (fields, param, message) => {
    const answer = await mutate({ input: input('hello', fields) });
    expect(answer.data!.createChatCompletion).toMatchObject({ __typename: 'ChatCompletionError', status: 400, param });
    expect(answer.data!.createChatCompletion.message).toMatch(message);
  });

  test("a message's field: messages[0].toolCallId, over the subscription too", async () => {
    const messages = [{ role: 'tool', content: 'sunny' }];
    const answer = await mutate({ input: { model: endpoint, messages } });
    expect(answer.data!.createChatCompletion).toMatchObject({
      param: 'messages[0].toolCallId',
      message: expect.stringMatching(/^messages\[0\]\.toolCallId is required/),
    });
    const nexts = await subscribe({ input: { model: endpoint, messages } });
    expect(nexts.at(-1)!.errors).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/^messages\[0\]\.toolCallId is required/),
        extensions: expect.objectContaining({ param: 'messages[0].toolCallId', status: 400 }),
      }),
    ]);
  });
});

describe('seed: any safe integer, as REST takes it', () => {
  const content = (answer: Awaited<ReturnType<typeof mutate>>) =>
    (answer.data?.createChatCompletion as { completion?: { choices: { message: { content: string } }[] } }).completion?.choices[0]!.message
      .content;

  test('past 32 bits, in the input variable, as a literal, and as a variable of its own; a 32-bit Int as before', async () => {
    expect(content(await mutate({ input: input('SEED', { seed: 2 ** 40 + 3 }) }))).toBe(String(2 ** 40 + 3));
    expect(content(await mutate({ input: input('SEED', { seed: -(2 ** 53 - 1) }) }))).toBe(String(-(2 ** 53 - 1)));
    expect(content(await mutate({ input: input('SEED', { seed: 7 }) }))).toBe('7');
    const literal = MUTATION.replace(
      'mutation($input: ChatCompletionInput!) { createChatCompletion(input: $input)',
      'mutation($m: ID!) { createChatCompletion(input: { model: $m, messages: [{ role: "user", content: "SEED" }], seed: 9007199254740991 })',
    );
    expect(content(await mutate({ m: endpoint }, literal))).toBe('9007199254740991');
    const own = MUTATION.replace(
      'mutation($input: ChatCompletionInput!) { createChatCompletion(input: $input)',
      'mutation($m: ID!, $seed: SafeInt) { createChatCompletion(input: { model: $m, messages: [{ role: "user", content: "SEED" }], seed: $seed })',
    );
    expect(content(await mutate({ m: endpoint, seed: 2 ** 33 }, own))).toBe(String(2 ** 33));
  });

  test('past 2^53 − 1, or not an integer: a GraphQL error naming input.seed and the range', async () => {
    for (const seed of [2 ** 53, 1.5, '12']) {
      const answer = await mutate({ input: input('SEED', { seed }) });
      expect(answer.data).toBeUndefined();
      expect(answer.errors![0]!.message).toMatch(/"input\.seed".*an integer from -9007199254740991 to 9007199254740991/);
    }
  });
});
