/**
 * node-llama-cpp called directly (a child process): the baseline of the
 * cold-start and batching benchmarks. It loads the model the way the built-in
 * engine does (prebuilt binary, CPU), times each step since its own process
 * started, generates a first token, and optionally measures decoding
 * throughput with `level` sequences of one context decoding at once (the
 * engine's batching, without HTTP, JSON or the scheduler).
 */
import { childMain } from '../lib/env.js';

export interface LlamaDirectConfig {
  modelPath: string;
  contextSize: number;
  sequences: number;
  threads: number;
  /** Concurrent generations to measure, each for `durationMs`. */
  levels: number[];
  maxTokens: number;
  durationMs: number;
  /**
   * 'chat': the prompt the engine evaluates for the same message, rendered with the model's chat
   * template by the engine's own renderer (once, before the first token), so that both sides
   * decode the same tokens. 'raw' (default): the message text alone.
   */
  prompt?: 'chat' | 'raw';
  /** Also time one decode step of each of these many tokens (one sequence, after an 8-token prefix). */
  stepTokens?: number[];
}

export interface LlamaDirectResult {
  /** Milliseconds since this process started. */
  importedMs: number;
  llamaMs: number;
  modelMs: number;
  contextMs: number;
  firstTokenMs: number;
  throughput: { level: number; tokens: number; seconds: number; tokensPerSecond: number; requests: number }[];
  promptTokens: number;
  /** Median milliseconds of one decode step of `tokens` tokens (config.stepTokens). */
  steps: { tokens: number; ms: number }[];
}

childMain<LlamaDirectConfig, LlamaDirectResult>(async (config) => {
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const importedMs = performance.now();
  const llama = await getLlama({ gpu: false, build: 'never', progressLogs: false, logLevel: LlamaLogLevel.warn });
  const llamaMs = performance.now();
  const model = await llama.loadModel({ modelPath: config.modelPath });
  const modelMs = performance.now();
  const context = await model.createContext({
    contextSize: config.contextSize,
    sequences: config.sequences,
    threads: config.threads,
    failedCreationRemedy: false,
  });
  const sequences = Array.from({ length: config.sequences }, () => context.getSequence());
  const contextMs = performance.now();
  const message = 'Hi there, tell me something.';
  let prompt = model.tokenize(message);
  if (config.prompt === 'chat') {
    const { ChatPromptRenderer } = await import('../../src/engine/prompt.js');
    prompt = new ChatPromptRenderer(model, { addSpecialTokens: false }).render([{ role: 'user', content: message }], {}).tokens;
  }

  // A new seed each answer, as the engine's load sends: answers of varied length, not one repeated.
  let seed = 0;
  const generate = async (index: number, maxTokens: number): Promise<number> => {
    const sequence = sequences[index]!;
    await sequence.clearHistory();
    let n = 0;
    for await (const token of sequence.evaluate(prompt, {
      temperature: 0.8,
      topK: 0,
      topP: 1,
      minP: 0,
      seed: ++seed,
      yieldEogToken: true,
    })) {
      n++;
      // Like the engine: the end-of-generation token counts and ends the answer (evaluate() would go on past it).
      if (n >= maxTokens || model.isEogToken(token)) break;
    }
    return n;
  };

  await generate(0, 1);
  const firstTokenMs = performance.now();

  const throughput: LlamaDirectResult['throughput'] = [];
  for (const level of config.levels) {
    const start = performance.now();
    const end = start + config.durationMs;
    let tokens = 0;
    let requests = 0;
    await Promise.all(
      Array.from({ length: level }, async (_, i) => {
        while (performance.now() < end) {
          // Not `tokens += await …`: that reads `tokens` before the await, and the other loops'
          // additions made meanwhile would be lost (at N in flight, about N−1 of every N).
          const n = await generate(i, config.maxTokens);
          tokens += n;
          requests++;
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    throughput.push({ level, tokens, seconds, tokensPerSecond: tokens / seconds, requests });
  }
  const steps: LlamaDirectResult['steps'] = [];
  if (config.stepTokens && config.stepTokens.length > 0) {
    const sequence = sequences[0]!;
    const text = model.tokenize('The quick brown fox jumps over the lazy dog. '.repeat(16));
    for (const k of config.stepTokens) {
      const times: number[] = [];
      for (let r = 0; r < 5; r++) {
        await sequence.clearHistory();
        await sequence.evaluateWithoutGeneratingNewTokens(text.slice(0, 8));
        const t0 = performance.now();
        await sequence.evaluateWithoutGeneratingNewTokens(text.slice(8, 8 + k));
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      steps.push({ tokens: k, ms: times[2]! });
    }
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return { importedMs, llamaMs, modelMs, contextMs, firstTokenMs, throughput, promptTokens: prompt.length, steps };
});
