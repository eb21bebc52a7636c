/**
 * Sampling controls on the built-in engine, end to end on the tiny generated GGUF: top_k and
 * min_p, the penalties, logit_bias, and logprobs (streamed and not), and the 400s that depend on
 * the model's vocabulary.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel, type Llama } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startEngineServer, type EngineServer } from '../../src/engine/server.js';
import { TINY_SPECIAL_TOKENS, writeTinyGguf } from '../support/tiny-gguf.js';

let dir: string;
let llama: Llama;
let server: EngineServer;
let eos: number;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sampling-'));
  const tiny = await writeTinyGguf(join(dir, 'tiny.gguf'));
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
  const model = await llama.loadModel({ modelPath: tiny.path });
  eos = model.tokens.eos!;
  await model.dispose();
  server = await startEngineServer({ llama, gpu: false, threads: 1, modelPath: tiny.path, contextSize: 1024, maxBatchSize: 2 });
}, 60_000);

afterAll(async () => {
  await server?.close(0);
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

type Json = Record<string, any>;
type Entry = { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] };
const messages = [{ role: 'user', content: 'Tell me a story.' }];

async function post(body: Json): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 48, ...body }),
  });
  return { status: res.status, json: (await res.json()) as Json };
}

async function answer(body: Json): Promise<{ content: string; finish: string; tokens: number; logprobs?: Entry[] }> {
  const { status, json } = await post(body);
  expect(status, JSON.stringify(json)).toBe(200);
  const choice = json.choices[0];
  return {
    content: choice.message.content,
    finish: choice.finish_reason,
    tokens: json.usage.completion_tokens,
    logprobs: choice.logprobs?.content,
  };
}

/** Each chunk's content and logprobs, in order. */
async function chunks(body: Json): Promise<{ content: string; logprobs?: Entry[]; finish: string | null }[]> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 48, ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  const out = [];
  for (const event of (await res.text()).split('\n\n')) {
    const data = event.slice('data: '.length);
    if (data === '' || data === '[DONE]') continue;
    const choice = (JSON.parse(data) as Json).choices[0];
    if (choice) out.push({ content: choice.delta.content ?? '', logprobs: choice.logprobs?.content, finish: choice.finish_reason });
  }
  return out;
}

const greedy = { temperature: 0 };
const distinct = (entries: Entry[]) => new Set(entries.map((e) => e.token)).size;

describe('filters', () => {
  test('top_k 1 and min_p 1 leave only the most likely token: the greedy answer at any temperature and seed', async () => {
    const reference = await answer(greedy);
    for (const seed of [1, 2]) {
      expect((await answer({ temperature: 1.5, seed, top_k: 1 })).content).toBe(reference.content);
      expect((await answer({ temperature: 1.5, seed, min_p: 1 })).content).toBe(reference.content);
    }
    // Without the filter the same seeds sample something else.
    expect((await answer({ temperature: 1.5, seed: 1 })).content).not.toBe(reference.content);
  });

  test('top_k above the vocabulary is a 400 naming it', async () => {
    const { status, json } = await post({ top_k: 100_000 });
    expect(status).toBe(400);
    expect(json.error).toMatchObject({ param: 'top_k', type: 'invalid_request_error' });
    expect(json.error.message).toMatch(/at most the model's vocabulary size, \d+/);
  });
});

describe('penalties', () => {
  test('frequency and presence penalties change how often answer tokens repeat; repetition_penalty changes the answer', async () => {
    const plain = (await answer({ ...greedy, max_tokens: 64, logprobs: true })).logprobs!;
    for (const penalty of ['frequency_penalty', 'presence_penalty']) {
      const discouraged = (await answer({ ...greedy, max_tokens: 64, logprobs: true, [penalty]: 2 })).logprobs!;
      const encouraged = (await answer({ ...greedy, max_tokens: 64, logprobs: true, [penalty]: -2 })).logprobs!;
      expect(distinct(discouraged), penalty).toBeGreaterThan(distinct(plain));
      expect(distinct(encouraged), penalty).toBeLessThan(distinct(plain));
    }
    const repeated = await answer({ ...greedy, max_tokens: 64, repetition_penalty: 3 });
    expect(repeated.content).not.toBe((await answer({ ...greedy, max_tokens: 64 })).content);
  });
});

describe('logit_bias', () => {
  test('+100 makes a token the only one sampled; -100 bans it', async () => {
    // Byte tokens come first in the tiny vocabulary: token 72 is "H".
    const forced = await answer({ ...greedy, max_tokens: 6, logit_bias: { '72': 100 } });
    expect(forced.content).toBe('HHHHHH');
    // The first one-byte token of the greedy answer (its id is its byte), banned.
    const first = (await answer({ ...greedy, logprobs: true })).logprobs!.find((e) => e.bytes.length === 1)!;
    const banned = await answer({ ...greedy, logprobs: true, logit_bias: { [String(first.bytes[0])]: -100 } });
    expect(banned.logprobs!.map((e) => e.token)).not.toContain(first.token);
  });

  test('a token outside the vocabulary, or one that ends generation, is a 400 naming the entry', async () => {
    const outside = await post({ logit_bias: { '99999': 5 } });
    expect(outside.status).toBe(400);
    expect(outside.json.error).toMatchObject({ param: 'logit_bias.99999' });
    expect(outside.json.error.message).toMatch(/not in the model's vocabulary \(ids 0 to \d+\)/);
    const ending = await post({ logit_bias: { [String(eos)]: -100 } });
    expect(ending.status).toBe(400);
    expect(ending.json.error).toMatchObject({ param: `logit_bias.${eos}` });
    expect(ending.json.error.message).toContain('ends generation');
  });
});

describe('in one batch', () => {
  test("each request keeps its own controls: a biased, penalized request with logprobs beside a plain one changes nothing of the plain one's answer", async () => {
    const reference = await answer(greedy);
    const [plain, biased] = await Promise.all([
      answer(greedy),
      answer({ ...greedy, logit_bias: { '72': 100 }, frequency_penalty: -2, logprobs: true, top_logprobs: 5 }),
    ]);
    expect(plain.content).toBe(reference.content);
    expect(plain.logprobs).toBeUndefined();
    expect(biased.content).toBe('H'.repeat(48));
    expect(biased.logprobs).toHaveLength(48);
  });
});

describe('logprobs', () => {
  test('one entry per answer token: its text, log probability, bytes, and the top alternatives, most likely first', async () => {
    const { content, tokens, logprobs } = await answer({ ...greedy, logprobs: true, top_logprobs: 3 });
    expect(logprobs).toHaveLength(tokens);
    expect(logprobs!.map((e) => e.token).join('')).toBe(content);
    for (const entry of logprobs!) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.bytes).toEqual([...Buffer.from(entry.token, 'utf8')]);
      expect(entry.top_logprobs).toHaveLength(3);
      const ranked = entry.top_logprobs.map((t) => t.logprob);
      expect(ranked).toEqual([...ranked].sort((a, b) => b - a));
      // Greedy: the token sampled is the most likely one.
      expect(entry.top_logprobs[0]).toEqual({ token: entry.token, logprob: entry.logprob, bytes: entry.bytes });
    }
    const without = await answer({ ...greedy, logprobs: true });
    expect(without.logprobs!.every((e) => e.top_logprobs.length === 0)).toBe(true);
    expect((await answer(greedy)).logprobs).toBeUndefined();
  });

  test('streamed: each chunk carries the entries of the text it carries; all of them equal the non-streamed ones', async () => {
    const body = { ...greedy, logprobs: true, top_logprobs: 2 };
    const whole = await answer(body);
    const parts = await chunks(body);
    const all: Entry[] = [];
    for (const part of parts) {
      if (part.logprobs) {
        expect(part.logprobs.map((e) => e.token).join('')).toBe(part.content);
        all.push(...part.logprobs);
      }
    }
    expect(all).toEqual(whole.logprobs);
    expect(parts.at(-1)!.finish).toBe('length');
  });

  test('the tokens of a stop string, cut from the answer, get no entry', async () => {
    const reference = await answer({ ...greedy, logprobs: true });
    const stop = reference.content.slice(10, 13);
    const cut = await answer({ ...greedy, logprobs: true, stop: [stop] });
    expect(cut.finish).toBe('stop');
    expect(cut.content).toBe(reference.content.slice(0, reference.content.indexOf(stop)));
    const entries = cut.logprobs!.map((e) => e.token).join('');
    expect(cut.content.startsWith(entries)).toBe(true);
    expect(cut.content.length - entries.length).toBeLessThan(4);
    expect(cut.logprobs).toEqual(reference.logprobs!.slice(0, cut.logprobs!.length));
  });

  test('a special token the answer leaves out (tokenizer_skip_special_tokens) is an entry with empty text: the entries still spell the answer', async () => {
    const counted = await fetch(`${server.url}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: TINY_SPECIAL_TOKENS.imStart }),
    });
    const imStart = ((await counted.json()) as { tokens: number[] }).tokens;
    expect(imStart).toHaveLength(1);
    const forced = await answer({ ...greedy, max_tokens: 3, logprobs: true, logit_bias: { [String(imStart[0])]: 100 } });
    expect(forced.content).toBe('');
    expect(forced.logprobs!.map((e) => e.token)).toEqual(['', '', '']);
    expect(forced.logprobs!.every((e) => e.bytes.length === 0)).toBe(true);
  });

  test('with JSON output the entries spell the JSON answer', async () => {
    const { content, logprobs } = await answer({
      seed: 3,
      temperature: 1,
      max_tokens: 200,
      logprobs: true,
      response_format: { type: 'json_object' },
    });
    expect(() => JSON.parse(content)).not.toThrow();
    expect(
      logprobs!
        .map((e) => e.token)
        .join('')
        .trimEnd(),
    ).toBe(content);
  });
});
