/**
 * Cold start with the built-in engine (node-llama-cpp on CPU, the tiny GGUF):
 * how long from creating an endpoint to RUNNING, and from a chat request to a
 * SLEEPING endpoint (wake on request, model cached) to its answer, against
 * the baseline of node-llama-cpp called directly in a fresh process (spawn to
 * first token) — and the built-in engine started on its own (spawn to first
 * answered token over HTTP), which splits engine cost from controller cost.
 */
import path from 'node:path';
import { writeTinyGguf } from '../test/support/tiny-gguf.js';
import { ADMIN_KEY, api, defaultProject, gatewayEnv, runChild, startDatabase, startGatewayProcess, startHub, tempDir, TINY_REPO } from './lib/env.js';
import { startStandaloneEngine } from './lib/engine.js';
import { createEndpoint, deleteEndpoint, H100_X1, waitForStatus } from './lib/endpoints.js';
import { fmt, median, round } from './lib/stats.js';
import type { Bench, BenchContext, BenchOutcome } from './lib/result.js';
import type { LlamaDirectConfig, LlamaDirectResult } from './load/llama-direct.js';

const REPEATS = Number(process.env.BENCH_COLD_REPEATS ?? 3);
// One thread: on a small shared machine llama.cpp's spinning threads collapse under contention.
const THREADS = Number(process.env.BENCH_LLAMA_THREADS ?? 1);
const CONTEXT = 4096;
const BATCH = 8;

async function directColdStart(modelPath: string): Promise<{ totalMs: number; child: LlamaDirectResult }> {
  const t0 = performance.now();
  const config: LlamaDirectConfig = { modelPath, contextSize: CONTEXT, sequences: BATCH, threads: THREADS, levels: [], maxTokens: 1, durationMs: 0 };
  const child = await runChild<LlamaDirectResult>('load/llama-direct.ts', config, { timeoutMs: 120_000 }).result;
  return { totalMs: performance.now() - t0, child };
}

/** `npm run engine` on its own: spawn → ENGINE_READY → one answered token over HTTP. */
async function engineColdStart(modelPath: string): Promise<{ totalMs: number; readyMs: number }> {
  const t0 = performance.now();
  const engine = await startStandaloneEngine(modelPath, { maxBatchSize: BATCH, contextSize: CONTEXT, threads: THREADS });
  const response = await fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1, temperature: 0 }),
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`the standalone engine answered ${response.status}`);
  const totalMs = performance.now() - t0;
  await engine.stop();
  return { totalMs, readyMs: engine.readyMs };
}

async function run(context: BenchContext): Promise<BenchOutcome> {
  const problems: string[] = [];
  const db = await startDatabase();
  const hub = await startHub();
  const dataDir = await tempDir('cold');
  const model = await writeTinyGguf(path.join(dataDir, 'direct', 'tiny.gguf'));
  const gateway = await startGatewayProcess(
    gatewayEnv(dataDir, db.url, hub.url, { CPU_SLOTS: '1', ENGINE_THREADS: String(THREADS), WAKE_TIMEOUT_MS: '120000' }),
    context.cpuProf ? { cpuProf: 'cold-start-gateway' } : {},
  );
  const { projectId } = await defaultProject(gateway.url);

  const direct: { totalMs: number; child: LlamaDirectResult }[] = [];
  const engine: { totalMs: number; readyMs: number }[] = [];
  const creates: number[] = [];
  const wakes: number[] = [];
  let phases: { step: string; atMs: number }[] = [];

  direct.push(await directColdStart(model.path));
  engine.push(await engineColdStart(model.path));

  // Create → RUNNING (first start: model download from the stand-in hub into the cache, engine start, warm-up).
  const t0 = performance.now();
  const endpointId = await createEndpoint(gateway.url, {
    projectId,
    name: 'cold-start',
    instanceOptionId: H100_X1,
    hfModelRepo: TINY_REPO,
    advanced: { max_batch_size: BATCH },
    autoscalingPolicy: { minReplica: 0, maxReplica: 1, cooldownPeriod: 3600 },
  });
  await waitForStatus(gateway.url, endpointId, 'RUNNING', 180_000);
  creates.push(performance.now() - t0);
  const events = await db.sql<{ status: string; phase: string | null; created_at: Date }[]>`
    SELECT status, phase, created_at FROM endpoint_events WHERE endpoint_id = ${endpointId} AND type IN ('CREATED', 'STATUS_CHANGED') ORDER BY id`;
  const first = events[0]?.created_at.getTime() ?? 0;
  phases = events.map((e) => ({ step: [e.status, e.phase].filter(Boolean).join(' '), atMs: e.created_at.getTime() - first }));

  // Wake on request: sleep, then one chat request; time to its answer (model cached).
  for (let i = 0; i < REPEATS; i++) {
    await waitForStatus(gateway.url, endpointId, 'RUNNING', 60_000);
    const slept = await api(gateway.url, 'PUT', `/dedicated/beta/endpoint/${endpointId}/sleep`);
    if (slept.status !== 200) throw new Error(`sleep failed (${slept.status}): ${JSON.stringify(slept.body)}`);
    await waitForStatus(gateway.url, endpointId, 'SLEEPING', 60_000);
    const w0 = performance.now();
    const response = await fetch(`${gateway.url}/dedicated/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: endpointId, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1, temperature: 0 }),
    });
    const text = await response.text();
    if (!response.ok) problems.push(`wake-on-request ${i + 1} answered ${response.status}: ${text.slice(0, 200)}`);
    wakes.push(performance.now() - w0);
    console.log(`  wake ${i + 1}: answered after ${(wakes[wakes.length - 1]! / 1000).toFixed(2)} s`);
    if (i + 1 < REPEATS) {
      direct.push(await directColdStart(model.path));
      engine.push(await engineColdStart(model.path));
    }
  }
  console.log(`  create → RUNNING ${(creates[0]! / 1000).toFixed(2)} s; direct node-llama-cpp ${direct.map((d) => (d.totalMs / 1000).toFixed(2)).join(', ')} s; standalone engine ${engine.map((e) => (e.totalMs / 1000).toFixed(2)).join(', ')} s`);

  await deleteEndpoint(gateway.url, db.sql, endpointId);
  await gateway.stop();
  await db.stop();

  const directMs = median(direct.map((d) => d.totalMs));
  const engineMs = median(engine.map((e) => e.totalMs));
  const createMs = median(creates);
  const wakeMs = median(wakes);
  const d0 = direct[0]!.child;
  const rows: (string | number)[][] = [
    ['node-llama-cpp direct (baseline): spawn → first token', direct.length, fmt(directMs / 1000), '1.00'],
    ['built-in engine alone: spawn → ENGINE_READY → first token over HTTP', engine.length, fmt(engineMs / 1000), fmt(engineMs / directMs)],
    ['gateway: create → RUNNING (download, engine, warm-up)', creates.length, fmt(createMs / 1000), fmt(createMs / directMs)],
    ['gateway: request to a SLEEPING endpoint → answer (wake, cached model)', wakes.length, fmt(wakeMs / 1000), fmt(wakeMs / directMs)],
  ];
  return {
    method:
      `A real gateway process (src/main.ts, built-in engine, CPU_SLOTS=1, ENGINE_THREADS=${THREADS}) on a fresh embedded PostgreSQL, the tiny GGUF (${(model.size / 1024).toFixed(0)} KiB) served by the stand-in hub. ` +
      `Baseline: a fresh process that imports node-llama-cpp, loads the same file (CPU, prebuilt binary, context ${CONTEXT}, ${BATCH} sequences, ${THREADS} threads, as the engine) and evaluates one token; timed from spawn to its report. ` +
      `Also the built-in engine started alone (\`npm run engine\` flags the controller uses) up to its first answered token. Endpoint: created once (create → RUNNING), then ${REPEATS} times slept and woken by a chat request (max_tokens 1). Medians; ratios are ÷ the baseline.`,
    valid: problems.length === 0,
    problems,
    table: { columns: ['what', 'runs', 'median s', 'ratio to direct'], rows },
    targets: [],
    notes: [
      `Inside the direct baseline (first run): import node-llama-cpp ${fmt(d0.importedMs, 0)} ms after process start, getLlama ${fmt(d0.llamaMs - d0.importedMs, 0)} ms, loadModel ${fmt(d0.modelMs - d0.llamaMs, 0)} ms, createContext ${fmt(d0.contextMs - d0.modelMs, 0)} ms, first token ${fmt(d0.firstTokenMs - d0.contextMs, 0)} ms.`,
      `Create → RUNNING, as the event log records it: ${phases.map((p) => `${p.step} +${(p.atMs / 1000).toFixed(2)} s`).join(' → ')}.`,
      'No target is set for cold start: the ratios are reported.',
    ],
    data: {
      threads: THREADS,
      directMs: direct.map((d) => round(d.totalMs, 1)),
      directInside: direct.map((d) => d.child),
      engineMs: engine.map((e) => ({ totalMs: round(e.totalMs, 1), readyMs: round(e.readyMs, 1) })),
      createToRunningMs: creates.map((v) => round(v, 1)),
      wakeToAnswerMs: wakes.map((v) => round(v, 1)),
      phases,
    },
  };
}

export const coldStart: Bench = { name: 'cold-start', title: 'Cold start with the built-in engine', run };
