/**
 * Streaming overhead: the same streamed chat completions sent straight to a
 * replica and through the gateway, at 1, 64 and 512 concurrent streams.
 *
 * A real gateway process (`src/main.ts`) runs the real controller, which
 * starts `bench/synthetic-engine.ts` through ENGINE_COMMAND after resolving
 * and downloading the tiny GGUF from the stand-in hub. The load generator is a
 * separate process. Direct and gateway rounds alternate (A B B A) so that a
 * noisy neighbour on the shared machine hits both alike.
 */
import { quantiles, fmt, round, concat, median } from './lib/stats.js';
import { BENCH_DIR, ADMIN_KEY, TINY_REPO, defaultProject, gatewayEnv, runChild, startDatabase, startGatewayProcess, startHub, tempDir } from './lib/env.js';
import { createEndpoint, deleteEndpoint, H100_X1, liveReplicas, waitForStatus } from './lib/endpoints.js';
import { cpuTimeMs } from './lib/proc.js';
import { target, type Bench, type BenchContext, type BenchOutcome } from './lib/result.js';
import type { StreamLoadConfig, StreamLoadResult } from './load/stream-client.js';

const TOKEN_INTERVAL_MS = Number(process.env.BENCH_TOKEN_INTERVAL_MS ?? 10);
const ROUND_MS = Number(process.env.BENCH_STREAM_ROUND_MS ?? 4000);
const WARMUP_MS = 1000;

interface Level {
  streams: number;
  maxTokens: number;
}

const LEVELS: Level[] = [
  // Short answers at 1 stream, so that there are enough first tokens to take a p99 of.
  { streams: 1, maxTokens: 16 },
  { streams: 64, maxTokens: 64 },
  { streams: 512, maxTokens: 64 },
];

type Mode = 'direct' | 'gateway';

interface ModeTotals {
  ttft: Float64Array[];
  itl: Float64Array[];
  tokens: number;
  windowMs: number;
  started: number;
  completed: number;
  dropped: number;
  errors: Record<string, number>;
  samples: string[];
  gatewayCpuMs: number;
  engineCpuMs: number;
}

function emptyTotals(): ModeTotals {
  return { ttft: [], itl: [], tokens: 0, windowMs: 0, started: 0, completed: 0, dropped: 0, errors: {}, samples: [], gatewayCpuMs: 0, engineCpuMs: 0 };
}

async function run(context: BenchContext): Promise<BenchOutcome> {
  const problems: string[] = [];
  const db = await startDatabase();
  const hub = await startHub();
  const dataDir = await tempDir('streaming');
  const engineCommand = `"${process.execPath}" --import tsx "${BENCH_DIR}/synthetic-engine.ts" --port {port} --interval-ms ${TOKEN_INTERVAL_MS}`;
  const gateway = await startGatewayProcess(gatewayEnv(dataDir, db.url, hub.url, { ENGINE_COMMAND: engineCommand, CPU_SLOTS: '1' }), context.cpuProf ? { cpuProf: 'streaming-gateway' } : {});
  const { projectId } = await defaultProject(gateway.url);

  const createdAt = performance.now();
  const endpointId = await createEndpoint(gateway.url, {
    projectId,
    name: 'bench-streaming',
    instanceOptionId: H100_X1,
    hfModelRepo: TINY_REPO,
    // Admission never rejects: more slots than streams, and a long queue timeout (QUEUE_TIMEOUT_MS).
    advanced: { max_batch_size: 1024 },
    simplescale: { replicas: 1 },
  });
  await waitForStatus(gateway.url, endpointId, 'RUNNING', 120_000);
  const startMs = performance.now() - createdAt;
  const [replica] = (await liveReplicas(db.sql, endpointId)).filter((r) => r.state === 'READY');
  if (!replica) throw new Error('the endpoint is RUNNING without a READY replica');
  console.log(`  endpoint ${endpointId} RUNNING after ${(startMs / 1000).toFixed(1)} s; replica ${replica.address} (pid ${replica.pid})`);

  const targets = {
    direct: { url: `${replica.address}/v1/chat/completions`, headers: {} as Record<string, string> },
    gateway: { url: `${gateway.url}/dedicated/v1/chat/completions`, headers: { authorization: `Bearer ${ADMIN_KEY}` } },
  };

  const perLevel: Record<number, Record<Mode, ModeTotals>> = {};
  for (const level of LEVELS) {
    const totals: Record<Mode, ModeTotals> = { direct: emptyTotals(), gateway: emptyTotals() };
    perLevel[level.streams] = totals;
    for (const mode of ['direct', 'gateway', 'gateway', 'direct'] as Mode[]) {
      const config: StreamLoadConfig = {
        ...targets[mode],
        body: {
          model: endpointId,
          messages: [{ role: 'user', content: 'Say something.' }],
          stream: true,
          stream_options: { include_usage: true },
          max_tokens: level.maxTokens,
        },
        expectTokens: level.maxTokens,
        concurrency: level.streams,
        warmupMs: WARMUP_MS,
        durationMs: ROUND_MS,
        graceMs: 20_000,
      };
      const child = runChild<StreamLoadResult>('load/stream-client.ts', config, { timeoutMs: ROUND_MS + WARMUP_MS + 60_000 });
      // CPU of the gateway and the engine inside the measured window.
      const cpu = { gw0: 0, en0: 0, gw: 0, en: 0 };
      child.on((message) => {
        if (message.type !== 'mark') return;
        if (message.what === 'start') {
          cpu.gw0 = cpuTimeMs(gateway.pid) ?? 0;
          cpu.en0 = cpuTimeMs(replica.pid) ?? 0;
        } else {
          cpu.gw = (cpuTimeMs(gateway.pid) ?? 0) - cpu.gw0;
          cpu.en = (cpuTimeMs(replica.pid) ?? 0) - cpu.en0;
        }
      });
      const r = await child.result;
      const t = totals[mode];
      t.ttft.push(r.ttftMs);
      t.itl.push(r.itlMs);
      t.tokens += r.windowTokens;
      t.windowMs += r.windowMs;
      t.started += r.started;
      t.completed += r.completed;
      t.dropped += r.dropped + r.warmupDropped;
      for (const [k, v] of Object.entries(r.errors)) t.errors[k] = (t.errors[k] ?? 0) + v;
      t.samples.push(...r.errorSamples);
      t.gatewayCpuMs += cpu.gw;
      t.engineCpuMs += cpu.en;
      console.log(
        `  ${String(level.streams).padStart(3)} streams ${mode.padEnd(7)}: ${r.completed} streams, ${(r.windowTokens / (r.windowMs / 1000)).toFixed(0)} tok/s, ` +
          `TTFT p50 ${fmt(median(r.ttftMs))} ms, dropped ${r.dropped + r.warmupDropped}`,
      );
    }
  }

  await deleteEndpoint(gateway.url, db.sql, endpointId);
  await gateway.stop();
  await db.stop();

  const rows: (string | number)[][] = [];
  const data: Record<string, unknown> = { tokenIntervalMs: TOKEN_INTERVAL_MS, roundMs: ROUND_MS, endpointStartMs: round(startMs, 0), levels: {} };
  const resultTargets = [];
  let totalDropped = 0;
  for (const level of LEVELS) {
    const totals = perLevel[level.streams]!;
    const summary = (t: ModeTotals) => {
      const [ttft50, ttft99] = quantiles(concat(t.ttft), [0.5, 0.99]) as [number, number];
      const [itl50, itl99] = quantiles(concat(t.itl), [0.5, 0.99]) as [number, number];
      const tps = t.tokens / (t.windowMs / 1000);
      return { ttft50, ttft99, itl50, itl99, tps, requests: t.completed, dropped: t.dropped, errors: t.errors, samples: t.samples.slice(0, 5), gatewayCpuMs: t.gatewayCpuMs, engineCpuMs: t.engineCpuMs, ttftCount: concat(t.ttft).length };
    };
    const d = summary(totals.direct);
    const g = summary(totals.gateway);
    const dropped = d.dropped + g.dropped;
    totalDropped += dropped;
    if (dropped > 0) problems.push(`${level.streams} streams: ${dropped} dropped (direct ${JSON.stringify(d.errors)}, gateway ${JSON.stringify(g.errors)}): ${[...d.samples, ...g.samples].slice(0, 3).join(' | ')}`);
    const addedTtft50 = g.ttft50 - d.ttft50;
    const addedTtft99 = g.ttft99 - d.ttft99;
    const addedItl50 = g.itl50 - d.itl50;
    const addedItl99 = g.itl99 - d.itl99;
    const ratio = g.tps / d.tps;
    // Gateway CPU per relayed token, net of what the same process spends while the load goes direct (controller passes, timers).
    const gwCpuPerToken = ((g.gatewayCpuMs - d.gatewayCpuMs) * 1000) / Math.max(1, totals.gateway.tokens);
    const engineCpuPerToken = { direct: (d.engineCpuMs * 1000) / Math.max(1, totals.direct.tokens), gateway: (g.engineCpuMs * 1000) / Math.max(1, totals.gateway.tokens) };
    (data.levels as Record<string, unknown>)[level.streams] = {
      maxTokens: level.maxTokens,
      direct: roundAll(d),
      gateway: roundAll(g),
      added: { ttftP50Ms: round(addedTtft50), ttftP99Ms: round(addedTtft99), itlP50Ms: round(addedItl50), itlP99Ms: round(addedItl99) },
      throughputRatio: round(ratio, 4),
      gatewayCpuUsPerToken: round(gwCpuPerToken, 1),
      engineCpuUsPerToken: { direct: round(engineCpuPerToken.direct, 1), gateway: round(engineCpuPerToken.gateway, 1) },
    };
    rows.push([
      level.streams,
      level.maxTokens,
      `${d.requests} / ${g.requests}`,
      `${fmt(d.ttft50)} / ${fmt(g.ttft50)}`,
      fmt(addedTtft50),
      `${fmt(d.ttft99)} / ${fmt(g.ttft99)}`,
      fmt(addedTtft99),
      fmt(addedItl50),
      fmt(addedItl99),
      `${fmt(d.tps, 0)} / ${fmt(g.tps, 0)}`,
      fmt(ratio, 3),
      fmt(gwCpuPerToken, 1),
      fmt(gwCpuPerToken / engineCpuPerToken.gateway, 1),
      dropped,
    ]);
    if (level.streams === 64) resultTargets.push(target('added TTFT p99 at 64 streams', addedTtft99, '<', 2, ' ms'));
    if (level.streams === 512) resultTargets.push(target('throughput ratio (gateway ÷ direct) at 512 streams', ratio, '>=', 0.9, '', 3));
  }
  resultTargets.push(target('streams dropped (all levels, both paths)', totalDropped, '==', 0, '', 0));

  return {
    method:
      `A real gateway process (src/main.ts, embedded PostgreSQL, the real controller and runtime) starts bench/synthetic-engine.ts through ENGINE_COMMAND ` +
      `(one replica, max_batch_size 1024, a decode step every ${TOKEN_INTERVAL_MS} ms writing one token to every open stream). A load-generator child process runs N closed-loop ` +
      `streaming clients (stream_options.include_usage) against the replica directly and against POST /dedicated/v1/chat/completions, alternating direct, gateway, gateway, direct ` +
      `rounds of ${ROUND_MS / 1000} s after a 1 s warm-up each. TTFT = request sent → first non-empty content chunk; ITL = gap between content chunks at the client; ` +
      `tokens/s = content chunks received inside the measured windows. "Added" = gateway percentile − direct percentile. Gateway CPU µs/token from /proc over the measured windows, net of the gateway's own CPU while the load goes direct; "gw ÷ engine CPU/token" compares it with what the synthetic engine spends producing the same token.`,
    valid: problems.length === 0,
    problems,
    table: {
      columns: ['streams', 'max_tokens', 'requests direct / gw', 'TTFT p50 direct / gw (ms)', 'added TTFT p50', 'TTFT p99 direct / gw (ms)', 'added TTFT p99', 'added ITL p50', 'added ITL p99', 'tok/s direct / gw', 'ratio', 'gw CPU µs/token', 'gw ÷ engine CPU/token', 'dropped'],
      rows,
    },
    targets: resultTargets,
    notes: [`The endpoint went from create to RUNNING in ${(startMs / 1000).toFixed(1)} s (model download from the stand-in hub, engine start, warm-up).`],
    data,
  };
}

function roundAll(s: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, typeof v === 'number' ? round(v) : v]));
}

export const streaming: Bench = { name: 'streaming', title: 'Streaming overhead (direct vs through the gateway)', run };
