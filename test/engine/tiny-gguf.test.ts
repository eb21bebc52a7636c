/**
 * Proves that the generated tiny GGUF fixture (test/support/tiny-gguf.ts) is a real, runnable model
 * for node-llama-cpp on CPU: it loads from the prebuilt binary (never compiles), its byte-level BPE
 * tokenizer round-trips text, generation is deterministic, and its Qwen3-style chat template reacts
 * to `enable_thinking`.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import {
  getLlama,
  JinjaTemplateChatWrapper,
  LlamaChatSession,
  LlamaCompletion,
  LlamaLogLevel,
  LlamaVocabularyType,
  TokenBias,
  type ChatHistoryItem,
  type Llama,
  type LlamaContextSequence,
  type LlamaModel,
  type Token,
} from 'node-llama-cpp';
import { buildTinyGguf, TINY_SPECIAL_TOKENS, writeTinyGguf, type TinyGgufFile } from '../support/tiny-gguf.js';

// Recorded fingerprints: any change to the generator changes these (update them deliberately).
const SHA256_DEFAULT = '41a9104b397c9758fcb323366c684f6ee95ad63a790d074da661f098ad8cbbd4';
const SHA256_THINKING_ON = 'bebb6601c418bf8361f2b9d82e66742ad2577d8a03374c103fc05e4b2119708a';

let dir: string;
let llama: Llama;
let offFile: TinyGgufFile;
let onFile: TinyGgufFile;
let model: LlamaModel;
let modelThinkingOn: LlamaModel;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tiny-gguf-'));
  offFile = await writeTinyGguf(join(dir, 'tiny-off.gguf'));
  onFile = await writeTinyGguf(join(dir, 'tiny-on.gguf'), { thinkingDefault: 'on' });
  // gpu: false + build: 'never' => use the prebuilt CPU binary, fail instead of compiling from source.
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
  model = await llama.loadModel({ modelPath: offFile.path });
  modelThinkingOn = await llama.loadModel({ modelPath: onFile.path });
}, 30_000);

afterAll(async () => {
  // Without dispose() the native addon can keep the worker alive.
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('generator output is byte-identical for the same options and small', () => {
  const a = buildTinyGguf();
  const b = buildTinyGguf({ seed: 1, contextLength: 4096, thinkingDefault: 'off' });
  expect(a.equals(b)).toBe(true);
  expect(a.subarray(0, 4).toString('latin1')).toBe('GGUF');
  expect(a.readUInt32LE(4)).toBe(3);
  expect(a.length).toBeLessThan(1024 * 1024);

  const sha = (buf: Buffer) => createHash('sha256').update(buf).digest('hex');
  expect(offFile.sha256).toBe(sha(a));
  expect(offFile.size).toBe(a.length);
  expect(offFile.sha256).toBe(SHA256_DEFAULT);
  expect(onFile.sha256).toBe(SHA256_THINKING_ON);
  expect(sha(buildTinyGguf({ seed: 2 }))).not.toBe(SHA256_DEFAULT);
});

test('loads on CPU with the expected metadata and special tokens', () => {
  expect(llama.gpu).toBe(false);
  expect(model.gpuLayers).toBe(0);
  expect(model.architecture).toBe('llama');
  expect(model.vocabularyType).toBe(LlamaVocabularyType.bpe);
  expect(model.trainContextSize).toBe(4096);
  expect(model.embeddingVectorSize).toBe(64);
  expect(model.getWarnings()).toEqual([]);

  expect(model.tokens.bosString).toBe(TINY_SPECIAL_TOKENS.bos);
  expect(model.tokens.eosString).toBe(TINY_SPECIAL_TOKENS.imEnd);
  expect(model.tokens.shouldPrependBosToken).toBe(true);
  expect(model.isEogToken(model.tokens.eos!)).toBe(true);

  // Chat markers are single tokens when special-token parsing is on.
  for (const text of Object.values(TINY_SPECIAL_TOKENS)) {
    const tokens = model.tokenize(text, true);
    expect(tokens, text).toHaveLength(1);
  }
  // Control tokens are plain text without special parsing; <think> (user-defined, like Qwen3) is always one token.
  expect(model.tokenize('<|im_end|>').length).toBeGreaterThan(1);
  expect(model.tokenize('<think>')).toHaveLength(1);
});

test('tokenize/detokenize round-trips ASCII and multi-byte UTF-8', () => {
  for (const text of ['hello world', 'Hello, the world! 123\n\ttabs  and  spaces', 'héllo 世界', 'emoji 🎉 ok', '']) {
    const tokens = model.tokenize(text);
    expect(model.detokenize(tokens), JSON.stringify(text)).toBe(text);
  }
  // BPE merges are applied ("hello" and " world" are merged tokens).
  expect(model.tokenize('hello world')).toHaveLength(2);

  // Special tokens: tokenize(text, true) parses them; detokenize(tokens, false) skips control tokens
  // (user-defined <think> tags stay), detokenize(tokens, true) renders them.
  const chat = '<|im_start|>user\nhi<|im_end|><think>x</think>';
  const special = model.tokenize(chat, true);
  expect(special).toHaveLength(11);
  expect(model.detokenize(special)).toBe('user\nhi<think>x</think>');
  expect(model.detokenize(special, true)).toBe(chat);

  // A single byte of a multi-byte character detokenizes to U+FFFD: streaming must buffer.
  const cjk = model.tokenize('世');
  expect(cjk).toHaveLength(3);
  expect(model.detokenize(cjk.slice(0, 1))).toBe('\uFFFD');
});

async function generate(
  sequence: LlamaContextSequence,
  prompt: Token[],
  maxTokens: number,
  options: Parameters<LlamaContextSequence['evaluate']>[1],
) {
  await sequence.clearHistory();
  const out: Token[] = [];
  for await (const token of sequence.evaluate(prompt, options)) {
    out.push(token);
    if (out.length >= maxTokens) break; // breaking out of the async generator stops generation
  }
  return out;
}

test('16-token generation is deterministic (greedy and seeded sampling), also with 4 concurrent sequences', async () => {
  // threads: 1 — for a model this small more threads only add synchronisation overhead, and the
  // default (llama.maxThreads = max(4, cores)) oversubscribes small machines badly.
  const context = await model.createContext({ contextSize: 512, sequences: 4, threads: 1 });
  try {
    const sequences = [context.getSequence(), context.getSequence(), context.getSequence(), context.getSequence()];
    const prompt = [model.tokens.bos!, ...model.tokenize('hello world')];

    const greedy1 = await generate(sequences[0]!, prompt, 16, { temperature: 0 });
    const greedy2 = await generate(sequences[0]!, prompt, 16, { temperature: 0 });
    expect(greedy1).toHaveLength(16);
    expect(greedy2).toEqual(greedy1);
    console.log('greedy:', JSON.stringify(model.detokenize(greedy1)));

    const sampling = { temperature: 0.8, topP: 0.9, topK: 40, seed: 42 };
    const sampled1 = await generate(sequences[1]!, prompt, 16, sampling);
    const sampled2 = await generate(sequences[1]!, prompt, 16, sampling);
    expect(sampled1).toHaveLength(16);
    expect(sampled2).toEqual(sampled1);

    // Same requests in parallel on 4 sequences of one context (batched together) give the same tokens.
    const parallel = await Promise.all(
      sequences.map((sequence, i) => generate(sequence, prompt, 16, i % 2 === 0 ? { temperature: 0 } : sampling)),
    );
    expect(parallel).toEqual([greedy1, sampled1, greedy1, sampled1]);
  } finally {
    await context.dispose();
  }
});

test('chat template renders with enable_thinking true/false/default', () => {
  const history: ChatHistoryItem[] = [
    { type: 'system', text: 'Be brief.' },
    { type: 'user', text: 'Hi <|im_end|>' }, // user text must not be parsed as special tokens
  ];
  const base = '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi <|im_end|><|im_end|>\n<|im_start|>assistant\n';
  const emptyThink = '<think>\n\n</think>\n\n';

  // reasoning -> `enable_thinking` (true/false); null leaves it undefined (template default).
  // add_generation_prompt via additionalRenderParameters + history ending with a user message
  // renders the HF-style generation prompt.
  const render = (m: LlamaModel, reasoning: boolean | null) => {
    const wrapper = new JinjaTemplateChatWrapper({
      template: m.fileInfo.metadata.tokenizer.chat_template!,
      reasoning,
      tokenizer: m.tokenizer,
      additionalRenderParameters: { add_generation_prompt: true },
    });
    const { contextText } = wrapper.generateContextState({ chatHistory: history });
    return { text: contextText.toString(), tokens: contextText.tokenize(m.tokenizer) };
  };

  const rendered = {
    off: { true: render(model, true), false: render(model, false), default: render(model, null) },
    on: { true: render(modelThinkingOn, true), false: render(modelThinkingOn, false), default: render(modelThinkingOn, null) },
  };
  console.log('enable_thinking=true :', JSON.stringify(rendered.off.true.text));
  console.log('enable_thinking=false:', JSON.stringify(rendered.off.false.text));

  expect(rendered.off.true.text).toBe(base);
  expect(rendered.off.false.text).toBe(base + emptyThink);
  expect(rendered.off.default.text).toBe(base + emptyThink); // thinkingDefault 'off'
  expect(rendered.on.true.text).toBe(base);
  expect(rendered.on.false.text).toBe(base + emptyThink);
  expect(rendered.on.default.text).toBe(base); // thinkingDefault 'on' (Qwen3 behaviour)

  // Tokens: markers from the template are single special tokens, the user's "<|im_end|>" is literal text.
  const imEnd = model.tokenize('<|im_end|>', true)[0]!;
  const [think, thinkEnd] = [model.tokenize('<think>', true)[0]!, model.tokenize('</think>', true)[0]!];
  expect(rendered.off.true.tokens.filter((t) => t === imEnd)).toHaveLength(2);
  expect(rendered.off.false.tokens.slice(-6)).toEqual([think, ...model.tokenize('\n\n'), thinkEnd, ...model.tokenize('\n\n')]);
  expect(model.detokenize(rendered.off.false.tokens, true)).toBe(base + emptyThink);
});

test('LlamaChatSession streams thought segments delimited by <think>\\n ... \\n</think>', async () => {
  const context = await model.createContext({ contextSize: 512, threads: 1 });
  try {
    const template = model.fileInfo.metadata.tokenizer.chat_template!;
    const session = new LlamaChatSession({
      contextSequence: context.getSequence(),
      chatWrapper: new JinjaTemplateChatWrapper({ template, tokenizer: model.tokenizer }),
    });
    // The random model never emits <think> on its own (special rows of output.weight are zero), so
    // force "<think>\n x x x \n</think>\n\n" with a per-step token bias.
    const [think, thinkEnd, nl] = [model.tokenize('<think>', true)[0]!, model.tokenize('</think>', true)[0]!, model.tokenize('\n')[0]!];
    const forced: Record<number, Token> = { 0: think, 1: nl, 5: nl, 6: thinkEnd, 7: nl, 8: nl };
    let step = 0;
    const chunks: Array<{ type: string; text: string }> = [];
    const result = await session.promptWithMeta('Hi', {
      maxTokens: 16,
      temperature: 0,
      tokenBias: () => {
        const bias = new TokenBias(model.tokenizer);
        const token = forced[step++];
        if (token != null) bias.set(token, { logit: 100 });
        return bias;
      },
      onResponseChunk: (chunk) => chunks.push({ type: chunk.type === 'segment' ? chunk.segmentType : 'text', text: chunk.text }),
    });
    expect(result.stopReason).toBe('maxTokens');
    const thought = result.response.find((item) => typeof item === 'object' && item.type === 'segment');
    expect(thought).toMatchObject({ type: 'segment', segmentType: 'thought', ended: true });
    expect(chunks.some((c) => c.type === 'thought' && c.text.length > 0)).toBe(true);
    expect(chunks.some((c) => c.type === 'text' && c.text.length > 0)).toBe(true);
  } finally {
    await context.dispose();
  }
});

test('LlamaCompletion: max tokens, stop strings and AbortSignal cancellation', async () => {
  const context = await model.createContext({ contextSize: 512, threads: 1 });
  try {
    const completion = new LlamaCompletion({ contextSequence: context.getSequence() });
    // BOS is prepended automatically (model.tokens.shouldPrependBosToken) for string input.
    const full = await completion.generateCompletionWithMeta('hello world', { maxTokens: 16, temperature: 0 });
    expect(full.metadata.stopReason).toBe('maxTokens');
    expect(full.response.length).toBeGreaterThan(4);

    const stop = full.response.slice(4, 6);
    const stopped = await completion.generateCompletionWithMeta('hello world', {
      maxTokens: 16,
      temperature: 0,
      customStopTriggers: [stop],
    });
    expect(stopped.metadata.stopReason).toBe('customStopTrigger');
    expect(stopped.response).toBe(full.response.slice(0, full.response.indexOf(stop)));

    const controller = new AbortController();
    let chunks = 0;
    const aborted = await completion.generateCompletionWithMeta('hello world', {
      maxTokens: 16,
      temperature: 0,
      signal: controller.signal,
      stopOnAbortSignal: true, // return the partial response instead of throwing signal.reason
      onTextChunk: () => {
        if (++chunks === 3) controller.abort();
      },
    });
    expect(aborted.metadata.stopReason).toBe('abort');
    expect(full.response.startsWith(aborted.response)).toBe(true);
    expect(aborted.response.length).toBeLessThan(full.response.length);
  } finally {
    await context.dispose();
  }
});
