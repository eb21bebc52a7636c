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
import { execFileSync } from 'node:child_process';
import { quantiles, fmt, round, concat, median } from './lib/stats.js';
import {
  BENCH_DIR,
  ADMIN_KEY,
  TINY_REPO,
  defaultProject,
  gatewayEnv,
  nextMessage,
  runChild,
  startDatabase,
  startGatewayProcess,
  startHub,
  tempDir,
} from './lib/env.js';
import { createEndpoint, deleteEndpoint, H100_X1, liveReplicas, waitForStatus } from './lib/endpoints.js';
import { cpuTimeMs } from './lib/proc.js';
import { target, type Bench, type BenchContext, type BenchOutcome } from './lib/result.js';
import type { StreamLoadConfig, StreamLoadResult } from './load/stream-client.js';
import type { BareProxyConfig } from './load/bare-proxy.js';
import { engineAuthHeaders } from '../src/engine-client/engine-client.js';

const TOKEN_INTERVAL_MS = Number(process.env.BENCH_TOKEN_INTERVAL_MS ?? 10);
const ROUND_MS = Number(process.env.BENCH_STREAM_ROUND_MS ?? 4000);
const WARMUP_MS = 1000;
/**
 * BENCH_PIN_ENGINE=1: the engine alone on processor 0, everything else (this process and what it starts: the
 * database, the gateway, the proxy, the load generator) on processor 1, so that the engine's answers do not wait
 * for processor time the gateway or the proxy take (a check of what bounds the added first-token time).
 */
const PIN_ENGINE = process.env.BENCH_PIN_ENGINE === '1';

/** Sets the processors of `pid`, its threads and its descendants (taskset). */
function pin(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
  let children: string[] = [];
  try {
    children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
  } catch {
    // none
  }
  for (const child of children) pin(Number(child), cpus);
}

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

type Mode = 'direct' | 'proxy' | 'gateway';

const ROUNDS: Mode[] = ['direct', 'proxy', 'gateway', 'gateway', 'proxy', 'direct'];

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
  proxyCpuMs: number;
  engineCpuMs: number;
}

function emptyTotals(): ModeTotals {
  return {
    ttft: [],
    itl: [],
    tokens: 0,
    windowMs: 0,
    started: 0,
    completed: 0,
    dropped: 0,
    errors: {},
    samples: [],
    gatewayCpuMs: 0,
    proxyCpuMs: 0,
    engineCpuMs: 0,
  };
}

async function run(context: BenchContext): Promise<BenchOutcome> {
  const problems: string[] = [];
  // Before anything starts: what this process starts inherits its processors.
  if (PIN_ENGINE) pin(process.pid, '1');
  const db = await startDatabase();
  const hub = await startHub();
  const dataDir = await tempDir('streaming');
  const engineCommand = `"${process.execPath}" --import tsx "${BENCH_DIR}/synthetic-engine.ts" --port {port} --interval-ms ${TOKEN_INTERVAL_MS}`;
  const gateway = await startGatewayProcess(
    gatewayEnv(dataDir, db.url, hub.url, { ENGINE_COMMAND: engineCommand, CPU_SLOTS: '1' }),
    context.cpuProf ? { cpuProf: 'streaming-gateway' } : {},
  );
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
  if (PIN_ENGINE) {
    pin(replica.pid, '0');
    console.log('  pinned: the engine on processor 0, everything else on processor 1');
  }

  const proxyConfig: BareProxyConfig = { upstream: replica.address };
  const proxy = runChild<unknown>('load/bare-proxy.ts', proxyConfig, { timeoutMs: 20 * 60_000 });
  const { url: proxyUrl, pid: proxyPid } = await nextMessage<{ url: string; pid: number }>(proxy, 'ready');

  const targets = {
    // The engine answers only with its token (the proxy passes the client's headers on).
    direct: { url: `${replica.address}/v1/chat/completions`, headers: engineAuthHeaders(replica.token) },
    proxy: { url: `${proxyUrl}/v1/chat/completions`, headers: engineAuthHeaders(replica.token) },
    gateway: { url: `${gateway.url}/dedicated/v1/chat/completions`, headers: { authorization: `Bearer ${ADMIN_KEY}` } },
  };

  const perLevel: Record<number, Record<Mode, ModeTotals>> = {};
  for (const level of LEVELS) {
    const totals: Record<Mode, ModeTotals> = { direct: emptyTotals(), proxy: emptyTotals(), gateway: emptyTotals() };
    perLevel[level.streams] = totals;
    for (const mode of ROUNDS) {
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
      // CPU of the gateway, the bare proxy and the engine inside the measured window.
      const cpu = { gw0: 0, px0: 0, en0: 0, gw: 0, px: 0, en: 0 };
      child.on((message) => {
        if (message.type !== 'mark') return;
        if (message.what === 'start') {
          cpu.gw0 = cpuTimeMs(gateway.pid) ?? 0;
          cpu.px0 = cpuTimeMs(proxyPid) ?? 0;
          cpu.en0 = cpuTimeMs(replica.pid) ?? 0;
        } else {
          cpu.gw = (cpuTimeMs(gateway.pid) ?? 0) - cpu.gw0;
          cpu.px = (cpuTimeMs(proxyPid) ?? 0) - cpu.px0;
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
      t.proxyCpuMs += cpu.px;
      t.engineCpuMs += cpu.en;
      console.log(
        `  ${String(level.streams).padStart(3)} streams ${mode.padEnd(7)}: ${r.completed} streams, ${(r.windowTokens / (r.windowMs / 1000)).toFixed(0)} tok/s, ` +
          `TTFT p50 ${fmt(median(r.ttftMs))} ms, dropped ${r.dropped + r.warmupDropped}`,
      );
    }
  }

  proxy.send({ type: 'stop' });
  await proxy.result.catch(() => undefined);
  await deleteEndpoint(gateway.url, db.sql, endpointId);
  await gateway.stop();
  await db.stop();

  const rows: (string | number)[][] = [];
  const data: Record<string, unknown> = {
    tokenIntervalMs: TOKEN_INTERVAL_MS,
    roundMs: ROUND_MS,
    endpointStartMs: round(startMs, 0),
    levels: {},
  };
  const resultTargets = [];
  let totalDropped = 0;
  for (const level of LEVELS) {
    const totals = perLevel[level.streams]!;
    const summary = (t: ModeTotals) => {
      const [ttft50, ttft99] = quantiles(concat(t.ttft), [0.5, 0.99]) as [number, number];
      const [itl50, itl99] = quantiles(concat(t.itl), [0.5, 0.99]) as [number, number];
      const tps = t.tokens / (t.windowMs / 1000);
      return {
        ttft50,
        ttft99,
        itl50,
        itl99,
        tps,
        requests: t.completed,
        dropped: t.dropped,
        errors: t.errors,
        samples: t.samples.slice(0, 5),
        gatewayCpuMs: t.gatewayCpuMs,
        proxyCpuMs: t.proxyCpuMs,
        engineCpuMs: t.engineCpuMs,
        ttftCount: concat(t.ttft).length,
      };
    };
    const s = { direct: summary(totals.direct), proxy: summary(totals.proxy), gateway: summary(totals.gateway) };
    const d = s.direct;
    const dropped = d.dropped + s.proxy.dropped + s.gateway.dropped;
    totalDropped += dropped;
    if (dropped > 0) {
      const errors = ROUNDS.slice(0, 3)
        .map((m) => `${m} ${JSON.stringify(s[m].errors)}`)
        .join(', ');
      problems.push(
        `${level.streams} streams: ${dropped} dropped (${errors}): ${[...d.samples, ...s.proxy.samples, ...s.gateway.samples].slice(0, 3).join(' | ')}`,
      );
    }
    const engineCpuPerToken = (m: Mode) => (s[m].engineCpuMs * 1000) / Math.max(1, totals[m].tokens);
    // A proxy's CPU per relayed token. The gateway's is net of what it spends while the load goes direct (controller passes, timers).
    const proxyCpuPerToken = {
      proxy: (s.proxy.proxyCpuMs * 1000) / Math.max(1, totals.proxy.tokens),
      gateway: ((s.gateway.gatewayCpuMs - d.gatewayCpuMs) * 1000) / Math.max(1, totals.gateway.tokens),
    };
    const level_: Record<string, unknown> = { maxTokens: level.maxTokens, direct: roundAll(d) };
    for (const m of ['proxy', 'gateway'] as const) {
      const p = s[m];
      level_[m] = {
        ...roundAll(p),
        added: {
          ttftP50Ms: round(p.ttft50 - d.ttft50),
          ttftP99Ms: round(p.ttft99 - d.ttft99),
          itlP50Ms: round(p.itl50 - d.itl50),
          itlP99Ms: round(p.itl99 - d.itl99),
        },
        throughputRatio: round(p.tps / d.tps, 4),
        cpuUsPerToken: round(proxyCpuPerToken[m], 1),
        engineCpuUsPerToken: round(engineCpuPerToken(m), 1),
      };
    }
    level_.engineCpuUsPerTokenDirect = round(engineCpuPerToken('direct'), 1);
    (data.levels as Record<string, unknown>)[level.streams] = level_;
    for (const m of ['direct', 'proxy', 'gateway'] as const) {
      const p = s[m];
      const relayed = m !== 'direct';
      rows.push([
        level.streams,
        m === 'proxy' ? 'bare Node proxy' : m,
        p.requests,
        `${fmt(p.ttft50)} / ${fmt(p.ttft99)}`,
        relayed ? `${fmt(p.ttft50 - d.ttft50)} / ${fmt(p.ttft99 - d.ttft99)}` : '–',
        relayed ? `${fmt(p.itl50 - d.itl50)} / ${fmt(p.itl99 - d.itl99)}` : '–',
        fmt(p.tps, 0),
        relayed ? fmt(p.tps / d.tps, 3) : '1.000',
        m === 'direct' ? '–' : fmt(proxyCpuPerToken[m], 1),
        m === 'direct' ? '–' : fmt(proxyCpuPerToken[m] / engineCpuPerToken(m), 1),
        p.dropped,
      ]);
    }
    const g = s.gateway;
    if (level.streams === 64) resultTargets.push(target('added TTFT p99 at 64 streams', g.ttft99 - d.ttft99, '<', 2, ' ms'));
    if (level.streams === 512)
      resultTargets.push(target('throughput ratio (gateway ÷ direct) at 512 streams', g.tps / d.tps, '>=', 0.9, '', 3));
  }
  resultTargets.push(target('streams dropped (all levels, all paths)', totalDropped, '==', 0, '', 0));

  return {
    method:
      `A real gateway process (src/main.ts, embedded PostgreSQL, the real controller and runtime) starts bench/synthetic-engine.ts through ENGINE_COMMAND ` +
      `(one replica, max_batch_size 1024, a decode step every ${TOKEN_INTERVAL_MS} ms writing one token to every open stream). A load-generator child process runs N closed-loop ` +
      `streaming clients (stream_options.include_usage) three ways: against the replica directly, through a bare Node.js reverse proxy (bench/load/bare-proxy.ts: node:http, ` +
      `a keep-alive agent, the answer piped back; no authentication, routing, admission, metering or request log), and through the gateway's POST /dedicated/v1/chat/completions. ` +
      `Rounds of ${ROUND_MS / 1000} s after a 1 s warm-up each alternate direct, proxy, gateway, gateway, proxy, direct. TTFT = request sent → first non-empty content chunk; ` +
      `ITL = gap between content chunks at the client; tokens/s = content chunks received inside the measured windows. "Added" = the path's percentile − direct's. ` +
      `Proxy CPU µs/token from /proc over the measured windows (the gateway's net of its own CPU while the load goes direct); "÷ engine CPU/token" compares it with what the synthetic engine spends producing the same token in the same rounds.`,
    valid: problems.length === 0,
    problems,
    table: {
      columns: [
        'streams',
        'path',
        'requests',
        'TTFT p50 / p99 ms',
        'added TTFT p50 / p99',
        'added ITL p50 / p99',
        'tok/s',
        'ratio to direct',
        'proxy CPU µs/token',
        '÷ engine CPU/token',
        'dropped',
      ],
      rows,
    },
    targets: resultTargets,
    notes: [
      `The endpoint went from create to RUNNING in ${(startMs / 1000).toFixed(1)} s (model download from the stand-in hub, engine start, warm-up).`,
    ],
    data,
  };
}

function roundAll(s: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, typeof v === 'number' ? round(v) : v]));
}

export const streaming: Bench = { name: 'streaming', title: 'Streaming overhead (direct vs a bare proxy vs the gateway)', run };
