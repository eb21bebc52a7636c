/**
 * Overload: more clients than an endpoint can take, as a user with real
 * traffic sends them, side by side in one run:
 *
 * - one replica (max_batch_size 4) under 200 closed-loop streaming clients that
 *   honour Retry-After: goodput against the replica's own throughput measured
 *   directly, how fast a 429 comes, and how long served requests wait against
 *   the queue's expected wait;
 * - the same load on an endpoint allowed 1 to 3 replicas: when the second and
 *   third replica are READY, and goodput as they come;
 * - the engine's own figures, restated from the threads and batching results.
 *
 * A real gateway process (`src/main.ts`) runs the real controller, which
 * starts `bench/synthetic-engine.ts --max-batch-size {maxBatchSize}` through
 * ENGINE_COMMAND: a replica that decodes at most max_batch_size streams at once
 * and queues the rest FIFO, as the built-in engine does, with no model cost, so
 * that what is measured is the gateway's admission and scaling.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ADMIN_KEY,
  BENCH_DIR,
  RESULTS_DIR,
  TINY_REPO,
  defaultProject,
  gatewayEnv,
  nextMessage,
  runChild,
  startDatabase,
  startGatewayProcess,
  startHub,
  tempDir,
  type BenchDatabase,
  type ChildHandle,
} from './lib/env.js';
import { createEndpoint, deleteEndpoint, H100_X1, liveReplicas, waitForStatus } from './lib/endpoints.js';
import { cpuTimeMs } from './lib/proc.js';
import { target, type Bench, type BenchContext, type BenchOutcome, type BenchResult, type Target } from './lib/result.js';
import { fmt, mean, quantiles, round } from './lib/stats.js';
import type { BareRefuserConfig } from './load/bare-refuser.js';
import type { OverloadLoadConfig, OverloadLoadResult } from './load/overload-client.js';
import { engineAuthHeaders } from '../src/engine-client/engine-client.js';

const TOKEN_INTERVAL_MS = Number(process.env.BENCH_OVERLOAD_TOKEN_INTERVAL_MS ?? 10);
const MAX_TOKENS = 16;
const BATCH = 4;
const CLIENTS = Number(process.env.BENCH_OVERLOAD_CLIENTS ?? 200);
/** The gateway's QUEUE_TIMEOUT_MS in this run: short enough that 200 clients overflow what one replica serves within it. */
const QUEUE_TIMEOUT_MS = Number(process.env.BENCH_OVERLOAD_QUEUE_TIMEOUT_MS ?? 2000);
const LOAD_MS = Number(process.env.BENCH_OVERLOAD_MS ?? 12_000);
const SCALE_MS = Number(process.env.BENCH_OVERLOAD_SCALE_MS ?? 15_000);
/** Requests sent this soon after the load's start make its first burst (the clients all send at once). */
const BURST_MS = 50;
/** Goodput is counted after the queue has filled. */
const WINDOW_START_MS = 2000;
const DIRECT_MS = 4000;
/** The gateway's warm-up before the measured loads (0: none; the first burst then meets code V8 has not compiled yet). */
const WARMUP_MS = Number(process.env.BENCH_OVERLOAD_WARMUP_MS ?? 3000);
/** How long the same clients load the bare refuser (the floor of the time to a 429 on this machine). */
const FLOOR_MS = 4000;
const DIRECT_CLIENTS = 2 * BATCH;
const MAX_REPLICAS = 3;
const COOLDOWN_S = 5;
/** How long the bench watches for scale-in after the load (past the cooldown). */
const SCALE_IN_WATCH_MS = (COOLDOWN_S + 8) * 1000;
/** BENCH_OVERLOAD_PRECONNECT=0: the clients open their connections in the first burst (a connection storm). */
const PRECONNECT = process.env.BENCH_OVERLOAD_PRECONNECT !== '0';
const RETRY = { minRetryMs: 50, maxRetryMs: 1000, errorBackoffMs: 100 };

const BODY = {
  messages: [{ role: 'user', content: 'Say something.' }],
  stream: true,
  stream_options: { include_usage: true },
  max_tokens: MAX_TOKENS,
};

interface Poll {
  /** ms since the load's start */
  t: number;
  ready: number;
  live: number;
  engineActive: number;
  engineQueued: number;
  /** Sum of the gateway's published queue depth for the endpoint (null where the table or rows are absent). */
  published: number | null;
}

function loadConfig(
  url: string,
  headers: Record<string, string>,
  model: string,
  concurrency: number,
  durationMs: number,
  windowStartMs: number,
): OverloadLoadConfig {
  return {
    url,
    headers,
    body: { ...BODY, model },
    expectTokens: MAX_TOKENS,
    concurrency,
    durationMs,
    windowStartMs,
    graceMs: QUEUE_TIMEOUT_MS + 15_000,
    ...RETRY,
    sampleMs: 50,
    rampMs: 0,
    preconnect: PRECONNECT,
  };
}

async function engineHealth(replica: {
  address: string | null;
  token: string | null;
}): Promise<{ active: number; queued: number } | undefined> {
  try {
    const response = await fetch(`${replica.address}/health`, {
      headers: engineAuthHeaders(replica.token),
      signal: AbortSignal.timeout(500),
    });
    const body = (await response.json()) as { active?: number; queued?: number };
    return { active: body.active ?? 0, queued: body.queued ?? 0 };
  } catch {
    return undefined;
  }
}

/** While `until` is pending: READY replicas, the engines' active/queued, and the published gateway queue depth, every 100 ms. */
async function pollWhile(db: BenchDatabase, endpointId: string, t0: () => number | undefined, until: Promise<unknown>): Promise<Poll[]> {
  const polls: Poll[] = [];
  let done = false;
  void until.finally(() => (done = true)).catch(() => undefined);
  while (!done) {
    const started = performance.now();
    const start = t0();
    if (start !== undefined) {
      const replicas = await liveReplicas(db.sql, endpointId).catch(() => []);
      const ready = replicas.filter((r) => r.state === 'READY');
      const healths = await Promise.all(ready.map((r) => engineHealth(r)));
      let published: number | null;
      try {
        const [row] = await db.sql<
          { q: string | null }[]
        >`SELECT sum(queued)::text AS q FROM gateway_queue_depth WHERE endpoint_id = ${endpointId} AND updated_at > now() - interval '5 seconds'`;
        published = row?.q === null || row?.q === undefined ? 0 : Number(row.q);
      } catch {
        published = null;
      }
      polls.push({
        t: Date.now() - start,
        ready: ready.length,
        live: replicas.length,
        engineActive: healths.reduce((n, h) => n + (h?.active ?? 0), 0),
        engineQueued: healths.reduce((n, h) => n + (h?.queued ?? 0), 0),
        published,
      });
    }
    await sleep(Math.max(0, 100 - (performance.now() - started)));
  }
  return polls;
}

/** Starts the load child; `started` resolves with the wall clock of the load's start (the child's mark). */
function startLoad(config: OverloadLoadConfig): { child: ChildHandle<OverloadLoadResult>; started: Promise<number> } {
  const child = runChild<OverloadLoadResult>('load/overload-client.ts', config, { timeoutMs: config.durationMs + config.graceMs + 60_000 });
  return { child, started: nextMessage<{ wallMs: number }>(child, 'mark').then((m) => m.wallMs) };
}

/** Runs the load child and polls alongside it from the load's start. */
async function loadWithPolls(
  db: BenchDatabase,
  endpointId: string,
  config: OverloadLoadConfig,
  gatewayPid: number,
): Promise<{ r: OverloadLoadResult; polls: Poll[]; gatewayCpuMs: number }> {
  const { child, started } = startLoad(config);
  let startWall: number | undefined;
  let cpu0 = 0;
  void started.then(
    (wall) => {
      startWall = wall;
      cpu0 = cpuTimeMs(gatewayPid) ?? 0;
    },
    () => undefined,
  );
  const pollsPromise = pollWhile(db, endpointId, () => startWall, child.result);
  const r = await child.result;
  const gatewayCpuMs = (cpuTimeMs(gatewayPid) ?? 0) - cpu0;
  return { r, polls: await pollsPromise, gatewayCpuMs };
}

interface Summary {
  counts: OverloadLoadResult['counts'];
  goodput: number;
  /** Content tokens per second in the window ÷ tokens per answer: the service rate without the quantization of whole streams. */
  tokenRate: number;
  /** 429s by the error code in their body: how many, and the time to them. */
  refusalByCode: Record<string, { n: number; p50: number; p99: number }>;
  loopDelayMs: OverloadLoadResult['loopDelayMs'];
  clientCpuMsPerS: number;
  refusalMs: { p50: number; p99: number; max: number; n: number; afterQueueTimeout: number };
  /** The same for requests sent inside the goodput window (after the first burst). */
  refusalSteadyMs: { p50: number; p99: number; n: number };
  /** The first burst (requests sent in the first BURST_MS): 429s, and the heads of every answer (the gateway's cost of the burst). */
  burst: { sent: number; n429: number; p50: number; p99: number; max: number; headP50: number; headMax: number };
  retryAfterS: { min: number; max: number; missing: number };
  ttftServed: { p50: number; p99: number; max: number; n: number };
  aheadServed: { p50: number; p99: number };
  waitingMean: number;
  errors: Record<string, number>;
  samples: string[];
  refusals: string[];
  perClient: { min: number; p50: number; max: number; jain: number };
}

function summarize(r: OverloadLoadResult, windowStartMs: number): Summary {
  const refusal: number[] = [];
  const retryAfter: number[] = [];
  let missingRetryAfter = 0;
  const ttft: number[] = [];
  const ahead: number[] = [];
  for (let i = 0; i < r.status.length; i++) {
    const status = r.status[i]!;
    if (status === 429) {
      refusal.push(r.headMs[i]!);
      if (Number.isFinite(r.retryAfterMs[i]!)) retryAfter.push(r.retryAfterMs[i]!);
      else missingRetryAfter++;
    } else if (status === 503 && !Number.isFinite(r.retryAfterMs[i]!)) missingRetryAfter++;
    if (r.completed[i] === 1) {
      ttft.push(r.ttftMs[i]!);
      ahead.push(r.aheadAtSend[i]!);
    }
  }
  const [ref50, ref99, refMax] = quantiles(refusal, [0.5, 0.99, 1]) as [number, number, number];
  const steady: number[] = [];
  for (let i = 0; i < r.status.length; i++) if (r.status[i] === 429 && r.sentAtMs[i]! >= windowStartMs) steady.push(r.headMs[i]!);
  const [st50, st99] = quantiles(steady, [0.5, 0.99]) as [number, number];
  const burstRefusal: number[] = [];
  const burstHead: number[] = [];
  for (let i = 0; i < r.status.length; i++) {
    if (r.sentAtMs[i]! >= BURST_MS || !Number.isFinite(r.headMs[i]!)) continue;
    burstHead.push(r.headMs[i]!);
    if (r.status[i] === 429) burstRefusal.push(r.headMs[i]!);
  }
  const [b50, b99, bMax] = quantiles(burstRefusal, [0.5, 0.99, 1]) as [number, number, number];
  const [h50, hMax] = quantiles(burstHead, [0.5, 1]) as [number, number];
  const byCode = new Map<string, number[]>();
  for (let i = 0; i < r.status.length; i++) {
    if (r.status[i] !== 429) continue;
    const code = r.codes[r.codeIndex[i]!] || '(none)';
    if (!byCode.has(code)) byCode.set(code, []);
    byCode.get(code)!.push(r.headMs[i]!);
  }
  const refusalByCode = Object.fromEntries(
    [...byCode].map(([code, times]) => {
      const [p50, p99] = quantiles(times, [0.5, 0.99]) as [number, number];
      return [code, { n: times.length, p50, p99 }];
    }),
  );
  const [t50, t99, tMax] = quantiles(ttft, [0.5, 0.99, 1]) as [number, number, number];
  const [a50, a99] = quantiles(ahead, [0.5, 0.99]) as [number, number];
  // Requests waiting for a head, averaged over the goodput window.
  const waiting: number[] = [];
  for (let i = 0; i + 1 < r.waitingSamples.length; i += 2)
    if (r.waitingSamples[i]! >= windowStartMs) waiting.push(r.waitingSamples[i + 1]!);
  const served = Array.from(r.perClient);
  const [c50] = quantiles(served, [0.5]) as [number];
  const sum = served.reduce((a, b) => a + b, 0);
  const sumSq = served.reduce((a, b) => a + b * b, 0);
  return {
    counts: r.counts,
    goodput: r.windowCompleted / (r.windowMs / 1000),
    tokenRate: r.windowTokens / MAX_TOKENS / (r.windowMs / 1000),
    refusalByCode,
    loopDelayMs: r.loopDelayMs,
    clientCpuMsPerS: r.cpuMsPerS,
    // 429s that came only once the request had waited (about) the whole queue timeout: queued, then not served in time.
    refusalMs: {
      p50: ref50,
      p99: ref99,
      max: refMax,
      n: refusal.length,
      afterQueueTimeout: refusal.filter((t) => t >= 0.9 * QUEUE_TIMEOUT_MS).length,
    },
    refusalSteadyMs: { p50: st50, p99: st99, n: steady.length },
    burst: { sent: burstHead.length, n429: burstRefusal.length, p50: b50, p99: b99, max: bMax, headP50: h50, headMax: hMax },
    retryAfterS: {
      min: retryAfter.length ? Math.min(...retryAfter) / 1000 : Number.NaN,
      max: retryAfter.length ? Math.max(...retryAfter) / 1000 : Number.NaN,
      missing: missingRetryAfter,
    },
    ttftServed: { p50: t50, p99: t99, max: tMax, n: ttft.length },
    aheadServed: { p50: a50, p99: a99 },
    waitingMean: mean(waiting),
    errors: r.errors,
    samples: r.errorSamples,
    refusals: r.refusalSamples,
    perClient: {
      min: Math.min(...served),
      p50: c50,
      max: Math.max(...served),
      jain: sumSq > 0 ? (sum * sum) / (served.length * sumSq) : Number.NaN,
    },
  };
}

/** Problems that make a run invalid: failures other than 429/503, dropped streams, stalls. */
function brokenness(label: string, s: Summary): string[] {
  const out: string[] = [];
  const { dropped, otherStatus, socketErrors } = s.counts;
  if (dropped > 0) out.push(`${label}: ${dropped} stream(s) dropped after a 200: ${s.samples.slice(0, 3).join(' | ')}`);
  if (otherStatus + socketErrors > 0 || (s.errors.stalled ?? 0) > 0) {
    out.push(
      `${label}: ${otherStatus} answer(s) other than 200/429/503, ${socketErrors} socket error(s), ${s.errors.stalled ?? 0} stalled (${JSON.stringify(s.errors)}): ${s.samples.slice(0, 3).join(' | ')}`,
    );
  }
  return out;
}

// ------------------------------------------------------------------ engine figures from other results

function readResult(name: string): BenchResult | undefined {
  const file = path.join(RESULTS_DIR, `${name}.json`);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as BenchResult;
  } catch {
    return undefined;
  }
}

function engineFigures(): { rows: (string | number)[][]; targets: Target[]; notes: string[]; data: Record<string, unknown> } {
  const rows: (string | number)[][] = [];
  const targets: Target[] = [];
  const notes: string[] = [];
  const data: Record<string, unknown> = {};
  const when = (r: BenchResult) => `${r.startedAt.replace('T', ' ').slice(0, 16)} UTC${r.valid ? '' : ', INVALID run'}`;

  const threads = readResult('threads');
  if (threads) {
    const ratios = threads.targets.filter((t) => t.what.includes('÷ at the best measured'));
    data.threads = { startedAt: threads.startedAt, valid: threads.valid, targets: ratios };
    for (const t of ratios) {
      rows.push(['engine (threads run)', t.what, t.value, `${t.target}; run ${when(threads)}`]);
      targets.push({ ...t, what: `engine: ${t.what} (threads run ${when(threads)})` });
    }
    if (ratios.length === 0) notes.push(`bench/results/threads.json (${when(threads)}) has no "default ÷ best" figure.`);
  } else {
    rows.push([
      'engine (threads run)',
      'tok/s at the default thread count ÷ at the best measured',
      '–',
      'no bench/results/threads.json: run `npm run bench -- threads`',
    ]);
    targets.push({
      what: 'engine: tok/s at the default thread count ÷ at the best measured (threads run)',
      target: '≥ 0.9',
      value: 'not run',
      met: null,
    });
  }

  const batching = readResult('batching');
  if (batching) {
    const d = batching.data as Record<string, unknown>;
    const level = (n: number) =>
      d[`level${n}`] as
        { directTokensPerSecond?: number; engineTokensPerSecond?: number; engineToDirectSingle?: number; ratio?: number } | undefined;
    const model = typeof d.model === 'string' ? d.model : 'tiny';
    const threadsUsed = d.threads ?? '?';
    const from = `batching run ${when(batching)}, ${model} model, ${threadsUsed} thread(s)`;
    const one = level(1);
    const shortTokens = typeof d.maxTokens === 'number' ? d.maxTokens : 32;
    const long = d.longAnswers as { ratio?: number; directTokensPerSecond?: number; engineTokensPerSecond?: number } | undefined;
    const longTokens = typeof d.longTokens === 'number' ? d.longTokens : undefined;
    data.batching = {
      startedAt: batching.startedAt,
      valid: batching.valid,
      model,
      threads: threadsUsed,
      level1: one,
      level4: level(4),
      level8: level(8),
      longTokens,
      longAnswers: long,
    };
    if (one?.ratio !== undefined) {
      rows.push([
        'engine (batching run)',
        `one request, ${shortTokens}-token answers: engine ÷ raw node-llama-cpp`,
        fmt(one.ratio, 3),
        from,
      ]);
      targets.push({
        ...target(`engine: one request, ${shortTokens}-token answers ÷ raw node-llama-cpp (same threads)`, one.ratio, '>=', 0.9, '', 3),
        what: `engine: one request, ${shortTokens}-token answers ÷ raw node-llama-cpp, same threads (${from})`,
      });
    }
    if (long?.ratio !== undefined && longTokens !== undefined) {
      const what = `one request, ${longTokens}-token answers (llama-bench's tg${longTokens}): engine ÷ raw node-llama-cpp`;
      rows.push([
        'engine (batching run)',
        what,
        fmt(long.ratio, 3),
        `${from}; ${fmt(long.engineTokensPerSecond, 0)} ÷ ${fmt(long.directTokensPerSecond, 0)} tok/s`,
      ]);
      targets.push({ ...target(`engine: ${what}`, long.ratio, '>=', 0.9, '', 3), what: `engine: ${what}, same threads (${from})` });
    }
    for (const n of [1, 4, 8]) {
      const l = level(n);
      if (l?.engineTokensPerSecond !== undefined)
        rows.push([
          'engine (batching run)',
          `tok/s at ${n} in flight`,
          fmt(l.engineTokensPerSecond, 0),
          `${from}; raw node-llama-cpp ${fmt(l.directTokensPerSecond, 0)}`,
        ]);
    }
    const e1 = one?.engineTokensPerSecond;
    const e8 = level(8)?.engineTokensPerSecond;
    if (e1 !== undefined && e8 !== undefined) {
      targets.push({
        ...target('engine: tok/s at 8 in flight ÷ at 1', e8 / e1, '>=', 3, '×', 2),
        what: `engine: tok/s at 8 in flight ÷ at 1 (${from}; the ≥ 3× target is meant for a model large enough for the batch to matter)`,
      });
    }
  } else {
    rows.push([
      'engine (batching run)',
      'one request ÷ raw; tok/s at 1, 4, 8',
      '–',
      'no bench/results/batching.json: run `npm run bench -- batching`',
    ]);
  }
  return { rows, targets, notes, data };
}

// ------------------------------------------------------------------ the run

/**
 * The same clients against a server that only refuses (bench/load/bare-refuser.ts, answering with the gateway's 429 as sent):
 * what any Node.js server takes to refuse this load on this machine.
 */
async function refusalFloor(sample: string | undefined): Promise<Summary> {
  const sent = sample ? sample.slice(sample.indexOf('{')) : '';
  const body = sent.startsWith('{')
    ? sent
    : JSON.stringify({
        error: { message: 'endpoint is at capacity; retry in 1 s', type: 'rate_limit_error', param: null, code: 'queue_full' },
      });
  const config: BareRefuserConfig = { body };
  const server = runChild<{ refused: number }>('load/bare-refuser.ts', config, { timeoutMs: 5 * 60_000 });
  const { url } = await nextMessage<{ url: string }>(server, 'ready');
  const { child } = startLoad(loadConfig(`${url}/dedicated/v1/chat/completions`, {}, 'floor', CLIENTS, FLOOR_MS, WINDOW_START_MS));
  const summary = summarize(await child.result, WINDOW_START_MS);
  server.send({ type: 'stop' });
  await server.result;
  return summary;
}

async function run(context: BenchContext): Promise<BenchOutcome> {
  const problems: string[] = [];
  const notes: string[] = [];
  const rows: (string | number)[][] = [];
  const targets: Target[] = [];
  const data: Record<string, unknown> = {
    tokenIntervalMs: TOKEN_INTERVAL_MS,
    maxTokens: MAX_TOKENS,
    maxBatchSize: BATCH,
    clients: CLIENTS,
    queueTimeoutMs: QUEUE_TIMEOUT_MS,
    loadMs: LOAD_MS,
    scaleMs: SCALE_MS,
    windowStartMs: WINDOW_START_MS,
    retry: RETRY,
    preconnect: PRECONNECT,
    warmupMs: WARMUP_MS,
  };

  const db = await startDatabase();
  const hub = await startHub();
  const dataDir = await tempDir('overload');
  const engineCommand = `"${process.execPath}" --import tsx "${BENCH_DIR}/synthetic-engine.ts" --port {port} --interval-ms ${TOKEN_INTERVAL_MS} --max-batch-size {maxBatchSize}`;
  const gateway = await startGatewayProcess(
    gatewayEnv(dataDir, db.url, hub.url, {
      ENGINE_COMMAND: engineCommand,
      CPU_SLOTS: String(MAX_REPLICAS),
      QUEUE_TIMEOUT_MS: String(QUEUE_TIMEOUT_MS),
    }),
    context.cpuProf ? { cpuProf: 'overload-gateway' } : {},
  );
  const { projectId } = await defaultProject(gateway.url);
  const chatUrl = `${gateway.url}/dedicated/v1/chat/completions`;
  const auth = { authorization: `Bearer ${ADMIN_KEY}` };
  /** An endpoint of the tiny model with the benchmark's batch, scaled as `scaling` says, once it is RUNNING. */
  const runningEndpoint = async (name: string, scaling: Record<string, unknown>): Promise<string> => {
    const id = await createEndpoint(gateway.url, {
      projectId,
      name,
      instanceOptionId: H100_X1,
      hfModelRepo: TINY_REPO,
      advanced: { max_batch_size: BATCH },
      ...scaling,
    });
    await waitForStatus(gateway.url, id, 'RUNNING', 120_000);
    return id;
  };

  // ---------------------------------------------------------------- one replica
  // Warm-up: the same clients for WARMUP_MS on an endpoint of its own, then deleted, so that the measured burst meets a gateway in
  // service (its code compiled, its pools open), as a spike would, and an endpoint that has not served yet.
  if (WARMUP_MS > 0) {
    const warm = await runningEndpoint('bench-overload-warmup', { simplescale: { replicas: 1 } });
    const { child } = startLoad(loadConfig(chatUrl, auth, warm, CLIENTS, WARMUP_MS, 0));
    problems.push(...brokenness('warm-up', summarize(await child.result, 0)));
    await deleteEndpoint(gateway.url, db.sql, warm);
  }

  const single = await runningEndpoint('bench-overload-1', { simplescale: { replicas: 1 } });
  const [replica] = (await liveReplicas(db.sql, single)).filter((r) => r.state === 'READY');
  if (!replica) throw new Error('the endpoint is RUNNING without a READY replica');

  // The replica's own throughput: closed-loop clients straight at the engine, twice its batch so that it never idles; before and
  // after the gateway's load (a noisy neighbour on the shared machine hits both alike). The rate is counted in tokens ÷ tokens per
  // answer, which the batch's whole streams finishing together do not quantize.
  const directRun = async (label: string) => {
    const { child, started } = startLoad(
      loadConfig(`${replica.address}/v1/chat/completions`, engineAuthHeaders(replica.token), single, DIRECT_CLIENTS, DIRECT_MS, 1000),
    );
    await started;
    await sleep(DIRECT_MS / 2);
    const health = await engineHealth(replica);
    const summary = summarize(await child.result, 1000);
    problems.push(...brokenness(`direct (${label})`, summary));
    console.log(
      `  direct (${label}): ${DIRECT_CLIENTS} clients → ${summary.tokenRate.toFixed(2)} streams/s by tokens, ${summary.goodput.toFixed(1)} completed/s (health mid-run ${JSON.stringify(health)})`,
    );
    if (health && (health.active !== BATCH || health.queued !== DIRECT_CLIENTS - BATCH)) {
      notes.push(
        `Mid-way through the direct run (${label}) the engine's /health said active ${health.active}, queued ${health.queued} (expected ${BATCH} and ${DIRECT_CLIENTS - BATCH}).`,
      );
    }
    return { summary, health };
  };
  const before = await directRun('before');

  // 200 clients through the gateway.
  const one = await loadWithPolls(db, single, loadConfig(chatUrl, auth, single, CLIENTS, LOAD_MS, WINDOW_START_MS), gateway.pid);
  const s1 = summarize(one.r, WINDOW_START_MS);
  const after = await directRun('after');
  const floor = await refusalFloor(s1.refusals[0]);
  const mu = (before.summary.tokenRate + after.summary.tokenRate) / 2;
  const direct = before.summary;
  const directHealth = before.health;
  problems.push(...brokenness('one replica', s1));
  // Expected wait of a request joining the queue: the requests ahead of it (the mean waiting for a head over the window, as the only
  // client sees them) plus itself, at the replica's measured service rate; a queue that admits only what starts within the timeout never exceeds it.
  const expectedWaitMs = Math.min(QUEUE_TIMEOUT_MS, ((s1.waitingMean + 1) / mu) * 1000);
  const ttftRatio = s1.ttftServed.p99 / expectedWaitMs;
  const inWindow = one.polls.filter((p) => p.t >= WINDOW_START_MS && p.t <= LOAD_MS);
  const engineActiveMean = mean(inWindow.map((p) => p.engineActive));
  const engineQueuedMean = mean(inWindow.map((p) => p.engineQueued));
  console.log(
    `  one replica: goodput ${s1.goodput.toFixed(1)}/s (${(s1.goodput / mu).toFixed(3)} of direct), 429 p50/p99 ${fmt(s1.refusalMs.p50)}/${fmt(s1.refusalMs.p99)} ms (${s1.counts.s429}), ` +
      `served TTFT p50/p99 ${fmt(s1.ttftServed.p50, 0)}/${fmt(s1.ttftServed.p99, 0)} ms vs expected ${fmt(expectedWaitMs, 0)} ms, dropped ${s1.counts.dropped}`,
  );

  await deleteEndpoint(gateway.url, db.sql, single);

  // ---------------------------------------------------------------- scale-out
  const scaled = await runningEndpoint('bench-overload-3', {
    autoscalingPolicy: { minReplica: 1, maxReplica: MAX_REPLICAS, cooldownPeriod: COOLDOWN_S },
  });
  const three = await loadWithPolls(db, scaled, loadConfig(chatUrl, auth, scaled, CLIENTS, SCALE_MS, WINDOW_START_MS), gateway.pid);
  const s3 = summarize(three.r, WINDOW_START_MS);
  problems.push(...brokenness('scale-out', s3));
  const replicaRows = await db.sql<{ id: string; state: string; created_at: Date; ready_at: Date | null; stopped_at: Date | null }[]>`
    SELECT id, state, created_at, ready_at, stopped_at FROM replicas WHERE endpoint_id = ${scaled} ORDER BY coalesce(ready_at, created_at)`;
  const startWall = three.r.startWallMs;
  const added = replicaRows.filter((r) => r.created_at.getTime() >= startWall - 50 || (r.ready_at && r.ready_at.getTime() > startWall));
  const readyAfter = added
    .map((r) => (r.ready_at ? r.ready_at.getTime() - startWall : Number.NaN))
    .filter(Number.isFinite)
    .sort((a, b) => a - b);
  const createdAfter = added.map((r) => r.created_at.getTime() - startWall).sort((a, b) => a - b);
  const secondReadyMs = readyAfter[0] ?? Number.NaN;
  const thirdReadyMs = readyAfter[1] ?? Number.NaN;
  // Goodput per second of the load, beside the replicas READY at that second's end and what they could serve at the direct rate.
  const series = three.r.completedPerSecond.map((n, s) => {
    const atEnd = three.polls.filter((p) => p.t <= (s + 1) * 1000).at(-1);
    return {
      s: s + 1,
      goodput: n,
      refused: three.r.refusedPerSecond[s] ?? 0,
      readyReplicas: atEnd?.ready ?? null,
      capacity: atEnd ? round(atEnd.ready * mu, 1) : null,
      publishedQueue: atEnd?.published ?? null,
    };
  });
  const fullSince = readyAfter.length >= MAX_REPLICAS - 1 ? readyAfter[MAX_REPLICAS - 2]! : Number.NaN;
  const fullSeconds = series.filter((p) => Number.isFinite(fullSince) && p.s - 1 >= Math.ceil(fullSince / 1000) && p.s * 1000 <= SCALE_MS);
  const fullGoodput = fullSeconds.length > 0 ? mean(fullSeconds.map((p) => p.goodput)) : Number.NaN;
  console.log(
    `  scale-out: 2nd READY ${fmt(secondReadyMs / 1000, 1)} s, 3rd READY ${fmt(thirdReadyMs / 1000, 1)} s after the load's start; goodput/s ${series.map((p) => p.goodput).join(' ')}; ` +
      `429 p99 ${fmt(s3.refusalMs.p99)} ms, dropped ${s3.counts.dropped}`,
  );
  // Scale-in: from the end of the load (no request sent after it; those under way still finish) to one READY replica again.
  const loadEndWall = startWall + SCALE_MS;
  const lastAnswerMs =
    Math.max(
      ...Array.from(
        three.r.sentAtMs,
        (t, i) =>
          t + (Number.isFinite(three.r.totalMs[i]!) ? three.r.totalMs[i]! : Number.isFinite(three.r.headMs[i]!) ? three.r.headMs[i]! : 0),
      ),
    ) - SCALE_MS;
  let scaledInMs = Number.NaN;
  if (readyAfter.length > 0) {
    const seen = three.polls.find((p) => p.t >= SCALE_MS && p.ready <= 1);
    if (seen) scaledInMs = seen.t - SCALE_MS;
    while (!seen && Date.now() - loadEndWall < SCALE_IN_WATCH_MS) {
      const ready = (await liveReplicas(db.sql, scaled).catch(() => [])).filter((r) => r.state === 'READY').length;
      if (ready <= 1) {
        scaledInMs = Date.now() - loadEndWall;
        break;
      }
      await sleep(100);
    }
  }
  await deleteEndpoint(gateway.url, db.sql, scaled);
  await gateway.stop();
  await db.stop();

  // ---------------------------------------------------------------- figures
  const countsRow = (s: Summary) =>
    `${s.counts.completed} / ${s.counts.s429} / ${s.counts.s503} / ${s.counts.otherStatus + s.counts.socketErrors} / ${s.counts.dropped}`;
  rows.push([
    'replica alone',
    `direct throughput (${DIRECT_CLIENTS} closed-loop clients at the engine, before / after)`,
    `${fmt(mu, 2)} streams/s`,
    `${fmt(before.summary.tokenRate, 2)} / ${fmt(after.summary.tokenRate, 2)} by tokens ÷ ${MAX_TOKENS}; ${fmt(before.summary.goodput, 1)} / ${fmt(after.summary.goodput, 1)} completed/s; TTFT p50 ${fmt(direct.ttftServed.p50, 0)} ms (its own FIFO)`,
  ]);
  rows.push([
    'one replica, 200 clients',
    'goodput (completed streams/s) ÷ direct',
    `${fmt(s1.goodput, 1)} /s = ${fmt(s1.goodput / mu, 3)}`,
    `window ${WINDOW_START_MS / 1000}–${LOAD_MS / 1000} s; engine busy ${fmt(engineActiveMean, 2)} of ${BATCH} on average, ${fmt(engineQueuedMean, 2)} queued in it`,
  ]);
  rows.push([
    'one replica, 200 clients',
    'time to a 429: p50 / p99 / max',
    `${fmt(s1.refusalMs.p50, 1)} / ${fmt(s1.refusalMs.p99, 1)} / ${fmt(s1.refusalMs.max, 0)} ms`,
    `${s1.refusalMs.n} × 429, ${s1.refusalMs.afterQueueTimeout} of them after waiting ≥ 0.9 × QUEUE_TIMEOUT_MS; sent after ${WINDOW_START_MS / 1000} s: p50 / p99 ${fmt(s1.refusalSteadyMs.p50, 1)} / ${fmt(s1.refusalSteadyMs.p99, 1)} ms; Retry-After ${fmt(s1.retryAfterS.min, 1)}–${fmt(s1.retryAfterS.max, 1)} s${s1.retryAfterS.missing ? `, ${s1.retryAfterS.missing} without` : ''}`,
  ]);
  rows.push([
    'one replica, 200 clients',
    `first burst (sent in the first ${BURST_MS} ms): time to a 429 p50 / p99 / max`,
    `${fmt(s1.burst.p50, 1)} / ${fmt(s1.burst.p99, 1)} / ${fmt(s1.burst.max, 0)} ms`,
    `${s1.burst.n429} × 429 of ${s1.burst.sent} sent; every answer's head p50 / max ${fmt(s1.burst.headP50, 1)} / ${fmt(s1.burst.headMax, 0)} ms`,
  ]);
  rows.push([
    'bare refuser, 200 clients',
    'time to a 429: p50 / p99 / max; first burst p50 / p99',
    `${fmt(floor.refusalMs.p50, 1)} / ${fmt(floor.refusalMs.p99, 1)} / ${fmt(floor.refusalMs.max, 0)} ms; ${fmt(floor.burst.p50, 1)} / ${fmt(floor.burst.p99, 1)} ms`,
    `the same clients for ${FLOOR_MS / 1000} s at a node:http server that only reads, parses and refuses (bench/load/bare-refuser.ts); ` +
      `the gateway ÷ it: p99 ${fmt(s1.refusalMs.p99 / floor.refusalMs.p99, 2)}×, first burst p99 ${fmt(s1.burst.p99 / floor.burst.p99, 2)}×; sent after ${WINDOW_START_MS / 1000} s: p99 ${fmt(floor.refusalSteadyMs.p99, 1)} ms (${fmt(s1.refusalSteadyMs.p99 / floor.refusalSteadyMs.p99, 2)}×)`,
  ]);
  const byCode = (x: Summary) =>
    Object.entries(x.refusalByCode)
      .map(([code, v]) => `${code} ${v.n} × (${fmt(v.p50, 1)} / ${fmt(v.p99, 1)} ms)`)
      .join('; ') || '–';
  rows.push([
    'one replica, 200 clients',
    '429s by error code: count (p50 / p99 time to it)',
    byCode(s1),
    `the load generator's own event-loop delay p50 / p99 ${fmt(s1.loopDelayMs.p50, 1)} / ${fmt(s1.loopDelayMs.p99, 1)} ms, its CPU ${fmt(s1.clientCpuMsPerS, 0)} ms/s; gateway CPU ${fmt(one.gatewayCpuMs / (LOAD_MS / 1000), 0)} ms/s`,
  ]);
  rows.push([
    'one replica, 200 clients',
    'served TTFT p50 / p99 / max',
    `${fmt(s1.ttftServed.p50, 0)} / ${fmt(s1.ttftServed.p99, 0)} / ${fmt(s1.ttftServed.max, 0)} ms`,
    `expected wait ${fmt(expectedWaitMs, 0)} ms (${fmt(s1.waitingMean, 1)} waiting on average); p99 ÷ expected = ${fmt(ttftRatio, 2)}`,
  ]);
  rows.push([
    'one replica, 200 clients',
    'completed / 429 / 503 / other / dropped',
    countsRow(s1),
    `${s1.counts.sent} requests; completions per client min ${s1.perClient.min}, median ${s1.perClient.p50}, max ${s1.perClient.max}`,
  ]);
  rows.push([
    '1–3 replicas, 200 clients',
    "2nd / 3rd replica READY after the load's start",
    `${fmt(secondReadyMs / 1000, 2)} / ${fmt(thirdReadyMs / 1000, 2)} s`,
    `replicas created at ${createdAfter.map((t) => `${fmt(t / 1000, 2)} s`).join(', ') || 'none'}; cooldown ${COOLDOWN_S} s`,
  ]);
  rows.push([
    '1–3 replicas, 200 clients',
    'goodput per second of the load',
    series.map((p) => p.goodput).join(' '),
    `READY replicas at each second's end: ${series.map((p) => p.readyReplicas ?? '–').join(' ')}`,
  ]);
  rows.push([
    '1–3 replicas, 200 clients',
    `goodput with ${MAX_REPLICAS} READY ÷ ${MAX_REPLICAS} × direct`,
    Number.isFinite(fullGoodput) ? `${fmt(fullGoodput, 1)} /s = ${fmt(fullGoodput / (MAX_REPLICAS * mu), 3)}` : '–',
    Number.isFinite(fullGoodput) ? `over ${fullSeconds.length} whole second(s)` : `${MAX_REPLICAS} replicas never READY during the load`,
  ]);
  rows.push([
    '1–3 replicas, 200 clients',
    '429s by error code: count (p50 / p99 time to it); served TTFT p50 / p99',
    `${byCode(s3)}; TTFT ${fmt(s3.ttftServed.p50, 0)} / ${fmt(s3.ttftServed.p99, 0)} ms`,
    `load generator event-loop delay p99 ${fmt(s3.loopDelayMs.p99, 1)} ms`,
  ]);
  rows.push([
    '1–3 replicas, 200 clients',
    'time to a 429 p99; completed / 429 / 503 / other / dropped',
    `${fmt(s3.refusalMs.p99, 1)} ms (${s3.refusalMs.afterQueueTimeout} after the queue timeout); ${countsRow(s3)}`,
    Number.isFinite(scaledInMs)
      ? `back to 1 READY replica ${fmt(scaledInMs / 1000, 1)} s after the load's end (its last answer ${fmt(lastAnswerMs / 1000, 1)} s after it)`
      : readyAfter.length > 0
        ? `still above 1 READY replica ${SCALE_IN_WATCH_MS / 1000} s after the load's end`
        : 'never scaled out',
  ]);

  targets.push(target("one replica, 200 clients: goodput ÷ the replica's direct throughput", s1.goodput / mu, '>=', 0.9, '', 4));
  targets.push(target('one replica, 200 clients: time to a 429, p99', s1.refusalMs.p99, '<', 50, ' ms', 1));
  targets.push(target("one replica, 200 clients: served TTFT p99 ÷ the queue's expected wait", ttftRatio, '<=', 2, '×', 2));
  targets.push(
    target(
      'streams dropped (all loads)',
      s1.counts.dropped + s3.counts.dropped + before.summary.counts.dropped + after.summary.counts.dropped,
      '==',
      0,
      '',
      0,
    ),
  );
  notes.push(
    `The time to a 429 has a floor here: the same ${CLIENTS} clients at a server that only refuses (bench/load/bare-refuser.ts) waited ` +
      `${fmt(floor.burst.p99, 1)} ms (p99) for the first burst's answers and ${fmt(floor.refusalMs.p99, 1)} ms over the whole load: ` +
      `${CLIENTS} requests sent at once ${PRECONNECT ? 'on connections opened before the clock started' : 'on as many connections opened with them'}, on the cores the load generator and the server share. ` +
      `The gateway took ${fmt(s1.burst.p99 / floor.burst.p99, 2)}× that for the burst.`,
  );
  if (s1.refusalMs.n === 0) notes.push('No request got a 429 under 200 clients on one replica: the time to a 429 could not be measured.');

  const engine = engineFigures();
  rows.push(...engine.rows);
  targets.push(...engine.targets);
  notes.push(...engine.notes);

  notes.push(
    `One replica: the engine (max_batch_size ${BATCH}) averaged ${fmt(engineActiveMean, 2)} streams decoding and ${fmt(engineQueuedMean, 2)} queued in it during the window; ` +
      `gateway CPU ${fmt(one.gatewayCpuMs / (LOAD_MS / 1000), 0)} ms/s over the load.`,
  );
  if (s1.refusals.length > 0) notes.push(`A 429 as sent (one replica): ${s1.refusals[0]!.slice(0, 300)}`);
  const noScale = readyAfter.length === 0;
  if (noScale) notes.push(`The 1–3 replica endpoint never added a replica under ${CLIENTS} clients in ${SCALE_MS / 1000} s.`);

  Object.assign(data, {
    direct: {
      clients: DIRECT_CLIENTS,
      durationMs: DIRECT_MS,
      streamsPerSecond: round(mu, 3),
      healthMidRun: directHealth ?? null,
      before: roundDeep(before.summary),
      after: roundDeep(after.summary),
    },
    oneReplica: {
      summary: roundDeep(s1),
      goodputRatio: round(s1.goodput / mu, 4),
      expectedWaitMs: round(expectedWaitMs, 1),
      ttftP99OverExpected: round(ttftRatio, 3),
      engineActiveMean: round(engineActiveMean, 2),
      engineQueuedMean: round(engineQueuedMean, 2),
      gatewayCpuMs: round(one.gatewayCpuMs, 0),
      completedPerSecond: one.r.completedPerSecond,
      refusedPerSecond: one.r.refusedPerSecond,
      publishedQueue: one.polls.filter((_, i) => i % 5 === 0).map((p) => [p.t, p.published]),
    },
    refusalFloor: {
      durationMs: FLOOR_MS,
      summary: roundDeep(floor),
      p99Ratio: round(s1.refusalMs.p99 / floor.refusalMs.p99, 3),
      burstP99Ratio: round(s1.burst.p99 / floor.burst.p99, 3),
    },
    scaleOut: {
      minReplica: 1,
      maxReplica: MAX_REPLICAS,
      cooldownS: COOLDOWN_S,
      summary: roundDeep(s3),
      replicas: replicaRows.map((r) => ({
        id: r.id,
        state: r.state,
        createdAfterMs: r.created_at.getTime() - startWall,
        readyAfterMs: r.ready_at ? r.ready_at.getTime() - startWall : null,
      })),
      secondReadyMs: round(secondReadyMs, 0),
      thirdReadyMs: round(thirdReadyMs, 0),
      goodputWithAllReady: round(fullGoodput, 2),
      scaledInAfterLoadEndMs: round(scaledInMs, 0),
      lastAnswerAfterLoadEndMs: round(lastAnswerMs, 0),
      series,
      gatewayCpuMs: round(three.gatewayCpuMs, 0),
    },
    engine: engine.data,
  });

  return {
    method:
      `A real gateway process (src/main.ts, embedded PostgreSQL, the real controller and runtime; CPU_SLOTS ${MAX_REPLICAS}, QUEUE_TIMEOUT_MS ${QUEUE_TIMEOUT_MS}) starts bench/synthetic-engine.ts ` +
      `through ENGINE_COMMAND with --max-batch-size {maxBatchSize}: each replica decodes at most ${BATCH} streams at once (a step every ${TOKEN_INTERVAL_MS} ms), queues the rest FIFO and reports active/queued on /health. ` +
      `Answers are ${MAX_TOKENS}-token streams. The replica's own throughput: ${DIRECT_CLIENTS} closed-loop clients straight at the engine for ${DIRECT_MS / 1000} s, before and after the gateway load ` +
      `(content tokens received per second after the first 1 s ÷ ${MAX_TOKENS}, averaged over the two runs). ` +
      `Then a load-generator child runs ${CLIENTS} closed-loop streaming clients through POST /dedicated/v1/chat/completions with one API key for ${LOAD_MS / 1000} s on an endpoint of one replica; ` +
      `a client answered 429 or 503 waits its Retry-After clamped to [${RETRY.minRetryMs} ms, ${RETRY.maxRetryMs / 1000} s] and tries again. ` +
      (PRECONNECT
        ? `Each client opens its keep-alive connection (GET /healthz) before the clock starts, so that times are the requests' own, as wrk and k6's http_req_duration measure them, not TCP set-up; the ${CLIENTS} first requests still leave in the same millisecond. `
        : `The clients open their connections with their first requests (BENCH_OVERLOAD_PRECONNECT=0). `) +
      (WARMUP_MS > 0
        ? `Before the measured loads, the same clients load an endpoint of its own for ${WARMUP_MS / 1000} s, deleted after, so that the gateway meets the burst in service (its code compiled) and the measured endpoint has served nothing yet. `
        : '') +
      `Goodput = streams completed with all tokens and [DONE] ` +
      `between ${WINDOW_START_MS / 1000} s and the end, per second, ÷ the direct throughput. Time to a 429 = request sent → response head. ` +
      `Expected wait = (mean requests waiting for a response head over the window, as the only client sees them, + 1) ÷ the direct throughput, capped at QUEUE_TIMEOUT_MS (queued-ahead ÷ service rate, by Little's law); ` +
      `the target compares the served requests' TTFT p99 with it. Then the same load for ${SCALE_MS / 1000} s on an endpoint with minReplica 1, maxReplica ${MAX_REPLICAS}, cooldown ${COOLDOWN_S} s: ` +
      `the replicas' ready_at (table replicas) against the load's start, goodput per second beside the READY replicas (polled every 100 ms), and the time back to one replica after the load. ` +
      `Engine figures are restated from bench/results/threads.json and batching.json (not re-measured). Targets are reported, not asserted; the run is invalid only on failures other than 429/503 or dropped streams.`,
    valid: problems.length === 0,
    problems,
    table: { columns: ['part', 'figure', 'value', 'detail'], rows },
    targets,
    notes,
    data,
  };
}

function roundDeep(value: unknown): unknown {
  if (typeof value === 'number') return round(value, 2);
  if (Array.isArray(value)) return value.map(roundDeep);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, roundDeep(v)]));
  return value;
}

export const overload: Bench = { name: 'overload', title: 'Overload: 200 clients on one replica, fail-fast admission, scale-out', run };
