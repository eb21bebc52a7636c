/**
 * Threads: decoding throughput of node-llama-cpp on CPU by thread count, with
 * one replica and with several at once (separate processes, as the runtime
 * places them), on the tiny test model and on a larger generated one. The
 * runtime's default (src/runtime/cpu-budget.ts) is read against it: tokens/s
 * at the default ÷ at the best setting measured.
 */
import os from 'node:os';
import path from 'node:path';
import { cpuBudget } from '../src/runtime/cpu-budget.js';
import { writeTinyGguf } from '../test/support/tiny-gguf.js';
import { runChild, tempDir } from './lib/env.js';
import { fmt, round } from './lib/stats.js';
import type { Bench, BenchOutcome } from './lib/result.js';
import type { LlamaDirectConfig, LlamaDirectResult } from './load/llama-direct.js';

const LEVEL_MS = Number(process.env.BENCH_THREADS_LEVEL_MS ?? 3000);
const MAX_TOKENS = 16;
/** llama.cpp's own default when no thread count is given (what the engine used before). */
const LLAMA_DEFAULT_THREADS = 4;

/** Tokens/s summed over `replicas` processes decoding one request each at once, with `threads` each. */
async function measure(modelPath: string, threads: number, replicas: number): Promise<number> {
  const config: LlamaDirectConfig = {
    modelPath,
    contextSize: 512,
    sequences: 1,
    threads,
    levels: [1],
    maxTokens: MAX_TOKENS,
    durationMs: LEVEL_MS,
  };
  const results = await Promise.all(
    Array.from(
      { length: replicas },
      () => runChild<LlamaDirectResult>('load/llama-direct.ts', config, { timeoutMs: LEVEL_MS + 120_000 }).result,
    ),
  );
  return results.reduce((sum, r) => sum + r.throughput[0]!.tokensPerSecond, 0);
}

async function run(): Promise<BenchOutcome> {
  const dir = await tempDir('threads');
  const budget = cpuBudget();
  const models = [
    { name: 'tiny (64-dim, 2 layers)', file: await writeTinyGguf(path.join(dir, 'tiny.gguf')) },
    {
      name: 'larger (512-dim, 8 layers, F32)',
      file: await writeTinyGguf(path.join(dir, 'larger.gguf'), {
        seed: 7,
        dimensions: { embedding: 512, layers: 8, heads: 8, kvHeads: 4, feedForward: 1536 },
      }),
    },
  ];
  const threadCounts = [...new Set([1, 2, budget.cores, LLAMA_DEFAULT_THREADS].filter((n) => n >= 1))].sort((a, b) => a - b);
  const replicaCounts = [...new Set([1, budget.slots])];
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown> = {
    cores: budget.cores,
    defaultSlots: budget.slots,
    defaultThreads: budget.threads,
    threadCounts,
    replicaCounts,
    models: {},
  };
  const targets: BenchOutcome['targets'] = [];
  for (const model of models) {
    const curve: Record<string, number> = {};
    for (const replicas of replicaCounts) {
      // Oversubscribing threads collapsed one replica already (below 2 tok/s): several would only take minutes to say so.
      for (const threads of replicas > 1
        ? threadCounts.filter((t) => t * replicas <= Math.max(budget.cores, 2 * replicas))
        : threadCounts) {
        const tps = await measure(model.file.path, threads, replicas);
        curve[`${replicas}x${threads}`] = round(tps, 1);
        console.log(`  ${model.name}: ${replicas} replica(s) x ${threads} thread(s) → ${tps.toFixed(1)} tok/s`);
        rows.push([model.name, replicas, threads, fmt(tps, 1)]);
      }
      const best = Math.max(
        ...Object.entries(curve)
          .filter(([k]) => k.startsWith(`${replicas}x`))
          .map(([, v]) => v),
      );
      const atDefault = curve[`${replicas}x${budget.threads}`]!;
      const ratio = atDefault / best;
      targets.push({
        what: `${model.name}, ${replicas} replica(s) at once: tok/s at the default (${budget.threads} thread(s)) ÷ at the best measured`,
        target: '≥ 0.9',
        value: fmt(ratio, 3),
        met: ratio >= 0.9,
        ...(ratio < 0.9 ? { miss: `${fmt(ratio, 3)} of the best` } : {}),
      });
    }
    (data.models as Record<string, unknown>)[model.name] = { sizeBytes: model.file.size, curve };
  }
  return {
    method:
      `node-llama-cpp called directly on CPU (one context of 512 tokens, one sequence, greedy-free sampling) in a child process per replica; each replica generates ${MAX_TOKENS}-token answers in a loop for ${LEVEL_MS / 1000} s, ` +
      `and the replicas of one row run at once. Thread counts 1, 2, the cores counted (${budget.cores}) and llama.cpp's own default (${LLAMA_DEFAULT_THREADS}); replicas 1 and the default CPU_SLOTS (${budget.slots}). ` +
      `Machine: ${os.availableParallelism()} logical CPUs.`,
    valid: true,
    problems: [],
    table: { columns: ['model', 'replicas at once', 'threads each', 'tok/s (sum)'], rows },
    targets,
    notes: [
      `The default from src/runtime/cpu-budget.ts on this machine: ${budget.slots} slot(s) of ${budget.threads} thread(s) (${budget.cores} cores counted).`,
    ],
    data,
  };
}

export const threads: Bench = { name: 'threads', title: 'Engine threads: throughput by thread count and replicas', run };
