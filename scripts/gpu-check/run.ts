/**
 * The GPU check's runner: on a machine with a GPU, starts the real engine server (src/engine/main.ts,
 * or its bundle) on a generated ~1.1 B-parameter model twice, first as the controller starts it on a
 * GPU node (no --cpu: GPU offload wanted) and then with --cpu on all the machine's cores, and
 * records for each: what the engine says it runs on (its /health: backend, layers on the GPU), what
 * nvidia-smi sees (the card, the engine's GPU memory), the time to load, prompt processing tokens/s,
 * and decoded tokens/s with 1, 8, 32 and 64 requests in flight. Writes a bench result
 * (bench/results/gpu.json by default, in the shape bench/run.ts summarizes).
 *
 *   node run.mjs --engine engine.mjs [--out FILE] [--model-dir DIR] [--type q8_0|f16] [--quick]
 *     [--modes gpu,cpu] [--levels 1,8,32,64] [--level-ms N] [--threads N]
 *
 * --quick: a small model and short levels, for checking the check on a CPU (the vitest test).
 * Imports nothing from the repository but the model generator, so that esbuild bundles it into
 * one file that the carried Node.js runs where no Node.js and no node_modules are installed.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rename, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SHAPE_1B, SHAPE_QUICK, writeRandomGguf, type GeneratedModel, type TensorType } from './model.js';

type Mode = 'gpu' | 'cpu';

type Settings = {
  engine: string;
  out: string;
  modelDir: string;
  type: TensorType;
  quick: boolean;
  modes: Mode[];
  levels: number[];
  levelMs: number;
  threads: number;
  contextSize: number;
  maxTokens: number;
  promptTokens: number;
  promptRepeats: number;
};

export type LevelFigures = {
  inFlight: number;
  requests: number;
  errors: number;
  completionTokens: number;
  seconds: number;
  tokensPerSecond: number;
  /** Median over requests of completion tokens ÷ the request's latency: what one client sees. */
  perRequestTokensPerSecond: number;
  /** nvidia-smi's utilization.gpu, read halfway through the level (gpu mode). */
  gpuUtilization?: number | null;
};

export type ModeRun = {
  mode: Mode;
  flags: string[];
  started: boolean;
  error?: string;
  /** Spawn to ENGINE_READY, milliseconds (includes starting Node.js and the bundle). */
  loadMs?: number;
  /** The engine's own uptimeMs in its ENGINE_READY line. */
  engineUptimeMs?: number;
  /** One prompt and one round at each level before measuring (on Hopper: the kernels' JIT compilation). */
  warmupSeconds?: number;
  ready?: Record<string, unknown>;
  health?: Record<string, unknown>;
  warnings: { code: string; message: string }[];
  nvidiaSmi?: { gpus: string; apps: string; engineMemoryMiB: number | null } | null;
  prompt?: { tokens: number; seconds: number[]; tokensPerSecond: number };
  levels: LevelFigures[];
  logTail: string;
};

const usage = `usage: node run.mjs --engine ENGINE.mjs|main.ts [--out FILE] [--model-dir DIR] [--type q8_0|f16] [--quick]
  [--modes gpu,cpu] [--levels 1,8,32,64] [--level-ms N] [--threads N]`;

function settings(argv: string[]): Settings {
  const { values } = parseArgs({
    args: argv,
    options: {
      engine: { type: 'string' },
      out: { type: 'string' },
      'model-dir': { type: 'string' },
      type: { type: 'string' },
      quick: { type: 'boolean' },
      modes: { type: 'string' },
      levels: { type: 'string' },
      'level-ms': { type: 'string' },
      threads: { type: 'string' },
    },
  });
  if (!values.engine) throw new Error(usage);
  const quick = values.quick === true;
  const type = (values.type ?? 'q8_0') as TensorType;
  if (type !== 'q8_0' && type !== 'f16') throw new Error(`--type must be q8_0 or f16\n${usage}`);
  const list = (text: string) => text.split(',').map((s) => s.trim());
  const modes = list(values.modes ?? 'gpu,cpu') as Mode[];
  if (modes.some((m) => m !== 'gpu' && m !== 'cpu')) throw new Error(`--modes takes gpu and cpu\n${usage}`);
  return {
    engine: path.resolve(values.engine),
    out: path.resolve(values.out ?? 'bench/results/gpu.json'),
    modelDir: path.resolve(values['model-dir'] ?? os.tmpdir()),
    type,
    quick,
    modes,
    levels: list(values.levels ?? (quick ? '1,4' : '1,8,32,64')).map(Number),
    levelMs: Number(values['level-ms'] ?? (quick ? 400 : 6000)),
    threads: Number(values.threads ?? os.availableParallelism()),
    contextSize: quick ? 512 : 2048,
    maxTokens: quick ? 8 : 64,
    promptTokens: quick ? 64 : 1024,
    promptRepeats: quick ? 2 : 3,
  };
}

// ------------------------------------------------------------------------------------ processes

function run(command: string, args: string[], timeoutMs = 10_000): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(command, args, { timeout: timeoutMs }, (error, stdout) => resolve(error ? null : stdout.trim()));
  });
}

async function nvidiaSmi(enginePid?: number): Promise<ModeRun['nvidiaSmi']> {
  const gpus = await run('nvidia-smi', [
    '--query-gpu=name,memory.used,memory.total,utilization.gpu,driver_version',
    '--format=csv,noheader',
  ]);
  if (gpus === null) return null;
  const apps = (await run('nvidia-smi', ['--query-compute-apps=pid,process_name,used_memory', '--format=csv,noheader,nounits'])) ?? '';
  let engineMemoryMiB: number | null = null;
  for (const line of apps.split('\n')) {
    const [pid, , memory] = line.split(',').map((s) => s.trim());
    if (enginePid !== undefined && Number(pid) === enginePid) engineMemoryMiB = Number(memory);
  }
  return { gpus, apps, engineMemoryMiB };
}

async function gpuUtilization(): Promise<number | null> {
  const text = await run('nvidia-smi', ['--query-gpu=utilization.gpu', '--format=csv,noheader,nounits']);
  return text === null ? null : Number(text.split('\n')[0]);
}

type Engine = {
  child: ChildProcess;
  url: string;
  ready: Record<string, unknown>;
  loadMs: number;
  log: () => string;
  warnings: ModeRun['warnings'];
};

async function startEngine(s: Settings, modelPath: string, flags: string[]): Promise<Engine> {
  const args = [
    ...(s.engine.endsWith('.ts') ? ['--import', 'tsx'] : []),
    s.engine,
    '--model',
    modelPath,
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--max-batch-size',
    String(Math.max(...s.levels)),
    '--context-size',
    String(s.contextSize),
    '--threads',
    String(s.threads),
    ...flags,
  ];
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  let log = '';
  const warnings: ModeRun['warnings'] = [];
  let partial = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    log = (log + text).slice(-6000);
    partial += text;
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const match = /ENGINE_WARNING (\{.*\})/.exec(line);
      if (match) warnings.push(JSON.parse(match[1]!) as { code: string; message: string });
    }
  });
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /ENGINE_READY (\{.*\})/.exec(out);
      if (match) resolve(JSON.parse(match[1]!) as Record<string, unknown>);
    });
    child.once('exit', (code) => reject(new Error(`the engine exited (${code}) before ENGINE_READY:\n${log}`)));
  });
  return { child, url: `http://127.0.0.1:${String(ready.port)}`, ready, loadMs: performance.now() - t0, log: () => log, warnings };
}

async function stopEngine(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

// ------------------------------------------------------------------------------------ load

type Completion = { ok: boolean; completionTokens: number; promptTokens: number; seconds: number; error?: string };

async function complete(url: string, prompt: string, maxTokens: number): Promise<Completion> {
  const t0 = performance.now();
  try {
    const response = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0 }),
    });
    const body = (await response.json()) as { usage?: { completion_tokens: number; prompt_tokens: number }; error?: { message: string } };
    const seconds = (performance.now() - t0) / 1000;
    if (!response.ok || !body.usage)
      return { ok: false, completionTokens: 0, promptTokens: 0, seconds, error: `${response.status} ${body.error?.message ?? ''}` };
    return { ok: true, completionTokens: body.usage.completion_tokens, promptTokens: body.usage.prompt_tokens, seconds };
  } catch (error) {
    return { ok: false, completionTokens: 0, promptTokens: 0, seconds: (performance.now() - t0) / 1000, error: String(error) };
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length === 0 ? 0 : sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const round = (value: number, decimals = 1) => Math.round(value * 10 ** decimals) / 10 ** decimals;

/** A text of about `tokens` tokens for the fixture's byte-level tokenizer (a few merges: ~1 token a byte). */
function promptOf(tokens: number, salt: number): string {
  const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];
  let text = `${salt}:`;
  for (let i = 0; text.length < tokens * 0.9; i++) text += ` ${words[(i * 7 + salt) % words.length]}`;
  return text;
}

/** `inFlight` clients, each sending one request after another until `levelMs` has passed (each sends at least one). */
async function level(url: string, s: Settings, inFlight: number, sampleGpu: boolean, errors: string[]): Promise<LevelFigures> {
  const t0 = performance.now();
  const deadline = t0 + s.levelMs;
  const done: Completion[] = [];
  const utilization = sampleGpu
    ? new Promise<number | null>((resolve) => setTimeout(() => resolve(gpuUtilization()), s.levelMs / 2))
    : undefined;
  await Promise.all(
    Array.from({ length: inFlight }, async (_, client) => {
      let n = 0;
      do {
        const result = await complete(url, promptOf(16, client * 1000 + n++), s.maxTokens);
        done.push(result);
        if (!result.ok && errors.length < 10) errors.push(`${inFlight} in flight: ${result.error}`);
      } while (performance.now() < deadline);
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const ok = done.filter((r) => r.ok);
  const completionTokens = ok.reduce((sum, r) => sum + r.completionTokens, 0);
  return {
    inFlight,
    requests: done.length,
    errors: done.length - ok.length,
    completionTokens,
    seconds: round(seconds, 3),
    tokensPerSecond: round(completionTokens / seconds),
    perRequestTokensPerSecond: round(median(ok.map((r) => r.completionTokens / r.seconds))),
    ...(utilization ? { gpuUtilization: await utilization } : {}),
  };
}

async function measureMode(s: Settings, modelPath: string, mode: Mode, problems: string[]): Promise<ModeRun> {
  const flags = mode === 'cpu' ? ['--cpu'] : [];
  const runRecord: ModeRun = { mode, flags, started: false, warnings: [], levels: [], logTail: '' };
  console.log(`\n== ${mode}: starting the engine ${flags.join(' ')}`);
  let engine: Engine;
  try {
    engine = await startEngine(s, modelPath, flags);
  } catch (error) {
    runRecord.error = error instanceof Error ? error.message : String(error);
    problems.push(`${mode}: the engine did not start`);
    return runRecord;
  }
  runRecord.started = true;
  try {
    runRecord.loadMs = round(engine.loadMs);
    runRecord.engineUptimeMs = Number(engine.ready.uptimeMs);
    runRecord.ready = engine.ready;
    runRecord.health = (await (await fetch(`${engine.url}/health`)).json()) as Record<string, unknown>;
    runRecord.warnings = engine.warnings;
    runRecord.nvidiaSmi = await nvidiaSmi(engine.child.pid);
    const h = runRecord.health;
    console.log(
      `${mode}: ready in ${runRecord.loadMs} ms; backend ${String(h.backend)}, ${String(h.gpuLayers)}/${String(h.totalLayers)} layers on the GPU`,
    );
    if (runRecord.nvidiaSmi)
      console.log(`${mode}: nvidia-smi: ${runRecord.nvidiaSmi.gpus}; engine ${runRecord.nvidiaSmi.engineMemoryMiB ?? '?'} MiB`);
    for (const w of engine.warnings) console.log(`${mode}: ENGINE_WARNING ${w.code}: ${w.message}`);

    // Warm-up: every batch shape the measurement uses, once. On a Hopper GPU this is where the driver
    // JIT-compiles the CUDA kernels from PTX (the prebuilt binaries hold no sm_90 code): minutes the
    // first time, cached in CUDA_CACHE_PATH after; reported apart, never inside a figure.
    const warmStart = performance.now();
    await complete(engine.url, promptOf(s.promptTokens, 99), 1);
    for (const inFlight of s.levels) {
      await Promise.all(Array.from({ length: inFlight }, (_, i) => complete(engine.url, promptOf(16, 90_000 + i), 4)));
    }
    runRecord.warmupSeconds = round((performance.now() - warmStart) / 1000, 2);
    console.log(`${mode}: warm-up (first use of each batch shape) took ${runRecord.warmupSeconds} s`);

    const seconds: number[] = [];
    let promptTokens = 0;
    for (let i = 0; i < s.promptRepeats; i++) {
      // A fresh prompt each time (prefix reuse is off by default, but then no cache can help either).
      const result = await complete(engine.url, promptOf(s.promptTokens, 100 + i), 1);
      if (!result.ok) {
        problems.push(`${mode}: prompt request failed: ${result.error}`);
        continue;
      }
      promptTokens = result.promptTokens;
      seconds.push(result.seconds);
    }
    runRecord.prompt = {
      tokens: promptTokens,
      seconds: seconds.map((x) => round(x, 4)),
      tokensPerSecond: round(promptTokens / median(seconds)),
    };
    console.log(`${mode}: prompt of ${promptTokens} tokens: ${runRecord.prompt.tokensPerSecond} tokens/s`);

    const errors: string[] = [];
    for (const inFlight of s.levels) {
      const figures = await level(engine.url, s, inFlight, mode === 'gpu' && runRecord.nvidiaSmi != null, errors);
      runRecord.levels.push(figures);
      console.log(
        `${mode}: ${inFlight} in flight: ${figures.tokensPerSecond} tokens/s (${figures.perRequestTokensPerSecond} per request, ${figures.requests} requests, ${figures.errors} errors)` +
          (figures.gpuUtilization != null ? `, GPU ${figures.gpuUtilization}% busy` : ''),
      );
    }
    for (const e of errors) problems.push(`${mode}: request failed: ${e}`);
  } catch (error) {
    runRecord.error = error instanceof Error ? (error.stack ?? error.message) : String(error);
    problems.push(`${mode}: ${runRecord.error.split('\n')[0]}`);
  } finally {
    await stopEngine(engine.child);
    runRecord.logTail = engine.log().slice(-3000);
  }
  return runRecord;
}

// ------------------------------------------------------------------------------------ result

function machineOf() {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cpuCount: cpus.length,
    cpuMHz: cpus[0]?.speed ?? 0,
    memoryGiB: round(os.totalmem() / 2 ** 30),
    freeMemoryGiB: round(os.freemem() / 2 ** 30),
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    loadAverage: os.loadavg().map((l) => round(l, 2)),
  };
}

function resultOf(
  s: Settings,
  model: GeneratedModel,
  runs: ModeRun[],
  card: string | null,
  problems: string[],
  startedAt: Date,
  t0: number,
) {
  const at = (r: ModeRun, n: number) => r.levels.find((l) => l.inFlight === n)?.tokensPerSecond ?? '—';
  const columns = [
    'engine',
    'backend',
    'layers on the GPU',
    'load (s)',
    'warm-up (s)',
    'prompt tokens/s',
    ...s.levels.map((n) => `tokens/s, ${n} in flight`),
  ];
  const rows = runs.map((r) => [
    r.mode === 'gpu' ? 'GPU wanted (no --cpu)' : '--cpu',
    String(r.health?.backend ?? (r.error ? 'failed' : '—')),
    r.health ? `${String(r.health.gpuLayers)}/${String(r.health.totalLayers)}` : '—',
    r.loadMs !== undefined ? round(r.loadMs / 1000, 2) : '—',
    r.warmupSeconds ?? '—',
    r.prompt?.tokensPerSecond ?? '—',
    ...s.levels.map((n) => at(r, n)),
  ]);
  const gpu = runs.find((r) => r.mode === 'gpu');
  const cpu = runs.find((r) => r.mode === 'cpu');
  const targets = [];
  if (gpu?.health) {
    const layers = Number(gpu.health.gpuLayers);
    const total = Number(gpu.health.totalLayers);
    targets.push({
      what: 'layers offloaded to the GPU (GPU wanted)',
      target: `== ${total}`,
      value: String(layers),
      met: layers === total && gpu.health.backend !== 'cpu',
    });
  }
  const top = Math.max(...s.levels);
  // Only where the GPU-wanted engine did get a GPU: two CPU runs compare nothing.
  if (gpu && cpu && gpu.health?.backend !== 'cpu' && typeof at(gpu, top) === 'number' && typeof at(cpu, top) === 'number') {
    const ratio = (at(gpu, top) as number) / (at(cpu, top) as number);
    targets.push({ what: `decoded tokens/s at ${top} in flight, GPU ÷ CPU`, target: '> 1', value: ratio.toFixed(2), met: ratio > 1 });
  }
  if (runs.length < s.modes.length)
    problems = [...problems, `incomplete: ${runs.length} of ${s.modes.length} runs so far (the call ended early?)`];
  const valid = problems.length === 0;
  return {
    name: 'gpu',
    title: "The built-in engine on a GPU, against the same engine on that machine's CPU",
    method:
      `The engine (src/engine/main.ts, bundled) on a generated ${model.type.toUpperCase()} model of random weights in TinyLlama-1.1B's shape ` +
      `(${(model.parameters / 1e9).toFixed(2)} B parameters, ${model.shape.layers} layers, ${model.shape.embedding}-dim, vocabulary ${model.shape.vocab}), ` +
      `started once as the controller starts it on a GPU node (no --cpu) and once with --cpu, both with --threads ${s.threads}, ` +
      `--max-batch-size ${Math.max(...s.levels)}, --context-size ${s.contextSize}. Load: spawn to ENGINE_READY. Prompt: a ${s.promptTokens}-token ` +
      `text completion with max_tokens 1, median of ${s.promptRepeats}. Decoding: N clients each sending /v1/completions (16-token prompt, ` +
      `max_tokens ${s.maxTokens}, temperature 0) one after another for ${s.levelMs / 1000} s, completion tokens ÷ wall time, ` +
      `after a warm-up of one prompt and one round at each level (on Hopper the driver JIT-compiles the CUDA kernels then). ` +
      `The engine's /health and nvidia-smi say where the layers are.`,
    startedAt: startedAt.toISOString(),
    durationS: round((performance.now() - t0) / 1000),
    machine: machineOf(),
    valid,
    problems,
    table: { columns, rows },
    targets,
    notes: [
      card ? `GPU: ${card}` : 'no nvidia-smi on this machine: no GPU seen',
      `model: ${model.bytes} bytes, written on the machine in ${model.seconds.toFixed(1)} s`,
      s.quick ? 'quick mode: a small model and short levels (checking the check, not a measurement)' : '',
    ].filter(Boolean),
    data: {
      settings: { ...s, engine: path.basename(s.engine), out: path.basename(s.out), modelDir: undefined },
      model: { ...model, path: path.basename(model.path) },
      ldLibraryPath: process.env.LD_LIBRARY_PATH ?? null,
      runs,
    },
  };
}

export async function main(argv: string[]): Promise<number> {
  const s = settings(argv);
  const startedAt = new Date();
  const t0 = performance.now();
  const card = await run('nvidia-smi', ['--query-gpu=name,memory.total,driver_version', '--format=csv,noheader']);
  console.log(card ? `nvidia-smi: ${card}` : 'nvidia-smi: none (no GPU here)');

  const shape = s.quick ? SHAPE_QUICK : SHAPE_1B;
  const modelPath = path.join(s.modelDir, `gpu-check-${s.quick ? 'quick' : '1b'}-${s.type}.gguf`);
  // Always written afresh (seconds), under another name first: a file left by a killed run could be half written.
  const generated = await writeRandomGguf(`${modelPath}.tmp`, { shape, type: s.type });
  await rename(`${modelPath}.tmp`, modelPath);
  const model: GeneratedModel = { ...generated, path: modelPath };
  console.log(
    `model: ${(model.bytes / 2 ** 20).toFixed(0)} MiB, ${(model.parameters / 1e9).toFixed(2)} B parameters, written in ${model.seconds.toFixed(1)} s`,
  );

  const problems: string[] = [];
  const runs: ModeRun[] = [];
  await mkdir(path.dirname(s.out), { recursive: true });
  let result = resultOf(s, model, runs, card, problems, startedAt, t0);
  for (const mode of s.modes) {
    runs.push(await measureMode(s, modelPath, mode, problems));
    // After each half: a call stopped at its time limit still returns what was measured.
    result = resultOf(s, model, runs, card, problems, startedAt, t0);
    await writeFile(s.out, `${JSON.stringify(result, null, 2)}\n`);
  }
  console.log(`\nwrote ${s.out} (${(await stat(s.out)).size} bytes)${result.valid ? '' : `; problems: ${problems.join('; ')}`}`);
  return result.valid ? 0 : 1;
}

if (process.argv[1] && (process.argv[1].endsWith('run.mjs') || process.argv[1].endsWith(path.join('gpu-check', 'run.ts')))) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(2);
    },
  );
}
