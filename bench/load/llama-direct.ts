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
}

export interface LlamaDirectResult {
  /** Milliseconds since this process started. */
  importedMs: number;
  llamaMs: number;
  modelMs: number;
  contextMs: number;
  firstTokenMs: number;
  throughput: { level: number; tokens: number; seconds: number; tokensPerSecond: number; requests: number }[];
}

childMain<LlamaDirectConfig, LlamaDirectResult>(async (config) => {
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const importedMs = performance.now();
  const llama = await getLlama({ gpu: false, build: 'never', progressLogs: false, logLevel: LlamaLogLevel.warn });
  const llamaMs = performance.now();
  const model = await llama.loadModel({ modelPath: config.modelPath });
  const modelMs = performance.now();
  const context = await model.createContext({ contextSize: config.contextSize, sequences: config.sequences, threads: config.threads, failedCreationRemedy: false });
  const sequences = Array.from({ length: config.sequences }, () => context.getSequence());
  const contextMs = performance.now();
  const prompt = model.tokenize('Hi there, tell me something.');

  const generate = async (index: number, maxTokens: number): Promise<number> => {
    const sequence = sequences[index]!;
    await sequence.clearHistory();
    let n = 0;
    for await (const token of sequence.evaluate(prompt, { temperature: 0.8, topK: 0, topP: 1, minP: 0, seed: index + 1, yieldEogToken: true })) {
      void token;
      n++;
      if (n >= maxTokens) break;
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
          tokens += await generate(i, config.maxTokens);
          requests++;
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    throughput.push({ level, tokens, seconds, tokensPerSecond: tokens / seconds, requests });
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return { importedMs, llamaMs, modelMs, contextMs, firstTokenMs, throughput };
});
