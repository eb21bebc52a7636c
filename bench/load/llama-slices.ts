/**
 * Raw node-llama-cpp on demand (a child process of bench/engine-overhead.ts): loads the model like
 * bench/load/llama-direct.ts (one context, the engine's chat-rendered prompt, the same sampling),
 * announces `ready`, then for each `{ type: 'slice', ms, level, seed, variant }` keeps `level` generations
 * in flight for `ms` and answers `{ type: 'slice', tokens, seconds, cpuMs }`; `{ type: 'stop' }`
 * ends it. `variant: 'generate'` runs the engine's own generation loop (src/engine/generation.ts)
 * instead of the bare evaluate() loop: the engine's per-token work without HTTP. Slices let the benchmark alternate raw and engine every few hundred milliseconds, so
 * that a busy shared machine weighs on both alike.
 */
import type { LlamaContext } from 'node-llama-cpp';
import { childMain } from '../lib/env.js';

export interface LlamaSlicesConfig {
  modelPath: string;
  contextSize: number;
  sequences: number;
  threads: number;
  maxTokens: number;
  /** Decode batches on the engine's schedule (src/engine/scheduler.ts dispatchWhenAllQueued) instead of node-llama-cpp's default. */
  engineDispatch?: boolean;
  /** Keep the KV cache of the prompt prefix the sequence holds, as the engine does (src/engine/generation.ts). */
  reusePrefix?: boolean;
}

childMain<LlamaSlicesConfig, { done: true }>(async (config, send, receive) => {
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const { ChatPromptRenderer } = await import('../../src/engine/prompt.js');
  const { generate: engineGenerate, resetSequence } = await import('../../src/engine/generation.js');
  const llama = await getLlama({ gpu: false, build: 'never', progressLogs: false, logLevel: LlamaLogLevel.warn });
  const model = await llama.loadModel({ modelPath: config.modelPath });
  const { dispatchWhenAllQueued } = await import('../../src/engine/scheduler.js');
  let active = 0;
  const context: LlamaContext = await model.createContext({
    contextSize: config.contextSize,
    sequences: config.sequences,
    threads: config.threads,
    failedCreationRemedy: false,
    ...(config.engineDispatch
      ? {
          batching: {
            dispatchSchedule: dispatchWhenAllQueued(
              () => context,
              () => active,
            ),
          },
        }
      : {}),
  });
  const sequences = Array.from({ length: config.sequences }, () => context.getSequence());
  const renderer = new ChatPromptRenderer(model, { addSpecialTokens: false });
  const prompt = renderer.render([{ role: 'user', content: 'Hi there, tell me something.' }], {}).tokens;
  const never = new AbortController().signal;
  /** The engine's own generation loop (src/engine/generation.ts) on the same sequence: its per-token work without HTTP. */
  const viaEngine = async (index: number): Promise<number> => {
    const result = await engineGenerate(
      sequences[index]!,
      model,
      {
        promptTokens: prompt,
        maxTokens: config.maxTokens,
        temperature: 0.8,
        topP: 1,
        seed: ++seed,
        stop: [],
        reasoning: { enabled: renderer.supportsThinking, startInReasoning: false },
      },
      { reusePrefix: config.reusePrefix === true, skipSpecialTokens: true, thinkTagTokens: renderer.thinkTagTokens },
      { onSegment: () => {} },
      never,
    );
    return result.completionTokens;
  };
  let seed = 0;
  const generate = async (index: number): Promise<number> => {
    const sequence = sequences[index]!;
    const start = await resetSequence(sequence, prompt, config.reusePrefix === true);
    let n = 0;
    for await (const token of sequence.evaluate(prompt.slice(start), {
      temperature: 0.8,
      topK: 0,
      topP: 1,
      minP: 0,
      seed: ++seed,
      yieldEogToken: true,
    })) {
      n++;
      if (n >= config.maxTokens || model.isEogToken(token)) break;
    }
    return n;
  };
  await generate(0);
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  receive((message) => {
    if (message.type === 'stop') return stop();
    if (message.type !== 'slice') return;
    const {
      ms,
      level,
      seed: firstSeed,
      variant,
    } = message as unknown as { ms: number; level: number; seed: number; variant?: 'raw' | 'generate' };
    const run = variant === 'generate' ? viaEngine : generate;
    active = level;
    seed = firstSeed;
    void (async () => {
      const cpu0 = process.cpuUsage();
      const start = performance.now();
      const end = start + ms;
      let tokens = 0;
      await Promise.all(
        Array.from({ length: level }, async (_, i) => {
          while (performance.now() < end) {
            const n = await run(i);
            tokens += n;
          }
        }),
      );
      const cpu = process.cpuUsage(cpu0);
      send({ type: 'slice', tokens, seconds: (performance.now() - start) / 1000, cpuMs: (cpu.user + cpu.system) / 1000 });
    })();
  });
  send({ type: 'ready' });
  await stopped;
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return { done: true };
});
