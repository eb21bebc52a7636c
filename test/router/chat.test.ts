/**
 * Chat completions through the gateway, with real clients: the official
 * `openai` package, a raw SSE reader, graphql-ws and GraphQL over SSE, against
 * real engine replicas of the tiny model.
 */
import OpenAI from 'openai';
import { createClient as createWsClient } from 'graphql-ws';
import WebSocket from 'ws';
import { beforeAll, describe, expect, test } from 'vitest';
import { CreateChatCompletionDocument } from '../../src/sdk/client.js';
import {
  liveReplicaRows,
  startTestApp,
  statusTrail,
  TINY_REPO,
  TINY_TOOLS_REPO,
  waitFor,
  waitForStatus,
  type SeededUser,
  type TestApp,
  replicaHealth,
} from '../support/app.js';
import { VERDICT_FORMAT } from '../support/response-formats.js';

let t: TestApp;
let alice: SeededUser;
let bob: SeededUser;
let endpoint: string;
let thinking: string;
let withTools: string;
let openai: OpenAI;

const MESSAGES = [{ role: 'user' as const, content: 'Tell me a story.' }];

beforeAll(async () => {
  t = await startTestApp({ env: { QUEUE_TIMEOUT_MS: '800', WAKE_TIMEOUT_MS: '60000', CPU_SLOTS: '8' } });
  alice = await t.seed.user();
  bob = await t.seed.user();
  const project = await alice.project('chat');
  endpoint = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 2, max_token_count: 4096, max_input_length: 64 },
  });
  thinking = await project.endpoint({
    hfModelRepo: 'test-org/tiny-thinking-GGUF',
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 2, max_token_count: 1024, max_input_length: 256 },
  });
  withTools = await project.endpoint({
    hfModelRepo: TINY_TOOLS_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 2, max_token_count: 2048 },
  });
  await waitForStatus(t.sql, endpoint, 'RUNNING');
  await waitForStatus(t.sql, thinking, 'RUNNING');
  await waitForStatus(t.sql, withTools, 'RUNNING');
  openai = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
});

/** Reads an SSE response line by line, as it arrives. */
async function readSse(response: Response, onEvent?: (data: string) => void): Promise<string[]> {
  const events: string[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      expect(event.startsWith('data: ')).toBe(true);
      events.push(event.slice(6));
      onEvent?.(event.slice(6));
    }
  }
  expect(buffer).toBe('');
  return events;
}

function rawChat(body: Record<string, unknown>, key = alice.key, signal?: AbortSignal) {
  return fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

describe('the openai client', () => {
  test('non-streaming: one chat.completion with exact usage', async () => {
    const completion = await openai.chat.completions.create({
      model: endpoint,
      messages: MESSAGES,
      max_tokens: 12,
      temperature: 0,
      seed: 7,
    });
    expect(completion.object).toBe('chat.completion');
    expect(completion.choices[0]!.message.role).toBe('assistant');
    expect(completion.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(completion.choices[0]!.finish_reason).toBe('length');
    expect(completion.usage!.completion_tokens).toBe(12);
    expect(completion.usage!.prompt_tokens).toBeGreaterThan(5);
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + 12);
  });

  test('streaming: the streamed text equals the non-streamed text at temperature 0 with a seed; usage when asked', async () => {
    const request = { model: endpoint, messages: MESSAGES, max_tokens: 24, temperature: 0, seed: 3 };
    const whole = await openai.chat.completions.create(request);
    const stream = await openai.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe('length');
    expect(usage).toEqual(whole.usage);
  });

  test("another team's key gets 404, as does an unknown model; no key gets 401", async () => {
    const foreign = new OpenAI({ apiKey: bob.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
    await expect(foreign.chat.completions.create({ model: endpoint, messages: MESSAGES })).rejects.toMatchObject({
      status: 404,
      code: 'model_not_found',
    });
    await expect(openai.chat.completions.create({ model: 'ep_nope', messages: MESSAGES })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const anonymous = new OpenAI({ apiKey: 'dek_wrong', baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
    await expect(anonymous.chat.completions.create({ model: endpoint, messages: MESSAGES })).rejects.toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
  });

  test('response_format json_schema: the answer follows the schema, streamed or not; a schema the engine cannot enforce is a 400 naming it', async () => {
    const response_format = VERDICT_FORMAT;
    const request = { model: endpoint, messages: MESSAGES, max_tokens: 200, temperature: 0, seed: 3, response_format };
    const completion = await openai.chat.completions.create(request);
    const content = completion.choices[0]!.message.content!;
    expect(JSON.parse(content)).toEqual({ answer: expect.stringMatching(/^(yes|no)$/), sure: expect.any(Boolean) });
    const stream = await openai.chat.completions.create({ ...request, stream: true });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? '';
    expect(streamed).toBe(content);
    const refused = await openai.chat.completions
      .create({
        ...request,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a+' } } },
      })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({
      param: 'response_format.json_schema.schema',
      message: expect.stringContaining('schema.pattern is not supported'),
    });
  });

  test("tools: the client's tool runner gets a named tool's call (whole and streamed), runs it, and the conversation goes on with its result", async () => {
    const tools = [
      {
        type: 'function' as const,
        function: {
          name: 'get_weather',
          description: 'The weather in a city',
          parameters: {
            type: 'object',
            properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } },
            required: ['city'],
            additionalProperties: false,
          },
          parse: JSON.parse,
          function: (args: { city: string }) => ({ city: args.city, sky: 'clear' }),
        },
      },
    ];
    const request = {
      model: withTools,
      messages: MESSAGES,
      max_tokens: 64,
      temperature: 0,
      tools,
      tool_choice: { type: 'function' as const, function: { name: 'get_weather' } },
    };
    for (const stream of [false, true]) {
      const runner = stream ? openai.chat.completions.runTools({ ...request, stream: true }) : openai.chat.completions.runTools(request);
      const result = (await runner.finalFunctionToolCallResult()) as string;
      expect(JSON.parse(result)).toEqual({ city: expect.stringMatching(/^(Paris|Rome)$/), sky: 'clear' });
      const [, assistant, tool] = runner.messages as Array<Record<string, any>>;
      expect(assistant).toMatchObject({ role: 'assistant', tool_calls: [{ type: 'function', function: { name: 'get_weather' } }] });
      expect(tool).toMatchObject({ role: 'tool', tool_call_id: assistant!.tool_calls[0].id });
      const answer = await openai.chat.completions.create({
        model: withTools,
        messages: runner.messages,
        max_tokens: 4,
        tools,
        tool_choice: 'none',
      });
      expect(answer.choices[0]!.message.tool_calls).toBeUndefined();
    }
    const refused = await openai.chat.completions
      .create({ ...request, tool_choice: { type: 'function', function: { name: 'get_time' } } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ param: 'tool_choice.function.name' });
  });

  test('sampling controls: logprobs with alternatives, streamed or not, logit_bias, penalties; a token outside the vocabulary is a 400 naming it', async () => {
    const request = { model: endpoint, messages: MESSAGES, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 };
    const completion = await openai.chat.completions.create(request);
    const entries = completion.choices[0]!.logprobs!.content!;
    expect(entries).toHaveLength(8);
    expect(entries.map((e) => e.token).join('')).toBe(completion.choices[0]!.message.content);
    expect(entries[0]!.top_logprobs).toHaveLength(2);
    const stream = await openai.chat.completions.create({ ...request, stream: true });
    const streamed: OpenAI.ChatCompletionTokenLogprob[] = [];
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    expect(streamed).toEqual(entries);
    // Token 72 is "H" in the tiny vocabulary (bytes first).
    const forced = await openai.chat.completions.create({ model: endpoint, messages: MESSAGES, max_tokens: 4, logit_bias: { '72': 100 } });
    expect(forced.choices[0]!.message.content).toBe('HHHH');
    const penalized = await openai.chat.completions.create({
      ...request,
      max_tokens: 48,
      frequency_penalty: -2,
      logprobs: true,
      top_logprobs: 0,
    });
    expect(new Set(penalized.choices[0]!.logprobs!.content!.map((e) => e.token)).size).toBeLessThan(8);
    const refused = await openai.chat.completions.create({ ...request, logit_bias: { '99999': 1 } }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ param: 'logit_bias.99999', message: expect.stringContaining("not in the model's vocabulary") });
  });

  test('a body over 1 MiB is a 413 in the OpenAI error shape', async () => {
    const huge = [{ role: 'user' as const, content: 'x'.repeat(2 << 20) }];
    await expect(openai.chat.completions.create({ model: endpoint, messages: huge })).rejects.toMatchObject({
      status: 413,
      code: 'request_too_large',
    });
  });

  test('limits: a prompt over max_input_length, and prompt + max_tokens over max_token_count, are 400s naming the numbers', async () => {
    const long = [{ role: 'user' as const, content: 'word '.repeat(100) }];
    const overInput = await openai.chat.completions.create({ model: endpoint, messages: long }).catch((e: unknown) => e);
    expect(overInput).toBeInstanceOf(OpenAI.BadRequestError);
    expect((overInput as Error).message).toMatch(/\d+ tokens/);
    expect((overInput as Error).message).toContain('64');
    const overTotal = await openai.chat.completions
      .create({ model: endpoint, messages: MESSAGES, max_tokens: 5000 })
      .catch((e: unknown) => e);
    expect(overTotal).toBeInstanceOf(OpenAI.BadRequestError);
    expect((overTotal as Error).message).toContain('4096');
    const invalid = await openai.chat.completions.create({ model: endpoint, messages: MESSAGES, temperature: 7 }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 400, param: 'temperature' });
  });
});

describe('text completions (/dedicated/v1/completions)', () => {
  test('the openai client: a raw prompt completed, streamed equal to whole, legacy logprobs; token ids; refusals name the field', async () => {
    const request = { model: endpoint, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
    const whole = await openai.completions.create(request);
    expect(whole.object).toBe('text_completion');
    expect(whole.choices[0]!.finish_reason).toBe('length');
    expect(whole.usage!.completion_tokens).toBe(10);
    const text = whole.choices[0]!.text;
    expect(text.length).toBeGreaterThan(0);
    const stream = await openai.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let streamed = '';
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.text ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(streamed).toBe(text);
    expect(usage).toEqual(whole.usage);
    expect(whole.id).toMatch(/^cmpl-/);
    // Logged like a chat answer, time to the first token included.
    const row = await waitFor('the log row', async () => {
      const rows =
        await t.sql`SELECT * FROM request_log WHERE endpoint_id = ${endpoint} AND stream AND completion_tokens = 10 ORDER BY id DESC LIMIT 1`;
      return rows[0];
    });
    expect(row).toMatchObject({ http_status: 200, prompt_tokens: usage!.prompt_tokens, finish_reason: 'length' });
    expect(row.ttft_ms).toBeGreaterThan(0);
    // Without max_tokens, 16 (OpenAI's legacy default).
    expect((await openai.completions.create({ model: endpoint, prompt: 'Hi', temperature: 0 })).usage!.completion_tokens).toBe(16);
    const withLogprobs = await openai.completions.create({ ...request, logprobs: 2 });
    expect(withLogprobs.choices[0]!.logprobs!.tokens!.join('')).toBe(text);
    // The same prompt as token ids (the documented API's `tokens`).
    const { tokens } = (await (
      await fetch(`${t.url}/dedicated/v1/tokenize`, {
        method: 'POST',
        headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: endpoint, prompt: request.prompt }),
      })
    ).json()) as { tokens: number[] };
    expect((await openai.completions.create({ ...request, prompt: tokens })).choices[0]!.text).toBe(text);
    expect(whole.usage!.prompt_tokens).toBe(tokens.length);
    // A prompt of ids over max_input_length (64) is refused with its count; an id outside the vocabulary, by the replica.
    const long = await openai.completions
      .create({ ...request, prompt: Array.from({ length: 80 }, () => tokens[0]!) })
      .catch((e: unknown) => e);
    expect(long).toMatchObject({ status: 400, param: 'prompt', message: expect.stringContaining('The prompt has 80 tokens') });
    const unknown = await openai.completions.create({ ...request, prompt: [1, 99_999] }).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 400, param: 'prompt[1]' });
    const echo = await openai.completions.create({ ...request, echo: true }).catch((e: unknown) => e);
    expect(echo).toMatchObject({ status: 400, param: 'echo' });
    const foreign = new OpenAI({ apiKey: bob.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
    await expect(foreign.completions.create(request)).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  });
});

describe('tokenize and detokenize', () => {
  const call = (path: string, body: unknown, key: string | null = alice.key, method = 'POST') =>
    fetch(`${t.url}/dedicated/v1/${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      ...(method === 'POST' ? { body: JSON.stringify(body) } : {}),
    });

  test("the endpoint's tokenizer: a prompt's tokens, and back to its text", async () => {
    const prompt = 'Hello, wörld: tell me a story.';
    const tokenized = await call('tokenize', { model: endpoint, prompt });
    expect(tokenized.status).toBe(200);
    const { tokens } = (await tokenized.json()) as { tokens: number[] };
    expect(tokens.length).toBeGreaterThan(5);
    expect(tokens.every((id) => Number.isInteger(id) && id >= 0)).toBe(true);
    const detokenized = await call('detokenize', { model: endpoint, tokens });
    expect(detokenized.status).toBe(200);
    expect(await detokenized.json()).toEqual({ text: prompt });
  });

  test("refusals: 400 naming the field (the replica's own for a token outside its vocabulary), 404 for a foreign endpoint, 401, 405", async () => {
    for (const [path, body, param] of [
      ['tokenize', { model: endpoint }, 'prompt'],
      ['tokenize', { model: endpoint, prompt: 7 }, 'prompt'],
      ['detokenize', { model: endpoint, tokens: [1, -1] }, 'tokens[1]'],
      ['detokenize', { model: endpoint, tokens: 'abc' }, 'tokens'],
      ['detokenize', { model: endpoint, tokens: [1, 99_999] }, 'tokens[1]'],
      ['tokenize', { prompt: 'hi' }, 'model'],
    ] as const) {
      const response = await call(path, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(((await response.json()) as { error: { param: string } }).error.param, JSON.stringify(body)).toBe(param);
    }
    const outside = await call('detokenize', { model: endpoint, tokens: [99_999] });
    expect(((await outside.json()) as { error: { message: string } }).error.message).toMatch(
      /not in the model's vocabulary \(ids 0 to \d+\)/,
    );
    const foreign = await call('tokenize', { model: endpoint, prompt: 'hi' }, bob.key);
    expect(foreign.status).toBe(404);
    expect(((await foreign.json()) as { error: { code: string } }).error.code).toBe('model_not_found');
    expect((await call('tokenize', { model: endpoint, prompt: 'hi' }, null)).status).toBe(401);
    const get = await call('detokenize', undefined, alice.key, 'GET');
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  test('at most 4 run at once per endpoint: a fifth is a 429 at once, with Retry-After', async () => {
    // The replica is paused: the four admitted calls wait in it, so that the others meet four places taken.
    const [replica] = await liveReplicaRows(t.sql, endpoint);
    process.kill(replica!.pid, 'SIGSTOP');
    let answers: Response[];
    try {
      let settled = 0;
      const calls = Array.from({ length: 7 }, () =>
        call('tokenize', { model: endpoint, prompt: 'Once upon a time' }).then((answer) => {
          settled++;
          return answer;
        }),
      );
      // The three beyond the limit are refused while the four wait on the paused replica.
      await waitFor('the calls beyond the limit to be refused', async () => settled >= 3, 20_000);
      expect(settled).toBe(3);
      process.kill(replica!.pid, 'SIGCONT');
      answers = await Promise.all(calls);
    } finally {
      process.kill(replica!.pid, 'SIGCONT');
    }
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429, 429]);
    const refused = answers.find((a) => a.status === 429)!;
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
    // The places are given back: one more goes through.
    expect((await call('tokenize', { model: endpoint, prompt: 'hi' })).status).toBe(200);
  });
});

describe('the wire format', () => {
  test('raw SSE: role chunk, content deltas, finish chunk, [DONE]; no usage chunk unless asked', async () => {
    const response = await rawChat({ model: endpoint, messages: MESSAGES, max_tokens: 6, temperature: 0, stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await readSse(response);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    for (const chunk of chunks) {
      expect(chunk).toMatchObject({ object: 'chat.completion.chunk', model: expect.any(String), created: expect.any(Number) });
      expect(chunk.choices).toHaveLength(1);
      expect(chunk.usage ?? null).toBeNull();
    }
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    expect(chunks.at(-1).choices[0].finish_reason).toBe('length');
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  test('the request is logged with time to first token, tokens in and out, and duration', async () => {
    const completion = await openai.chat.completions.create({
      model: endpoint,
      messages: MESSAGES,
      max_tokens: 5,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of completion) if (chunk.usage) usage = chunk.usage;
    const row = await waitFor('the log row', async () => {
      const rows =
        await t.sql`SELECT * FROM request_log WHERE endpoint_id = ${endpoint} AND stream AND completion_tokens = 5 ORDER BY id DESC LIMIT 1`;
      return rows[0];
    });
    expect(row).toMatchObject({
      http_status: 200,
      prompt_tokens: usage!.prompt_tokens,
      completion_tokens: 5,
      finish_reason: 'length',
      cancelled: false,
      user_id: alice.user.id,
    });
    expect(row.ttft_ms).toBeGreaterThan(0);
    expect(row.duration_ms).toBeGreaterThanOrEqual(row.ttft_ms);
  });
});

describe('reasoning', () => {
  const ask = (kwargs?: Record<string, unknown>, stream = false) =>
    rawChat({
      model: thinking,
      messages: MESSAGES,
      max_tokens: 8,
      temperature: 0,
      stream,
      ...(kwargs ? { chat_template_kwargs: kwargs } : {}),
    });

  test('enable_thinking true: the think block goes to reasoning_content, never mixed with content', async () => {
    const whole = (await (await ask({ enable_thinking: true })).json()) as {
      choices: { message: { content: string; reasoning_content?: string } }[];
    };
    expect(whole.choices[0]!.message.reasoning_content!.length).toBeGreaterThan(0);
    expect(whole.choices[0]!.message.content).toBe('');
    const events = await readSse(await ask({ enable_thinking: true }, true));
    const deltas = events.slice(0, -1).map((e) => JSON.parse(e).choices[0].delta as { content?: string; reasoning_content?: string });
    for (const delta of deltas) expect(delta.content !== undefined && delta.reasoning_content !== undefined).toBe(false);
    expect(deltas.map((d) => d.reasoning_content ?? '').join('')).toBe(whole.choices[0]!.message.reasoning_content);
  });

  test('enable_thinking false: only content; omitted: the model family default (this template reasons)', async () => {
    const off = (await (await ask({ enable_thinking: false })).json()) as {
      choices: { message: { content: string; reasoning_content?: string } }[];
    };
    expect(off.choices[0]!.message.content.length).toBeGreaterThan(0);
    expect(off.choices[0]!.message.reasoning_content).toBeUndefined();
    const byDefault = (await (await ask()).json()) as { choices: { message: { content: string; reasoning_content?: string } }[] };
    expect(byDefault.choices[0]!.message.reasoning_content!.length).toBeGreaterThan(0);
  });
});

describe('backpressure and cancellation', () => {
  test('more concurrent requests than replicas x max_batch_size queue; past the wait the answer is 429 with Retry-After', async () => {
    const clients = new AbortController();
    const long = [0, 1].map(() =>
      rawChat({ model: endpoint, messages: MESSAGES, max_tokens: 3900, temperature: 0, stream: true }, alice.key, clients.signal).catch(
        () => undefined,
      ),
    );
    await waitFor('both slots busy', async () => (await replicaHealth(t.sql, endpoint)).active === 2);
    const third = await rawChat({ model: endpoint, messages: MESSAGES, max_tokens: 4 });
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    // retry-after-ms (OpenAI's SDKs read it first) spreads a burst's retries over the second's latter half.
    const retryMs = Number(third.headers.get('retry-after-ms'));
    expect(retryMs).toBeGreaterThanOrEqual(500);
    expect(retryMs).toBeLessThanOrEqual(1000);
    expect(await third.json()).toMatchObject({ error: { type: 'rate_limit_error', code: 'queue_full' } });
    clients.abort();
    await Promise.all(long);
    await waitFor('the slots to be freed', async () => (await replicaHealth(t.sql, endpoint)).active === 0);
    expect((await rawChat({ model: endpoint, messages: MESSAGES, max_tokens: 2 })).status).toBe(200);
  });

  test('a client that disconnects mid-stream cancels the generation on the replica and frees its slot', async () => {
    const client = new AbortController();
    const response = await rawChat(
      { model: endpoint, messages: MESSAGES, max_tokens: 3900, temperature: 0, stream: true },
      alice.key,
      client.signal,
    );
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.read();
    client.abort();
    await waitFor('the replica to stop generating', async () => (await replicaHealth(t.sql, endpoint)).active === 0, 10_000);
    const before = (await replicaHealth(t.sql, endpoint)).totalCompletionTokens;
    await new Promise((r) => setTimeout(r, 300));
    expect((await replicaHealth(t.sql, endpoint)).totalCompletionTokens).toBe(before);
    const row = await waitFor(
      'the log row',
      async () => (await t.sql`SELECT cancelled FROM request_log WHERE endpoint_id = ${endpoint} AND cancelled LIMIT 1`)[0],
    );
    expect(row.cancelled).toBe(true);
  });
});

describe('waking and holding', () => {
  test('a request to a SLEEPING endpoint wakes it and is answered once it serves', async () => {
    const project = await alice.project('sleepy');
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 0, maxReplica: 1, cooldownPeriod: 600 },
      advanced: { max_token_count: 1024 },
    });
    await waitForStatus(t.sql, id, 'RUNNING');
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
    await waitForStatus(t.sql, id, 'SLEEPING');
    // Greedy: a sampled answer of random weights may be the end token alone (an empty answer, which failed this once).
    const completion = await openai.chat.completions.create({ model: id, messages: MESSAGES, max_tokens: 3, temperature: 0 });
    expect(completion.choices[0]!.message.content!.length).toBeGreaterThan(0);
    // The request is served as soon as a replica is READY; the endpoint's RUNNING is written just after.
    await waitForStatus(t.sql, id, 'RUNNING');
    expect((await statusTrail(t.sql, id)).slice(-5)).toEqual(['STOPPING', 'SLEEPING', 'AWAKING ENGINE_INITIALIZING', 'READY', 'RUNNING']);
    const [wake] = await t.sql`SELECT cause, actor_id FROM endpoint_events WHERE endpoint_id = ${id} AND status = 'AWAKING'`;
    expect(wake).toMatchObject({ cause: 'api:wake', actor_id: alice.user.id });
  });

  test('a request to an INITIALIZING endpoint is held until it serves; a FAILED one is refused at once', async () => {
    const project = await alice.project('fresh');
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, advanced: { max_token_count: 1024 } });
    const completion = await openai.chat.completions.create({ model: id, messages: MESSAGES, max_tokens: 2 });
    expect(completion.usage!.completion_tokens).toBe(2);

    const failed = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
    await waitForStatus(t.sql, failed, 'FAILED');
    const started = Date.now();
    const refused = await openai.chat.completions.create({ model: failed, messages: MESSAGES }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 409, code: 'endpoint_not_running' });
    expect((refused as Error).message).toContain('WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe('GraphQL', () => {
  const SUBSCRIPTION = `subscription($input: ChatCompletionInput!) {
    chatCompletion(input: $input) { id choices { delta { role content reasoningContent } finishReason } usage { promptTokens completionTokens totalTokens } }
  }`;

  test('the chatCompletion subscription over graphql-ws streams the same text as REST', async () => {
    const input = { model: endpoint, messages: MESSAGES, maxTokens: 10, temperature: 0, seed: 5, includeUsage: true };
    const whole = await openai.chat.completions.create({ model: endpoint, messages: MESSAGES, max_tokens: 10, temperature: 0, seed: 5 });
    const client = createWsClient({
      url: `${t.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${alice.key}` },
    });
    const chunks: {
      choices: { delta: { role: string | null; content: string | null }; finishReason: string | null }[];
      usage: { completionTokens: number } | null;
    }[] = [];
    await new Promise<void>((resolve, reject) => {
      client.subscribe(
        { query: SUBSCRIPTION, variables: { input } },
        {
          next: (r) => chunks.push((r.data as { chatCompletion: (typeof chunks)[number] }).chatCompletion),
          error: reject,
          complete: resolve,
        },
      );
    });
    await client.dispose();
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(whole.choices[0]!.message.content);
    expect(chunks.at(-1)!.usage!.completionTokens).toBe(10);
  });

  test('closing the subscription cancels the generation', async () => {
    const client = createWsClient({
      url: `${t.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${alice.key}` },
    });
    let received = 0;
    await new Promise<void>((resolve, reject) => {
      const unsubscribe = client.subscribe(
        { query: SUBSCRIPTION, variables: { input: { model: endpoint, messages: MESSAGES, maxTokens: 3900, temperature: 0 } } },
        {
          next: () => {
            if (++received === 3) {
              unsubscribe();
              resolve();
            }
          },
          error: reject,
          complete: () => {},
        },
      );
    });
    await waitFor('the replica to stop generating', async () => (await replicaHealth(t.sql, endpoint)).active === 0, 10_000);
    await client.dispose();
  });

  test('the subscription over SSE (GraphQL over HTTP)', async () => {
    const response = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: SUBSCRIPTION,
        variables: { input: { model: endpoint, messages: MESSAGES, maxTokens: 4, temperature: 0 } },
      }),
    });
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    const text = await response.text();
    const data = text
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trim())
      .filter(Boolean)
      .map((d) => JSON.parse(d));
    const chunks = data.filter((d) => d.data).map((d) => d.data.chatCompletion);
    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.at(-1).choices[0].finishReason).toBe('length');
  });

  test('createChatCompletion returns the whole answer; errors are typed', async () => {
    const ok = await alice.graphql.request(CreateChatCompletionDocument, {
      input: { model: endpoint, messages: MESSAGES, maxTokens: 3, temperature: 0 },
    });
    expect(ok.createChatCompletion).toMatchObject({
      __typename: 'CreateChatCompletionSuccess',
      completion: { usage: { completionTokens: 3 }, choices: [{ finishReason: 'length', logprobs: null }] },
    });
    const sampled = await alice.graphql.request(CreateChatCompletionDocument, {
      input: { model: endpoint, messages: MESSAGES, maxTokens: 3, temperature: 0, topK: 5, logprobs: true, topLogprobs: 1 },
    });
    if (sampled.createChatCompletion.__typename !== 'CreateChatCompletionSuccess') throw new Error(JSON.stringify(sampled));
    const [choice] = sampled.createChatCompletion.completion.choices;
    expect(choice!.logprobs).toHaveLength(3);
    expect(choice!.logprobs!.map((e) => e.token).join('')).toBe(choice!.message.content);
    expect(choice!.logprobs![0]!.topLogprobs[0]).toEqual({
      token: choice!.logprobs![0]!.token,
      logprob: choice!.logprobs![0]!.logprob,
      bytes: choice!.logprobs![0]!.bytes,
    });
    const badBias = await alice.graphql.request(CreateChatCompletionDocument, {
      input: { model: endpoint, messages: MESSAGES, logitBias: { x: 1 } },
    });
    expect(badBias.createChatCompletion).toMatchObject({ __typename: 'ChatCompletionError', status: 400, param: 'logitBias' });
    // Below a JSON field, the param keeps the client's own keys (json_schema, not jsonSchema).
    const badSchema = await alice.graphql.request(CreateChatCompletionDocument, {
      input: {
        model: endpoint,
        messages: MESSAGES,
        responseFormat: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a+' } } },
      },
    });
    expect(badSchema.createChatCompletion).toMatchObject({ status: 400, param: 'responseFormat.json_schema.schema' });
    const tooHot = await alice.graphql.request(CreateChatCompletionDocument, {
      input: { model: endpoint, messages: MESSAGES, temperature: 9 },
    });
    expect(tooHot.createChatCompletion).toMatchObject({ __typename: 'ChatCompletionError', status: 400, param: 'temperature' });
    const json = await alice.graphql.request(CreateChatCompletionDocument, {
      input: {
        model: endpoint,
        messages: MESSAGES,
        maxTokens: 100,
        seed: 2,
        responseFormat: {
          type: 'json_schema',
          json_schema: { name: 'flag', schema: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'] } },
        },
      },
    });
    if (json.createChatCompletion.__typename !== 'CreateChatCompletionSuccess') throw new Error(JSON.stringify(json));
    expect(JSON.parse(json.createChatCompletion.completion.choices[0]!.message.content!)).toEqual({ on: expect.any(Boolean) });
    const foreign = await bob.graphql.request(CreateChatCompletionDocument, { input: { model: endpoint, messages: MESSAGES } });
    expect(foreign.createChatCompletion).toMatchObject({ __typename: 'ChatCompletionError', status: 404, code: 'model_not_found' });
  });

  test('tools: a forced call comes back as toolCalls (content null); the conversation goes on with toolCalls and toolCallId; refusals name the GraphQL field', async () => {
    const tools = [
      { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } } },
    ];
    const called = await alice.graphql.request(CreateChatCompletionDocument, {
      input: { model: withTools, messages: MESSAGES, tools, toolChoice: 'required', parallelToolCalls: false },
    });
    if (called.createChatCompletion.__typename !== 'CreateChatCompletionSuccess') throw new Error(JSON.stringify(called));
    const [choice] = called.createChatCompletion.completion.choices;
    expect(choice).toMatchObject({ finishReason: 'tool_calls', message: { content: null } });
    expect(choice!.message.toolCalls).toEqual([
      { index: null, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_time', arguments: '{}' } },
    ]);
    const call = choice!.message.toolCalls![0]!;
    const followUp = await alice.graphql.request(CreateChatCompletionDocument, {
      input: {
        model: withTools,
        messages: [
          ...MESSAGES,
          { role: 'assistant', toolCalls: [{ id: call.id, type: 'function', function: call.function }] },
          { role: 'tool', toolCallId: call.id, content: '12:00' },
        ],
        tools,
        toolChoice: 'none',
        maxTokens: 4,
      },
    });
    expect(followUp.createChatCompletion.__typename).toBe('CreateChatCompletionSuccess');
    const unknown = await alice.graphql.request(CreateChatCompletionDocument, {
      input: { model: withTools, messages: MESSAGES, tools, toolChoice: { type: 'function', function: { name: 'nope' } } },
    });
    expect(unknown.createChatCompletion).toMatchObject({
      __typename: 'ChatCompletionError',
      status: 400,
      param: 'toolChoice.function.name',
    });
    const orphan = await alice.graphql.request(CreateChatCompletionDocument, {
      input: { model: withTools, messages: [...MESSAGES, { role: 'tool', toolCallId: 'call_x', content: 'x' }] },
    });
    expect(orphan.createChatCompletion).toMatchObject({ __typename: 'ChatCompletionError', status: 400, param: 'messages[1].toolCallId' });
  });
});

describe('several gateways', () => {
  test('a second gateway process on the same database routes to the same replicas', async () => {
    const { startGateway } = await import('../../src/gateway.js');
    const { createServices } = await import('../../src/services/index.js');
    const other = await startGateway(t.sql, createServices(t.sql), { port: 0, host: '127.0.0.1', log: () => {} });
    try {
      const client = new OpenAI({ apiKey: alice.key, baseURL: `${other.url}/dedicated/v1`, maxRetries: 0 });
      const completion = await client.chat.completions.create({
        model: endpoint,
        messages: MESSAGES,
        max_tokens: 3,
        temperature: 0,
        seed: 9,
      });
      const direct = await openai.chat.completions.create({ model: endpoint, messages: MESSAGES, max_tokens: 3, temperature: 0, seed: 9 });
      expect(completion.choices[0]!.message.content).toBe(direct.choices[0]!.message.content);
    } finally {
      await other.close();
    }
  });
});
