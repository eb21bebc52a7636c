/**
 * Live-status fan-out: N graphql-ws subscribers of `endpointStatus` (target
 * 10,000) and 1,000 SSE subscribers on one gateway process; the time from an
 * endpoint update to its delivery to every subscriber, and the gateway's heap
 * per idle subscriber. The baseline is a bare server (bench/load/bare-fanout.ts)
 * pushing one pre-serialized message to the same number of the same clients.
 *
 * The gateway is `src/app.ts` run in bench/gateway-child.ts (with
 * `--expose-gc`), which reports its heap over IPC; the subscribers live in
 * another child process (bench/load/subscribers.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createServices } from '../src/services/index.js';
import { ADMIN_KEY, api, nextMessage, nowMs, runChild, startDatabase, startHub, tempDir, TINY_REPO, type ChildHandle } from './lib/env.js';
import { createEndpoint, H100_X1 } from './lib/endpoints.js';
import { concat, fmt, quantiles, round, median } from './lib/stats.js';
import { target, type Bench, type BenchContext, type BenchOutcome } from './lib/result.js';
import type { SubscribersConfig, SubscribersResult } from './load/subscribers.js';
import type { HeapReport } from './gateway-child.js';

const WS_TARGET = Number(process.env.BENCH_FANOUT_WS ?? 10_000);
const SSE_TARGET = Number(process.env.BENCH_FANOUT_SSE ?? 1000);
const ROUNDS = Number(process.env.BENCH_FANOUT_ROUNDS ?? 5);
const CONNECT_BUDGET_MS = Number(process.env.BENCH_FANOUT_CONNECT_BUDGET_MS ?? 90_000);

/** The next message of `type` from a child. */
/** The server's heap after two full GCs (or, with `gc` false, as it is: for polling the subscriber count). */
async function heapOf(server: ChildHandle<unknown>, gc = true): Promise<HeapReport> {
  const reply = nextMessage<HeapReport>(server, 'heap');
  server.send({ type: 'heap', gc });
  return reply;
}

interface FanoutRun {
  server: 'gateway' | 'bare';
  mode: 'ws' | 'sse';
  wanted: number;
  connected: number;
  connectMs: number;
  connectFailed: number;
  heapPerSubscriberBytes: number;
  rssPerSubscriberBytes: number;
  serverSubscribers: number;
  latencies: Float64Array;
  toAllMs: number[];
  missing: number;
  lost: number;
  samples: string[];
}

/**
 * Opens `count` subscribers against `server`, measures its heap per idle
 * subscriber, then times ROUNDS changes (made by `change`, which returns the
 * new versionIndex) to delivery at every subscriber.
 */
async function measureFanout(
  serverKind: 'gateway' | 'bare',
  server: ChildHandle<unknown>,
  baseUrl: string,
  endpointId: string,
  mode: 'ws' | 'sse',
  count: number,
  change: (round: number) => Promise<{ versionIndex: number; t0: number }>,
  profileName?: string,
): Promise<FanoutRun> {
  // Subscribers of an earlier phase are gone (their clean-up finished) before the baseline heap is taken.
  let before = await heapOf(server, false);
  for (let i = 0; i < 100 && before.subscribers > 0; i++) {
    await sleep(300);
    before = await heapOf(server, false);
  }
  await sleep(300);
  before = await heapOf(server);
  const subscribers = runChild<SubscribersResult & { type: 'result' }>(
    'load/subscribers.ts',
    {
      mode,
      baseUrl,
      key: ADMIN_KEY,
      endpointId,
      count,
      connectConcurrency: 64,
      connectBudgetMs: CONNECT_BUDGET_MS,
    } satisfies SubscribersConfig,
    { timeoutMs: CONNECT_BUDGET_MS + ROUNDS * 30_000 + 120_000 },
  );
  subscribers.on((message) => {
    if (message.type === 'progress' && Number(message.connected) % 2000 === 0)
      console.log(`    ${serverKind} ${mode}: ${String(message.connected)} subscribers open`);
  });
  const connected = await nextMessage<{ connected: number; failed: number; ms: number; failSamples: string[] }>(
    subscribers,
    'connected',
    CONNECT_BUDGET_MS + 60_000,
  );
  console.log(
    `  ${serverKind} ${mode}: ${connected.connected} of ${count} subscribers open in ${(connected.ms / 1000).toFixed(1)} s (${connected.failed} failed)`,
  );
  await sleep(1000);
  const after = await heapOf(server);
  const latencies: Float64Array[] = [];
  const toAll: number[] = [];
  let missing = 0;
  const profile = async (action: 'start' | 'stop') => {
    if (!profileName) return;
    const done = nextMessage(server, 'profiled');
    server.send({ type: 'profile', action, name: profileName });
    await done;
  };
  // Round 0 warms the path up (first-use compilation) and is not counted.
  for (let round = 0; round <= ROUNDS; round++) {
    if (round === 1) await profile('start');
    const { versionIndex, t0 } = await change(round);
    const collected = nextMessage<{ latencies: Float64Array; missing: number }>(subscribers, 'collected', 60_000);
    subscribers.send({ type: 'collect', versionIndex, t0, timeoutMs: 30_000 });
    const c = await collected;
    if (round === 0) {
      console.log(
        `    warm-up round: to all ${fmt(c.latencies.length > 0 ? Math.max(...c.latencies) : Number.NaN)} ms${c.missing > 0 ? `, ${c.missing} missing` : ''}`,
      );
      missing += c.missing;
      await sleep(300);
      continue;
    }
    latencies.push(c.latencies);
    missing += c.missing;
    const max = c.latencies.length > 0 ? Math.max(...c.latencies) : Number.NaN;
    toAll.push(max);
    console.log(
      `    round ${round}: p50 ${fmt(median(c.latencies))} ms, to all ${fmt(max)} ms${c.missing > 0 ? `, ${c.missing} missing` : ''}`,
    );
    await sleep(300);
  }
  await profile('stop');
  subscribers.send({ type: 'close' });
  const result = await subscribers.result;
  const n = Math.max(1, connected.connected);
  return {
    server: serverKind,
    mode,
    wanted: count,
    connected: connected.connected,
    connectMs: connected.ms,
    connectFailed: connected.failed,
    heapPerSubscriberBytes: (after.heapUsed - before.heapUsed) / n,
    rssPerSubscriberBytes: (after.rss - before.rss) / n,
    serverSubscribers: after.subscribers,
    latencies: concat(latencies),
    toAllMs: toAll,
    missing,
    lost: result.lost,
    samples: [...connected.failSamples, ...result.lostSamples],
  };
}

async function run(context: BenchContext): Promise<BenchOutcome> {
  const problems: string[] = [];
  const notes: string[] = [];
  const db = await startDatabase({ migrate: true });
  const hub = await startHub();
  const dataDir = await tempDir('fanout');
  const boot = await createServices(db.sql).identity.bootstrap(ADMIN_KEY);
  if (!boot) throw new Error('bootstrap did not run');

  const env = {
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    HF_ENDPOINT: hub.url,
    // No capacity: the endpoint waits for it, and its only events are the ones this benchmark makes.
    CPU_SLOTS: '0',
    CONTROLLER_INTERVAL_MS: '500',
    // Every subscriber is the admin's: the caps per user (500 subscriptions, 100 WebSockets) would refuse all but the
    // first few hundred.
    USER_MAX_SUBSCRIPTIONS: String(WS_TARGET + SSE_TARGET),
    USER_MAX_WEBSOCKETS: String(WS_TARGET),
  };
  const gateway = runChild<unknown>(
    'gateway-child.ts',
    { env, databaseUrl: db.url },
    {
      timeoutMs: 20 * 60_000,
      nodeArgs: ['--expose-gc'],
    },
  );
  const { url } = await nextMessage<{ url: string }>(gateway, 'ready');
  const endpointId = await createEndpoint(url, {
    projectId: boot.project.id,
    name: 'fanout',
    instanceOptionId: H100_X1,
    hfModelRepo: TINY_REPO,
    advanced: {},
  });

  let comment = 0;
  const update = async () => {
    const t0 = nowMs();
    const { status, body } = await api<{ versionIndex: number }>(url, 'PUT', `/dedicated/beta/endpoint/${endpointId}`, {
      newVersionComment: `fanout ${++comment}`,
    });
    if (status !== 200) throw new Error(`update failed (${status}): ${JSON.stringify(body)}`);
    return { versionIndex: body.versionIndex, t0 };
  };

  const runs: FanoutRun[] = [];
  // With --cpu-prof, the gateway child profiles itself during the measured graphql-ws rounds only.
  const gatewayWs = await measureFanout(
    'gateway',
    gateway,
    url,
    endpointId,
    'ws',
    WS_TARGET,
    update,
    context.cpuProf ? 'fanout-gateway-ws-rounds' : undefined,
  );
  runs.push(gatewayWs);
  const gatewaySse = await measureFanout('gateway', gateway, url, endpointId, 'sse', SSE_TARGET, update);
  runs.push(gatewaySse);
  gateway.send({ type: 'stop' });
  await gateway.result.catch(() => undefined);

  const bare = runChild<unknown>('load/bare-fanout.ts', {}, { timeoutMs: 20 * 60_000, nodeArgs: ['--expose-gc'] });
  const bareUrl = (await nextMessage<{ url: string }>(bare, 'ready')).url;
  let bareVersion = 1_000_000;
  const broadcast = async () => {
    const versionIndex = ++bareVersion;
    const t0 = nowMs();
    bare.send({ type: 'broadcast', versionIndex });
    return { versionIndex, t0 };
  };
  // The same number of subscribers as the gateway held.
  runs.push(await measureFanout('bare', bare, bareUrl, endpointId, 'ws', gatewayWs.connected, broadcast));
  runs.push(await measureFanout('bare', bare, bareUrl, endpointId, 'sse', gatewaySse.connected, broadcast));
  bare.send({ type: 'stop' });
  await bare.result.catch(() => undefined);
  await db.stop();

  const rows: (string | number)[][] = [];
  const data: Record<string, unknown> = { rounds: ROUNDS, connectBudgetMs: CONNECT_BUDGET_MS, runs: [] };
  const summaries = new Map<string, { p50: number; p99: number; toAll: number; heap: number }>();
  for (const r of runs) {
    const [p50, p99] = quantiles(r.latencies, [0.5, 0.99]) as [number, number];
    const toAll = median(r.toAllMs);
    summaries.set(`${r.server}-${r.mode}`, { p50, p99, toAll, heap: r.heapPerSubscriberBytes });
    if (r.missing > 0 || r.lost > 0)
      problems.push(
        `${r.server} ${r.mode}: ${r.missing} deliveries missing, ${r.lost} subscriptions lost: ${r.samples.slice(0, 2).join(' | ')}`,
      );
    if (r.connectFailed > 0)
      problems.push(`${r.server} ${r.mode}: ${r.connectFailed} subscriptions failed to open: ${r.samples.slice(0, 2).join(' | ')}`);
    (data.runs as unknown[]).push({
      server: r.server,
      mode: r.mode,
      wanted: r.wanted,
      connected: r.connected,
      connectSeconds: round(r.connectMs / 1000, 1),
      serverSubscribers: r.serverSubscribers,
      p50Ms: round(p50),
      p99Ms: round(p99),
      toAllMsPerRound: r.toAllMs.map((v) => round(v)),
      heapPerSubscriberBytes: Math.round(r.heapPerSubscriberBytes),
      rssPerSubscriberBytes: Math.round(r.rssPerSubscriberBytes),
      missing: r.missing,
      lost: r.lost,
    });
  }
  for (const r of runs) {
    const s = summaries.get(`${r.server}-${r.mode}`)!;
    const b = summaries.get(`bare-${r.mode}`);
    rows.push([
      `${r.server} ${r.mode === 'ws' ? 'graphql-ws' : 'SSE'}`,
      `${r.connected} / ${r.wanted}`,
      fmt(r.connectMs / 1000, 1),
      fmt(s.p50),
      fmt(s.p99),
      fmt(s.toAll),
      r.server === 'gateway' && b ? fmt(s.p99 / b.p99, 1) : '–',
      fmt(s.heap / 1024, 2),
      r.server === 'gateway' && b ? fmt(s.heap / b.heap, 1) : '–',
      r.missing + r.lost,
    ]);
  }
  const gws = summaries.get('gateway-ws')!;
  const gsse = summaries.get('gateway-sse')!;
  if (gatewayWs.connected < WS_TARGET)
    notes.push(
      `Only ${gatewayWs.connected} of ${WS_TARGET} graphql-ws subscribers opened within the ${CONNECT_BUDGET_MS / 1000} s budget on this machine; the figures are for that many.`,
    );
  notes.push(
    `Opening subscriptions: ${fmt(gatewayWs.connected / (gatewayWs.connectMs / 1000), 0)} graphql-ws/s and ${fmt(gatewaySse.connected / (gatewaySse.connectMs / 1000), 0)} SSE/s through the gateway (64 opening at a time).`,
  );
  return {
    method:
      `bench/gateway-child.ts runs src/app.ts (gateway + controller, CPU_SLOTS=0 so the one endpoint waits for capacity and changes only when updated) under --expose-gc on a fresh embedded PostgreSQL. ` +
      `A subscriber child process opens up to ${WS_TARGET} \`endpointStatus(endpointId)\` subscriptions over graphql-ws (raw graphql-transport-ws on \`ws\`, 64 opening at a time, ${CONNECT_BUDGET_MS / 1000} s budget), ` +
      `then ${SSE_TARGET} over SSE. Each of ${ROUNDS} rounds (after one unmeasured warm-up round) updates the endpoint (PUT, a new version → one VERSION_ADDED event) and measures, per subscriber, the wall-clock time from sending the PUT to receiving that version's update; ` +
      `"to all" is the slowest subscriber of a round (median over rounds). Heap per idle subscriber = (heapUsed after − before opening them, each after two full GCs) ÷ subscribers, reported by the gateway child over IPC. ` +
      `Baseline: bench/load/bare-fanout.ts, a bare ws/SSE server pushing one pre-serialized message (sent over IPC) to the same number of the same clients; ratios are gateway ÷ bare.`,
    valid: problems.length === 0,
    problems,
    table: {
      columns: [
        'server / transport',
        'subscribers open / wanted',
        'open s',
        'p50 ms',
        'p99 ms',
        'to all (median of rounds) ms',
        'p99 ÷ bare',
        'heap KiB / subscriber',
        'heap ÷ bare',
        'missing + lost',
      ],
      rows,
    },
    targets: [
      target(`graphql-ws: p99 delivery to all ${gatewayWs.connected} subscribers`, gws.p99, '<', 250, ' ms'),
      target(`graphql-ws: time to the last of ${gatewayWs.connected} (median round)`, gws.toAll, '<', 250, ' ms'),
      target('graphql-ws: heap per idle subscriber', gws.heap / 1024, '<', 16, ' KiB'),
      target(`SSE: p99 delivery to ${gatewaySse.connected} subscribers`, gsse.p99, '<', 250, ' ms'),
      target('SSE: heap per idle subscriber', gsse.heap / 1024, '<', 16, ' KiB'),
      target(`graphql-ws subscribers held (of ${WS_TARGET})`, gatewayWs.connected, '>=', WS_TARGET, '', 0),
    ],
    notes,
    data,
  };
}

export const fanout: Bench = { name: 'fanout', title: 'Live-status fan-out to many subscribers', run };
