/**
 * A prompt too long to fit is refused before it is tokenized (issue 31): no token of the model
 * covers more bytes than the longest entry of its vocabulary, so text longer than max_input_length
 * of them cannot fit. A 150,000-word prompt used to hold the engine's event loop while it was
 * tokenized (its health checks unanswered, the replica killed as hung); now it gets the usual
 * 400 at once, and a normal request beside it is served. An honest long prompt is tokenized in
 * turns, so that /health answers meanwhile. A conversation of more messages than a request may
 * hold (2,048) is refused before the chat template renders any of them: rendering runs over every
 * message, at once, and 36,000 empty ones (well under 1 MiB) held the event loop for seconds.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { getLlama, JinjaTemplateChatWrapper, LlamaLogLevel, LlamaModel, type Llama } from 'node-llama-cpp';
import { MAX_MESSAGES } from '../../src/domain/chat-request.js';
import { startEngineServer, type EngineServer } from '../../src/engine/server.js';
import { textPieces } from '../../src/engine/prompt-tokens.js';
import { writeTinyGguf, type TinyGgufFile } from '../support/tiny-gguf.js';

const MAX_INPUT_LENGTH = 1024;

let dir: string;
let llama: Llama;
let file: TinyGgufFile;
let server: EngineServer;
/** An engine that takes long prompts (its max_input_length is its whole context). */
let wide: EngineServer;
/** Native tokenize calls on text longer than 100,000 characters, by every model of this process. */
let longTokenizations = 0;
const tokenize = LlamaModel.prototype.tokenize;
/** Chat template renderings, by every engine of this process. */
let renderings = 0;
const generateContextState = JinjaTemplateChatWrapper.prototype.generateContextState;

beforeAll(async () => {
  LlamaModel.prototype.tokenize = function (this: LlamaModel, ...args: Parameters<LlamaModel['tokenize']>) {
    if (typeof args[0] === 'string' && args[0].length > 100_000) longTokenizations++;
    return (tokenize as (...a: unknown[]) => ReturnType<LlamaModel['tokenize']>).apply(this, args);
  } as LlamaModel['tokenize'];
  JinjaTemplateChatWrapper.prototype.generateContextState = function (this: JinjaTemplateChatWrapper, ...args) {
    renderings++;
    return generateContextState.apply(this, args);
  };
  dir = await mkdtemp(join(tmpdir(), 'prompt-bound-'));
  file = await writeTinyGguf(join(dir, 'tiny.gguf'), { contextLength: 65536 });
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
  const common = { llama, gpu: false as const, threads: 1, modelPath: file.path };
  server = await startEngineServer({ ...common, contextSize: 2048, maxInputLength: MAX_INPUT_LENGTH, maxBatchSize: 2 });
  wide = await startEngineServer({ ...common, contextSize: 65536, maxBatchSize: 1 });
}, 60_000);

afterAll(async () => {
  LlamaModel.prototype.tokenize = tokenize;
  JinjaTemplateChatWrapper.prototype.generateContextState = generateContextState;
  await Promise.all([server?.close(0), wide?.close(0)]);
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** 150,000 words, about 1 MB: far more than 1,024 tokens of any length. */
const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i % 97}`).join(' ');

async function post(base: string, path: string, body: unknown) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

test('a 150,000-word prompt is a 400 before it is tokenized, and a normal request beside it is served', async () => {
  const long = words(150_000);
  const before = longTokenizations;
  const t0 = performance.now();
  const [refused, normal] = await Promise.all([
    post(server.url, '/v1/chat/completions', { messages: [{ role: 'user', content: long }], max_tokens: 4 }),
    post(server.url, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
  ]);
  const ms = performance.now() - t0;
  expect(refused.status, JSON.stringify(refused.body).slice(0, 300)).toBe(400);
  expect(refused.body.error).toMatchObject({ code: 'context_length_exceeded', param: 'messages', type: 'invalid_request_error' });
  expect(refused.body.error.message).toMatch(/^The prompt has at least \d+ tokens \(\d+ bytes of text, .* max_input_length of 1024 tokens/);
  expect(normal.status, JSON.stringify(normal.body)).toBe(200);
  expect(normal.body.usage.completion_tokens).toBe(4);
  // Nothing of the long prompt was tokenized; a generous bound for a loaded machine.
  expect(longTokenizations).toBe(before);
  expect(ms).toBeLessThan(2_000);
});

test('the same bound on /tokenize (both forms) and /v1/completions; /detokenize takes at most the context in ids', async () => {
  const long = words(150_000);
  const before = longTokenizations;
  const answers = await Promise.all([
    post(server.url, '/tokenize', { messages: [{ role: 'user', content: long }] }),
    post(server.url, '/tokenize', { prompt: long }),
    post(server.url, '/v1/completions', { prompt: long, max_tokens: 4 }),
    // Tools are written into the prompt as template text: counted too (under the parser's 128 KiB of tools).
    post(server.url, '/v1/chat/completions', {
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'f', description: words(14_000), parameters: { type: 'object' } } }],
      max_tokens: 4,
    }),
  ]);
  for (const [i, answer] of answers.entries()) {
    expect(answer.status, `${i}: ${JSON.stringify(answer.body).slice(0, 300)}`).toBe(400);
    expect(answer.body.error.code, String(i)).toBe('context_length_exceeded');
    expect(answer.body.error.message, String(i)).toMatch(/^The prompt has at least \d+ tokens/);
  }
  expect(answers.map((a) => a.body.error.param)).toEqual(['messages', 'prompt', 'prompt', 'messages']);
  expect(longTokenizations).toBe(before);
  // Under the bound, counted as before.
  const counted = await post(server.url, '/tokenize', { prompt: words(100) });
  expect(counted.status).toBe(200);
  expect(counted.body.count).toBeGreaterThan(100);
  // Ids: the context's worth is detokenized, one more is refused.
  expect((await post(server.url, '/detokenize', { tokens: Array(2048).fill(100) })).status).toBe(200);
  const tooMany = await post(server.url, '/detokenize', { tokens: Array(2049).fill(100) });
  expect(tooMany.status).toBe(400);
  expect(tooMany.body.error).toMatchObject({ param: 'tokens' });
  expect(tooMany.body.error.message).toContain('more than this model');
});

test(`more than ${MAX_MESSAGES} messages: a 400 naming messages and the limit, before the template renders them`, async () => {
  const messages = (n: number) => Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: '' }));
  const before = renderings;
  const answers = await Promise.all([
    post(server.url, '/v1/chat/completions', { messages: messages(MAX_MESSAGES + 1), max_tokens: 1 }),
    post(server.url, '/tokenize', { messages: messages(MAX_MESSAGES + 1) }),
  ]);
  for (const [i, answer] of answers.entries()) {
    expect(answer.status, `${i}: ${JSON.stringify(answer.body).slice(0, 300)}`).toBe(400);
    expect(answer.body.error, String(i)).toMatchObject({ param: 'messages', type: 'invalid_request_error' });
    expect(answer.body.error.message, String(i)).toBe(`messages may contain at most ${MAX_MESSAGES} messages (got ${MAX_MESSAGES + 1})`);
  }
  expect(renderings).toBe(before);
  // At the limit the conversation is rendered and counted (by the engine whose max_input_length it fits).
  const counted = await post(wide.url, '/tokenize', { messages: messages(MAX_MESSAGES) });
  expect(counted.status, JSON.stringify(counted.body).slice(0, 300)).toBe(200);
  expect(counted.body.count).toBeGreaterThan(MAX_MESSAGES);
  expect(renderings).toBeGreaterThan(before);
});

test('an honest long prompt is tokenized in turns: /health answers meanwhile, and the tokens are those of one call', async () => {
  // About 350,000 tokens, under the byte bound of 65,536 tokens: tokenized (a second or more), then refused by its count.
  const long = words(60_000);
  const answered: number[] = [];
  let done = false;
  const polling = (async () => {
    while (!done) {
      const res = await fetch(`${wide.url}/health`);
      if (res.ok && !done) answered.push(performance.now());
      await res.arrayBuffer();
    }
  })();
  const answer = await post(wide.url, '/tokenize', { messages: [{ role: 'user', content: long }] });
  done = true;
  await polling;
  expect(answer.status).toBe(200);
  expect(answer.body.count).toBeGreaterThan(65_536 / 2);
  // Health checks answered while the prompt was being tokenized: one native call would have held them all.
  expect(answered.length).toBeGreaterThanOrEqual(3);

  // Pieces are cut only between words, and give the tokens of the whole.
  const model = await llama.loadModel({ modelPath: file.path });
  try {
    const pieces = textPieces(long);
    expect(pieces.length).toBeGreaterThan(10);
    expect(pieces.join('')).toBe(long);
    const whole = model.tokenize(long, false, 'trimLeadingSpace');
    expect(pieces.flatMap((piece) => model.tokenize(piece, false, 'trimLeadingSpace'))).toEqual(whole);
  } finally {
    await model.dispose();
  }
}, 60_000);
