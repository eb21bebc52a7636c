/**
 * Cold start with the built-in engine (node-llama-cpp on CPU, the tiny GGUF):
 * how long from creating an endpoint to RUNNING, and from a chat request to a
 * SLEEPING endpoint (wake on request, model cached) to its first token,
 * against the baseline of node-llama-cpp called directly in a fresh process
 * (spawn to first token) — and the built-in engine started on its own (spawn
 * to first answered token over HTTP). The baseline and the engine alone run
 * as the gateway runs its engines: bundled, with plain Node.js (not tsx).
 *
 * Each wake-on-request is split into the engine's own part and the gateway's
 * share: the engine's load is the woken replica's spawn → ENGINE_READY, read
 * from its log (the runtime's spawn line and the engine's `readyAt`), and its
 * first-token time is the same request sent straight to that replica right
 * after; the gateway's share is the rest of the request's time to first token.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { builtInEngineEntry } from '../src/runtime/engine-bundle.js';
import { SPAWN_LINE_PREFIX } from '../src/runtime/local-runtime.js';
import { writeTinyGguf } from '../test/support/tiny-gguf.js';
import {
  ADMIN_KEY,
  api,
  defaultProject,
  gatewayEnv,
  runChild,
  startDatabase,
  startGatewayProcess,
  startHub,
  tempDir,
  TINY_REPO,
} from './lib/env.js';
import { startStandaloneEngine } from './lib/engine.js';
import { createEndpoint, deleteEndpoint, H100_X1, waitForStatus } from './lib/endpoints.js';
import { fmt, median, round } from './lib/stats.js';
import { target, type Bench, type BenchContext, type BenchOutcome } from './lib/result.js';
import type { Sql } from '../src/storage/database.js';
import type { LlamaDirectConfig, LlamaDirectResult } from './load/llama-direct.js';
import { engineAuthHeaders } from '../src/engine-client/engine-client.js';

const REPEATS = Number(process.env.BENCH_COLD_REPEATS ?? 3);
// One thread: on a small shared machine llama.cpp's spinning threads collapse under contention.
const THREADS = Number(process.env.BENCH_LLAMA_THREADS ?? 1);
const CONTEXT = 4096;
const BATCH = 8;
/** The issue's target for the gateway's share of a wake-on-request. */
const GATEWAY_SHARE_TARGET_MS = 100;
const CHAT_BODY = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1, temperature: 0, stream: true };

/** Milliseconds since the epoch, sub-millisecond: comparable with the timestamps engines and the runtime write. */
const epochMs = () => performance.timeOrigin + performance.now();

interface Streamed {
  status: number;
  /** Request sent → the first event carrying a token (text, or the finish chunk when the token has no text), ms. */
  firstTokenMs: number;
  /** Request sent → the end of the answer, ms. */
  totalMs: number;
  text: string;
}

/** One streamed chat completion; times its first token and its end at the client. */
async function streamChat(url: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Streamed> {
  const t0 = performance.now();
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  let firstTokenMs = Number.NaN;
  let text = '';
  let buffered = '';
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    const part = decoder.decode(chunk, { stream: true });
    text += part;
    if (!Number.isNaN(firstTokenMs)) continue;
    buffered += part;
    let end: number;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event.startsWith('data: ') ? event.slice(6) : '';
      if (data === '' || data === '[DONE]') continue;
      try {
        const choice = (
          JSON.parse(data) as { choices?: { delta?: { content?: string; reasoning_content?: string }; finish_reason?: string | null }[] }
        ).choices?.[0];
        if (choice && (choice.delta?.content || choice.delta?.reasoning_content || choice.finish_reason)) {
          firstTokenMs = performance.now() - t0;
          break;
        }
      } catch {
        // not a chunk (an error body): no token
      }
    }
  }
  return { status: response.status, firstTokenMs, totalMs: performance.now() - t0, text };
}

/** One wake-on-request, split into the engine's own part and the gateway's share (ms). */
interface Wake {
  /** Request sent → first token at the client: the whole wait. */
  totalMs: number;
  answeredMs: number;
  /** The woken replica's engine: spawn → ENGINE_READY (its log). */
  engineLoadMs: number;
  /** Of the load: the runtime's spawn call → the engine process's own start (exec, node start-up). */
  engineExecMs: number;
  /** The same request sent straight to the woken replica, right after: its first token. */
  engineFirstTokenMs: number;
  /** totalMs − engineLoadMs − engineFirstTokenMs. */
  gatewayMs: number;
  /** Of the gateway's share: request sent → the engine spawned (wake, controller pick-up, capacity, model check, status writes). */
  beforeSpawnMs: number;
  /** Of the gateway's share: ENGINE_READY → first token, less the engine's first token (health check, warm-up, status writes, routing). */
  afterReadyMs: number;
  /** Event-log and replica-row moments, ms after the request was sent (PostgreSQL's clock, transaction start times). */
  timeline: { step: string; atMs: number }[];
}

/** The woken replica's spawn and ready moments (ms since the epoch), from its log under the data dir. */
async function engineMoments(dataDir: string, replicaId: string): Promise<{ spawnAt: number; readyAt: number; uptimeMs: number }> {
  const log = await readFile(path.join(dataDir, 'replicas', `${replicaId}.log`), 'utf8');
  const lines = log.split('\n');
  const spawn = lines.find((l) => l.startsWith(SPAWN_LINE_PREFIX));
  const ready = lines.find((l) => l.startsWith('ENGINE_READY '));
  if (!spawn || !ready) throw new Error(`replica ${replicaId}'s log lacks its spawn or ENGINE_READY line:\n${log.slice(-2000)}`);
  const { at } = JSON.parse(spawn.slice(SPAWN_LINE_PREFIX.length)) as { at?: number };
  const { readyAt, uptimeMs } = JSON.parse(ready.slice('ENGINE_READY '.length)) as { readyAt?: number; uptimeMs?: number };
  if (typeof at !== 'number' || typeof readyAt !== 'number' || typeof uptimeMs !== 'number') {
    throw new Error(`replica ${replicaId}'s log lines carry no spawn or ready time: ${spawn} / ${ready}`);
  }
  return { spawnAt: at, readyAt, uptimeMs };
}

async function directColdStart(modelPath: string): Promise<{ totalMs: number; child: LlamaDirectResult }> {
  const t0 = performance.now();
  const config: LlamaDirectConfig = {
    modelPath,
    contextSize: CONTEXT,
    sequences: BATCH,
    threads: THREADS,
    levels: [],
    maxTokens: 1,
    durationMs: 0,
  };
  const child = await runChild<LlamaDirectResult>('load/llama-direct.ts', config, { timeoutMs: 120_000, bundled: true }).result;
  return { totalMs: performance.now() - t0, child };
}

/** The engine on its own, run as the gateway runs it (its bundle, plain Node.js): spawn → ENGINE_READY → one answered token over HTTP. */
async function engineColdStart(modelPath: string): Promise<{ totalMs: number; readyMs: number }> {
  const entry = await builtInEngineEntry();
  const t0 = performance.now();
  const engine = await startStandaloneEngine(modelPath, { maxBatchSize: BATCH, contextSize: CONTEXT, threads: THREADS, entry });
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

/**
 * Splits one answered wake-on-request: the woken replica's spawn and ready
 * moments from its log, then the same request sent straight to it (the
 * engine's own first token, measured the same way as through the gateway).
 */
async function splitWake(sql: Sql, dataDir: string, endpointId: string, sentAt: number, answer: Streamed): Promise<Wake> {
  const [replica] = await sql<{ id: string; address: string; engine_token: string | null; created_at: Date; ready_at: Date | null }[]>`
    SELECT id, address, engine_token, created_at, ready_at FROM replicas WHERE endpoint_id = ${endpointId} AND state = 'READY' ORDER BY created_at DESC LIMIT 1`;
  if (!replica) throw new Error('the woken endpoint answered without a READY replica');
  const direct = await streamChat(`${replica.address}/v1/chat/completions`, CHAT_BODY, engineAuthHeaders(replica.engine_token));
  if (direct.status !== 200 || Number.isNaN(direct.firstTokenMs))
    throw new Error(`the woken replica answered ${direct.status} without a token: ${direct.text.slice(0, 200)}`);
  const { spawnAt, readyAt, uptimeMs } = await engineMoments(dataDir, replica.id);
  const engineLoadMs = readyAt - spawnAt;
  const gatewayMs = answer.firstTokenMs - engineLoadMs - direct.firstTokenMs;
  const beforeSpawnMs = spawnAt - sentAt;
  const events = await sql<{ status: string; phase: string | null; created_at: Date }[]>`
    SELECT status, phase, created_at FROM endpoint_events
    WHERE endpoint_id = ${endpointId} AND type = 'STATUS_CHANGED' AND created_at >= ${new Date(Math.floor(sentAt))} ORDER BY id`;
  const timeline = [
    ...events.map((e) => ({ step: `status ${[e.status, e.phase].filter(Boolean).join(' ')}`, atMs: e.created_at.getTime() - sentAt })),
    { step: 'replica reserved', atMs: replica.created_at.getTime() - sentAt },
    { step: 'engine spawned', atMs: beforeSpawnMs },
    { step: 'ENGINE_READY', atMs: readyAt - sentAt },
    ...(replica.ready_at ? [{ step: 'replica READY', atMs: replica.ready_at.getTime() - sentAt }] : []),
    { step: 'first token', atMs: answer.firstTokenMs },
  ].sort((a, b) => a.atMs - b.atMs);
  return {
    totalMs: answer.firstTokenMs,
    answeredMs: answer.totalMs,
    engineLoadMs,
    engineExecMs: readyAt - uptimeMs - spawnAt,
    engineFirstTokenMs: direct.firstTokenMs,
    gatewayMs,
    beforeSpawnMs,
    afterReadyMs: gatewayMs - beforeSpawnMs,
    timeline,
  };
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
  const wakes: Wake[] = [];

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
  const phases = events.map((e) => ({ step: [e.status, e.phase].filter(Boolean).join(' '), atMs: e.created_at.getTime() - first }));

  // Wake on request: sleep, then one streamed chat request; time to its first token (model cached), split.
  for (let i = 0; i < REPEATS; i++) {
    await waitForStatus(gateway.url, endpointId, 'RUNNING', 60_000);
    const slept = await api(gateway.url, 'PUT', `/dedicated/beta/endpoint/${endpointId}/sleep`);
    if (slept.status !== 200) throw new Error(`sleep failed (${slept.status}): ${JSON.stringify(slept.body)}`);
    await waitForStatus(gateway.url, endpointId, 'SLEEPING', 60_000);
    const sentAt = epochMs();
    const answer = await streamChat(
      `${gateway.url}/dedicated/v1/chat/completions`,
      { model: endpointId, ...CHAT_BODY },
      { authorization: `Bearer ${ADMIN_KEY}` },
    );
    if (answer.status !== 200 || Number.isNaN(answer.firstTokenMs)) {
      problems.push(`wake-on-request ${i + 1} answered ${answer.status} without a token: ${answer.text.slice(0, 200)}`);
      continue;
    }
    wakes.push(await splitWake(db.sql, dataDir, endpointId, sentAt, answer));
    const w = wakes[wakes.length - 1]!;
    console.log(
      `  wake ${i + 1}: first token after ${fmt(w.totalMs, 0)} ms = engine load ${fmt(w.engineLoadMs, 0)} + engine first token ${fmt(w.engineFirstTokenMs, 1)} + gateway ${fmt(w.gatewayMs, 1)} ` +
        `(before the spawn ${fmt(w.beforeSpawnMs, 1)}, after ENGINE_READY ${fmt(w.afterReadyMs, 1)})`,
    );
    if (i + 1 < REPEATS) {
      direct.push(await directColdStart(model.path));
      engine.push(await engineColdStart(model.path));
    }
  }
  console.log(
    `  create → RUNNING ${(creates[0]! / 1000).toFixed(2)} s; direct node-llama-cpp ${direct.map((d) => (d.totalMs / 1000).toFixed(2)).join(', ')} s; standalone engine ${engine.map((e) => (e.totalMs / 1000).toFixed(2)).join(', ')} s`,
  );

  await deleteEndpoint(gateway.url, db.sql, endpointId);
  await gateway.stop();
  await db.stop();

  const directMs = median(direct.map((d) => d.totalMs));
  const engineMs = median(engine.map((e) => e.totalMs));
  const createMs = median(creates);
  const p50 = (pick: (w: Wake) => number) => median(wakes.map(pick));
  const wakeMs = p50((w) => w.totalMs);
  const gatewayMs = p50((w) => w.gatewayMs);
  const d0 = direct[0]!.child;
  const ratio = (ms: number) => fmt(ms / directMs, 3);
  const rows: (string | number)[][] = [
    ['node-llama-cpp direct (baseline): spawn → first token', direct.length, fmt(directMs, 0), '1.000'],
    ['built-in engine alone: spawn → ENGINE_READY → first token over HTTP', engine.length, fmt(engineMs, 0), ratio(engineMs)],
    ['gateway: create → RUNNING (download, engine, warm-up)', creates.length, fmt(createMs, 0), ratio(createMs)],
    ['gateway: request to a SLEEPING endpoint → first token (wake, cached model)', wakes.length, fmt(wakeMs, 0), ratio(wakeMs)],
    [
      '… of which the engine: load, spawn → ENGINE_READY (replica log)',
      wakes.length,
      fmt(
        p50((w) => w.engineLoadMs),
        0,
      ),
      ratio(p50((w) => w.engineLoadMs)),
    ],
    [
      '… of which the engine: first token, same request straight to the woken replica',
      wakes.length,
      fmt(
        p50((w) => w.engineFirstTokenMs),
        1,
      ),
      ratio(p50((w) => w.engineFirstTokenMs)),
    ],
    ["… of which the gateway's share: total − engine load − engine first token", wakes.length, fmt(gatewayMs, 1), ratio(gatewayMs)],
    [
      "    gateway's share before the spawn: request → engine spawned",
      wakes.length,
      fmt(
        p50((w) => w.beforeSpawnMs),
        1,
      ),
      ratio(p50((w) => w.beforeSpawnMs)),
    ],
    [
      "    gateway's share after ENGINE_READY: → first token, less the engine's",
      wakes.length,
      fmt(
        p50((w) => w.afterReadyMs),
        1,
      ),
      ratio(p50((w) => w.afterReadyMs)),
    ],
  ];
  // The run whose gateway share is the median: its timeline explains the figure.
  const middle = [...wakes].sort((a, b) => a.gatewayMs - b.gatewayMs)[Math.floor((wakes.length - 1) / 2)];
  return {
    method:
      `A real gateway process (src/main.ts, built-in engine, CPU_SLOTS=1, ENGINE_THREADS=${THREADS}) on a fresh embedded PostgreSQL, the tiny GGUF (${(model.size / 1024).toFixed(0)} KiB) served by the stand-in hub. ` +
      `Baseline: a fresh process that imports node-llama-cpp, loads the same file (CPU, prebuilt binary, context ${CONTEXT}, ${BATCH} sequences, ${THREADS} threads, as the engine) and evaluates one token; timed from spawn to its report. ` +
      `Also the built-in engine started alone (\`npm run engine\` flags the controller uses) up to its first answered token. Endpoint: created once (create → RUNNING), then ${REPEATS} times slept and woken by a streamed chat request (max_tokens 1), timed from sending it to its first token at the client. ` +
      `Each wake is split: the engine's load is the woken replica's spawn → ENGINE_READY, from its log under the data dir (the runtime's line written just before spawning, the engine's readyAt); the engine's first token is the same streamed request sent straight to the woken replica right after, timed the same way; the gateway's share is the rest (total − engine load − engine first token), also split at the spawn and at ENGINE_READY. ` +
      "p50 = median over the runs (the split rows: the median of each run's figure); ratios are ÷ the baseline.",
    valid: problems.length === 0 && wakes.length > 0,
    problems: wakes.length > 0 ? problems : [...problems, 'no wake-on-request was answered'],
    table: { columns: ['what', 'runs', 'p50 ms', 'ratio to direct'], rows },
    targets: [target("gateway's share of a wake-on-request, p50", gatewayMs, '<', GATEWAY_SHARE_TARGET_MS, ' ms', 1)],
    notes: [
      `Inside the direct baseline (first run): import node-llama-cpp ${fmt(d0.importedMs, 0)} ms after process start, getLlama ${fmt(d0.llamaMs - d0.importedMs, 0)} ms, loadModel ${fmt(d0.modelMs - d0.llamaMs, 0)} ms, createContext ${fmt(d0.contextMs - d0.modelMs, 0)} ms, first token ${fmt(d0.firstTokenMs - d0.contextMs, 0)} ms.`,
      `Create → RUNNING, as the event log records it: ${phases.map((p) => `${p.step} +${(p.atMs / 1000).toFixed(2)} s`).join(' → ')}.`,
      `Wake-on-request runs (total = engine load + engine first token + gateway share, ms): ${wakes.map((w) => `${fmt(w.totalMs, 0)} = ${fmt(w.engineLoadMs, 0)} + ${fmt(w.engineFirstTokenMs, 1)} + ${fmt(w.gatewayMs, 1)}`).join('; ')}. ` +
        `Of the engine's load, the spawn call → the engine process's own start (exec, Node start-up before its clock starts): ${wakes.map((w) => fmt(w.engineExecMs, 1)).join(', ')} ms.`,
      ...(middle
        ? [
            `The median run, ms after the request was sent (status and replica rows: PostgreSQL's transaction times, ms resolution): ${middle.timeline.map((t) => `${t.step} +${fmt(t.atMs, 1)}`).join(' → ')}.`,
          ]
        : []),
    ],
    data: {
      threads: THREADS,
      directMs: direct.map((d) => round(d.totalMs, 1)),
      directInside: direct.map((d) => d.child),
      engineMs: engine.map((e) => ({ totalMs: round(e.totalMs, 1), readyMs: round(e.readyMs, 1) })),
      createToRunningMs: creates.map((v) => round(v, 1)),
      wakes: wakes.map((w) => ({
        totalMs: round(w.totalMs, 1),
        answeredMs: round(w.answeredMs, 1),
        engineLoadMs: round(w.engineLoadMs, 1),
        engineExecMs: round(w.engineExecMs, 1),
        engineFirstTokenMs: round(w.engineFirstTokenMs, 2),
        gatewayMs: round(w.gatewayMs, 1),
        beforeSpawnMs: round(w.beforeSpawnMs, 1),
        afterReadyMs: round(w.afterReadyMs, 1),
        timeline: w.timeline.map((t) => ({ step: t.step, atMs: round(t.atMs, 1) })),
      })),
      phases,
    },
  };
}

export const coldStart: Bench = { name: 'cold-start', title: 'Cold start with the built-in engine', run };
