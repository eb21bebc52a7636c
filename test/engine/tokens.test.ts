/** The engine's /tokenize (prompt form) and /detokenize, vLLM's shapes, on the tiny generated GGUF. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel, type Llama } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startEngineServer, type EngineServer } from '../../src/engine/server.js';
import { TINY_SPECIAL_TOKENS, writeTinyGguf } from '../support/tiny-gguf.js';

let dir: string;
let llama: Llama;
let plain: EngineServer;
let special: EngineServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tokens-'));
  const tiny = await writeTinyGguf(join(dir, 'tiny.gguf'));
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
  const options = { llama, gpu: false as const, threads: 1, modelPath: tiny.path, contextSize: 256, maxBatchSize: 1 };
  plain = await startEngineServer(options);
  // tokenizer_add_special_tokens on, tokenizer_skip_special_tokens off.
  special = await startEngineServer({ ...options, addSpecialTokens: true, skipSpecialTokens: false });
}, 60_000);

afterAll(async () => {
  await Promise.all([plain?.close(0), special?.close(0)]);
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function post(server: EngineServer, path: string, body: unknown): Promise<{ status: number; json: Record<string, any> }> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

test('a prompt round-trips: its tokens, counted, and their text; special-token text is the special token', async () => {
  const prompt = `Hello, wörld ✓ ${TINY_SPECIAL_TOKENS.imEnd}`;
  const { status, json } = await post(plain, '/tokenize', { prompt });
  expect(status).toBe(200);
  expect(json).toMatchObject({ count: json.tokens.length, max_model_len: 256, max_input_length: 256 });
  expect(json.tokens.every((t: unknown) => Number.isInteger(t))).toBe(true);
  const imEnd = (await post(plain, '/tokenize', { prompt: TINY_SPECIAL_TOKENS.imEnd })).json.tokens;
  expect(imEnd).toHaveLength(1);
  expect(json.tokens.at(-1)).toBe(imEnd[0]);
  // Special tokens are skipped in text by default; kept with tokenizer_skip_special_tokens off.
  expect((await post(plain, '/detokenize', { tokens: json.tokens })).json).toEqual({ prompt: 'Hello, wörld ✓ ' });
  expect((await post(special, '/detokenize', { tokens: json.tokens })).json).toEqual({ prompt });
});

test('count_only leaves the list out', async () => {
  const { json } = await post(plain, '/tokenize', { prompt: 'Hello there', count_only: true });
  expect(json.tokens).toBeUndefined();
  expect(json.count).toBe((await post(plain, '/tokenize', { prompt: 'Hello there' })).json.tokens.length);
});

test("text completions: max_tokens defaults to 16, as in OpenAI's legacy completions", async () => {
  const { json } = await post(plain, '/v1/completions', { prompt: 'Hi', temperature: 0 });
  expect(json.usage.completion_tokens).toBe(16);
});

test('tokenizer_add_special_tokens prepends BOS to a raw prompt', async () => {
  const without = (await post(plain, '/tokenize', { prompt: 'Hi' })).json.tokens;
  const withBos = (await post(special, '/tokenize', { prompt: 'Hi' })).json.tokens;
  expect(withBos).toEqual([expect.any(Number), ...without]);
  expect((await post(special, '/detokenize', { tokens: withBos.slice(0, 1) })).json.prompt).toBe(TINY_SPECIAL_TOKENS.bos);
});

test('the chat form still counts only; bad bodies are 400s naming the field', async () => {
  const chat = await post(plain, '/tokenize', { messages: [{ role: 'user', content: 'Hi' }] });
  expect(chat.status).toBe(200);
  expect(chat.json.tokens).toBeUndefined();
  expect(chat.json.count).toBeGreaterThan(1);
  for (const [path, body, param] of [
    ['/tokenize', { prompt: 5 }, 'prompt'],
    ['/tokenize', { prompt: 'a\u0000b' }, 'prompt'],
    ['/detokenize', { tokens: 'abc' }, 'tokens'],
    ['/detokenize', { tokens: [1, -1] }, 'tokens[1]'],
    ['/detokenize', { tokens: [1, 2.5] }, 'tokens[1]'],
    ['/detokenize', { tokens: [99999] }, 'tokens[0]'],
  ] as const) {
    const { status, json } = await post(plain, path, body);
    expect(status, JSON.stringify(body)).toBe(400);
    expect(json.error.param, JSON.stringify(body)).toBe(param);
  }
  expect((await post(plain, '/detokenize', { tokens: [99999] })).json.error.message).toMatch(/vocabulary \(ids 0 to \d+\)/);
  const wrongMethod = await fetch(`${plain.url}/detokenize`);
  expect(wrongMethod.status).toBe(405);
});

describe('text completions (/v1/completions): the raw prompt, no chat template', () => {
  const complete = (body: Record<string, unknown>) => post(plain, '/v1/completions', { max_tokens: 12, temperature: 0, ...body });

  test('a text_completion of the prompt as tokenized; token ids give the same answer; streamed equals whole', async () => {
    const prompt = 'Once upon a time';
    const { tokens } = (await post(plain, '/tokenize', { prompt })).json;
    const whole = await complete({ prompt });
    expect(whole.status).toBe(200);
    expect(whole.json).toMatchObject({
      id: expect.stringMatching(/^cmpl-/),
      object: 'text_completion',
      model: expect.any(String),
      choices: [{ index: 0, text: expect.any(String), logprobs: null, finish_reason: 'length' }],
      usage: { prompt_tokens: tokens.length, completion_tokens: 12, total_tokens: tokens.length + 12 },
    });
    const text = whole.json.choices[0].text as string;
    expect(text.length).toBeGreaterThan(0);
    expect((await complete({ tokens })).json.choices[0].text).toBe(text);
    expect((await complete({ prompt: tokens })).json.choices[0].text).toBe(text);
    expect((await complete({ prompt: [prompt] })).json.choices[0].text).toBe(text);

    const res = await fetch(`${plain.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } }),
    });
    const events = (await res.text()).split('\n\n').filter((e) => e !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)) as Record<string, any>);
    expect(chunks.every((c) => c.object === 'text_completion')).toBe(true);
    const parts = chunks.filter((c) => c.choices.length > 0);
    expect(parts.map((c) => c.choices[0].text).join('')).toBe(text);
    expect(parts.at(-1)!.choices[0].finish_reason).toBe('length');
    expect(chunks.at(-1)!.usage).toEqual(whole.json.usage);
  });

  test("legacy logprobs: each token, its logprob, the alternatives as a map, and its text's offset", async () => {
    const { json } = await complete({ prompt: 'Hello', logprobs: 2, stop: ['zz'] });
    const { text, logprobs } = json.choices[0];
    expect(logprobs.tokens.join('')).toBe(text);
    expect(logprobs.token_logprobs).toHaveLength(logprobs.tokens.length);
    let offset = 0;
    logprobs.tokens.forEach((token: string, i: number) => {
      expect(logprobs.text_offset[i]).toBe(offset);
      offset += token.length;
      // Greedy: the token is its position's likeliest.
      expect(logprobs.top_logprobs[i][token]).toBe(logprobs.token_logprobs[i]);
      expect(Object.keys(logprobs.top_logprobs[i]).length).toBeLessThanOrEqual(2);
    });
  });

  test('refusals name the field: no prompt, both forms, an id outside the vocabulary, too long, asks not supported', async () => {
    for (const [body, param] of [
      [{}, 'prompt'],
      [{ prompt: 'a', tokens: [1] }, 'tokens'],
      [{ tokens: [1, 99_999] }, 'tokens[1]'],
      [{ prompt: [5, 99_999] }, 'prompt[1]'],
      [{ tokens: [] }, 'tokens'],
      [{ prompt: ['a', 'b'] }, 'prompt'],
      [{ prompt: 'x'.repeat(600) }, 'prompt'],
      [{ prompt: 'a', echo: true }, 'echo'],
      [{ prompt: 'a', suffix: 'b' }, 'suffix'],
      [{ prompt: 'a', best_of: 2 }, 'best_of'],
      [{ prompt: 'a', logprobs: 6 }, 'logprobs'],
      [{ prompt: 'a', logprobs: true }, 'logprobs'],
      [{ prompt: 'a', logprobs: 2, top_logprobs: 2 }, 'top_logprobs'],
      [{ prompt: '' }, 'prompt'],
      [{ prompt: 'a', echo: 1 }, 'echo'],
      [{ prompt: 'a', suffix: 5 }, 'suffix'],
    ] as const) {
      const { status, json } = await complete(body);
      expect(status, JSON.stringify(body)).toBe(400);
      expect(json.error.param, JSON.stringify(body)).toBe(param);
    }
  });
});
