/**
 * Engine overhead, side by side: `npx tsx bench/engine-overhead.ts` (not part of `npm run bench`;
 * it writes nothing, it prints). Raw node-llama-cpp (bench/load/llama-slices.ts: one context of
 * the engine's sequences, the engine's chat-rendered prompt, the same sampling and seeds) and the
 * built-in engine started alone (`src/engine/main.ts`, loaded by closed-loop non-streamed chat
 * completions from this process) both stay up, and the benchmark alternates them in short slices
 * (raw, engine, engine, raw, …), so that a busy shared machine weighs on both alike. Per level it
 * prints the median tok/s of each side, the median of the per-pair ratios engine ÷ raw with its
 * quartiles, and the CPU each side spent per token (engine process + this client, vs raw).
 *
 * Knobs: OVERHEAD_MODEL (tiny | larger; default tiny), OVERHEAD_LEVELS (1), OVERHEAD_PAIRS (24),
 * OVERHEAD_SLICE_MS (400), OVERHEAD_THREADS (1), OVERHEAD_MAX_TOKENS (32), OVERHEAD_STREAM=1
 * (streamed completions instead), OVERHEAD_RAW_REUSE=1 (raw keeps the prompt prefix's KV cache, as the
 * engine does with --prefix-reuse), OVERHEAD_RAW_DISPATCH=engine (the raw side decodes on the engine's batch schedule),
 * OVERHEAD_ENGINE_FLAGS (extra engine flags, e.g. `--prefix-reuse`), OVERHEAD_CPU_PROF=1 (profiles the engine and the raw side into
 * bench/results/profiles/overhead-engine and overhead-raw), OVERHEAD_ENGINE_MAIN (another engine entry point, e.g. an older
 * checkout's src/engine/main.ts, to compare).
 */
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { writeTinyGguf } from '../test/support/tiny-gguf.js';
import { cleanupAll, cpuProfArgs, hookSignals, nextMessage, runChild, tempDir } from './lib/env.js';
import { startStandaloneEngine } from './lib/engine.js';
import type { LlamaSlicesConfig } from './load/llama-slices.js';

const MODEL = process.env.OVERHEAD_MODEL ?? 'tiny';
const LEVELS = (process.env.OVERHEAD_LEVELS ?? '1').split(',').map(Number);
const PAIRS = Number(process.env.OVERHEAD_PAIRS ?? 24);
const SLICE_MS = Number(process.env.OVERHEAD_SLICE_MS ?? 400);
const THREADS = Number(process.env.OVERHEAD_THREADS ?? 1);
const MAX_TOKENS = Number(process.env.OVERHEAD_MAX_TOKENS ?? 32);
const STREAM = process.env.OVERHEAD_STREAM === '1';
/** The raw side keeps the prompt prefix's KV cache too (as the engine does with --prefix-reuse). */
const RAW_REUSE = process.env.OVERHEAD_RAW_REUSE === '1';
/** Extra engine flags, e.g. `--prefix-reuse`. */
const ENGINE_FLAGS = (process.env.OVERHEAD_ENGINE_FLAGS ?? '').split(' ').filter((f) => f !== '');
const CONTEXT = 4096;
const BATCH = 8;
const LARGER = { embedding: 512, layers: 8, heads: 8, kvHeads: 4, feedForward: 1536 };

type Slice = { tokens: number; seconds: number; cpuMs: number; clientCpuMs?: number; requests?: number };

function quantile(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  return s[lo]! + (s[Math.ceil(pos)]! - s[lo]!) * (pos - lo);
}

/** utime + stime of a process, in milliseconds (Linux). */
function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/** CPU milliseconds of each thread of a process, by `name:tid` (Linux). */
function threadCpuMs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
      out.set(`${name}:${tid}`, ms);
    } catch {
      // the thread ended
    }
  }
  return out;
}

const describeThreads = (m: Map<string, number>) =>
  [...m]
    .filter(([, ms]) => ms > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${ms.toFixed(0)} ms`)
    .join(', ');

async function main(): Promise<void> {
  hookSignals();
  const dir = await tempDir('overhead');
  const model = await writeTinyGguf(path.join(dir, `${MODEL}.gguf`), MODEL === 'larger' ? { seed: 7, dimensions: LARGER } : {});
  const nodeArgs = process.env.OVERHEAD_CPU_PROF === '1' ? await cpuProfArgs('overhead-engine') : [];
  const engine = await startStandaloneEngine(model.path, {
    maxBatchSize: BATCH,
    contextSize: CONTEXT,
    threads: THREADS,
    nodeArgs,
    main: process.env.OVERHEAD_ENGINE_MAIN,
    extraArgs: ENGINE_FLAGS,
  });
  const rawConfig: LlamaSlicesConfig = {
    modelPath: model.path,
    contextSize: CONTEXT,
    sequences: BATCH,
    threads: THREADS,
    maxTokens: MAX_TOKENS,
    engineDispatch: process.env.OVERHEAD_RAW_DISPATCH === 'engine',
    reusePrefix: RAW_REUSE,
  };
  const rawNodeArgs = process.env.OVERHEAD_CPU_PROF === '1' ? await cpuProfArgs('overhead-raw') : [];
  const raw = runChild<{ done: true }>('load/llama-slices.ts', rawConfig, { timeoutMs: 3_600_000, nodeArgs: rawNodeArgs });
  await nextMessage(raw, 'ready', 120_000);

  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const url = `${engine.url}/v1/chat/completions`;
  const complete = (seed: number) =>
    new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({
        messages: [{ role: 'user', content: 'Hi there, tell me something.' }],
        max_tokens: MAX_TOKENS,
        temperature: 0.8,
        seed,
        ...(STREAM ? { stream: true, stream_options: { include_usage: true } } : {}),
      });
      const req = http.request(
        url,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            const json = STREAM ? text.split('\n\n').at(-3)!.slice(6) : text;
            const n = (JSON.parse(json) as { usage?: { completion_tokens?: number } }).usage?.completion_tokens;
            if (res.statusCode !== 200 || typeof n !== 'number') reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
            else resolve(n);
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const engineSlice = async (level: number, firstSeed: number): Promise<Slice> => {
    let seed = firstSeed;
    const cpu0 = process.cpuUsage();
    const engineCpu0 = processCpuMs(engine.child.pid!);
    const start = performance.now();
    const end = start + SLICE_MS;
    let tokens = 0;
    let requests = 0;
    await Promise.all(
      Array.from({ length: level }, async () => {
        while (performance.now() < end) {
          // Not `tokens += await …`: that would read `tokens` before the await and lose the other workers' additions.
          const n = await complete(++seed);
          tokens += n;
          requests++;
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const clientCpuMs = (cpu.user + cpu.system) / 1000;
    return { tokens, seconds, cpuMs: processCpuMs(engine.child.pid!) - engineCpu0 + clientCpuMs, clientCpuMs, requests };
  };
  const rawSlice = async (level: number, firstSeed: number, variant: 'raw' | 'generate' = 'raw'): Promise<Slice> => {
    const reply = nextMessage<Slice>(raw, 'slice', 60_000);
    raw.send({ type: 'slice', ms: SLICE_MS, level, seed: firstSeed, variant });
    return reply;
  };
  type Side = 'raw' | 'generate' | 'engine';
  const slice = (side: Side, level: number, seed: number) => (side === 'engine' ? engineSlice(level, seed) : rawSlice(level, seed, side));

  for (const level of LEVELS) {
    // Warm-up: one slice each, not counted.
    await rawSlice(level, 0);
    await engineSlice(level, 0);
    const sides: Side[] = ['raw', 'generate', 'engine'];
    const rates: Record<Side, number[]> = { raw: [], generate: [], engine: [] };
    const ratios: Record<'generate' | 'engine', number[]> = { generate: [], engine: [] };
    const totals = { raw: { tokens: 0, cpuMs: 0 }, generate: { tokens: 0, cpuMs: 0 }, engine: { tokens: 0, cpuMs: 0 } };
    let clientCpuMs = 0;
    let requests = 0;
    for (let round = 0; round < PAIRS; round++) {
      const seed = 1000 * round;
      // Rotate the order so that no side always follows another.
      const order = sides.map((_, i) => sides[(i + round) % sides.length]!);
      for (const side of order) {
        const s = await slice(side, level, seed);
        rates[side].push(s.tokens / s.seconds);
        totals[side].tokens += s.tokens;
        totals[side].cpuMs += s.cpuMs;
        clientCpuMs += s.clientCpuMs ?? 0;
        requests += s.requests ?? 0;
      }
      for (const side of ['generate', 'engine'] as const) ratios[side].push(rates[side].at(-1)! / rates.raw.at(-1)!);
    }
    const q = (v: number[], digits = 0) =>
      `${quantile(v, 0.5).toFixed(digits)} (quartiles ${quantile(v, 0.25).toFixed(digits)}–${quantile(v, 0.75).toFixed(digits)})`;
    const cpu = (side: Side) => `${((1000 * totals[side].cpuMs) / totals[side].tokens).toFixed(0)} µs`;
    console.log(
      `${MODEL}${STREAM ? ' streamed' : ''}${RAW_REUSE ? ', raw reusing the prefix' : ''}${ENGINE_FLAGS.length > 0 ? `, engine ${ENGINE_FLAGS.join(' ')}` : ''}, ${level} in flight, ${PAIRS} rounds of ${SLICE_MS} ms slices:\n` +
        `  tok/s: raw ${q(rates.raw)}, engine's generation loop in-process ${q(rates.generate)}, engine over HTTP ${q(rates.engine)}\n` +
        `  ÷ raw (per round): generation loop ${q(ratios.generate, 3)}, engine ${q(ratios.engine, 3)} (min ${Math.min(...ratios.engine).toFixed(3)}, max ${Math.max(...ratios.engine).toFixed(3)})\n` +
        `  CPU per token: raw ${cpu('raw')}, generation loop ${cpu('generate')}, engine process + client ${cpu('engine')} ` +
        `(the client ${((1000 * clientCpuMs) / totals.engine.tokens).toFixed(0)} µs; ${(totals.engine.tokens / requests).toFixed(1)} tokens per request)`,
    );
  }
  console.log(`threads' CPU since start: engine process: ${describeThreads(threadCpuMs(engine.child.pid!))}`);
  console.log(`threads' CPU since start: raw process (raw and generation-loop slices): ${describeThreads(threadCpuMs(raw.child.pid!))}`);
  agent.destroy();
  raw.send({ type: 'stop' });
  await raw.result.catch(() => undefined);
  await engine.stop();
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => cleanupAll());
