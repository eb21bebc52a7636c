/**
 * The Kubernetes simulation through the controller (issue 29): N endpoints of 1 to 10 replicas each (endpoint i wants
 * 1 + i mod 10), created through the services as the API creates them, reconciled by the real controller on a real
 * PostgreSQL with the real KubernetesRuntime, against the stand-in API server in its simulated mode (its kubelet
 * marks pods ready without processes) in a child process of its own. Every pod IP's engine is one small HTTP server
 * in another child process (test/support/kube/sim-engine.ts): the controller warms each replica up and checks each
 * serving replica's health there. The model is resolved against the stand-in hub (the pods would fetch it).
 *
 * What is asserted is counted, not timed: from nothing, every endpoint reaches RUNNING with its wanted number of READY
 * replicas, one pod each, one warm-up each, no replica failed; the API calls are a pod create per replica and a Secret
 * read and create per endpoint, no list. Then, while every replica's health is checked several times over (the controller's
 * passes) and nothing changes, the API server receives no call at all. Then each change (one endpoint scaled out by
 * an update, scaled back in, one pod deleted behind the controller's back) costs a few calls, whatever N is.
 *
 * No start is given up: a pod waits for its node however long the scheduler takes (up to the scheduling deadline),
 * so no pod is deleted and created again; any replica row that ends fails the test.
 *
 * Only the controller's public surface is used (constructor, start, poke through the services, stop): what a pass
 * did is read from the database, the stand-in and the engine. Times and CPU (this process: controller, runtime and
 * client; the stand-in's; the engine's; PostgreSQL's backends) are printed, and written to SIM_OUT when set
 * (`npm run bench -- kubernetes-sim` runs this file with SIM_ENDPOINTS=1000).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { cpuTimeMs } from '../../bench/lib/proc.js';
import { quantiles } from '../../bench/lib/stats.js';
import { Controller } from '../../src/controller/controller.js';
import { EngineClient } from '../../src/engine-client/engine-client.js';
import { ModelCache } from '../../src/models/model-cache.js';
import { ModelStore } from '../../src/models/model-store.js';
import { KubernetesRuntime } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { connectDatabase, type Sql } from '../../src/storage/database.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import type { FakeHub } from '../support/fake-hub.js';
import { seedPrincipal } from '../support/gateway.js';
import type { KubeStandInProcess } from '../support/kube/index.js';
import type { SimEngine } from '../support/kube/sim-engine.js';
import { createSimEndpoints, replicasOf, startSimCluster } from '../support/kube/sim-fleet.js';
import {
  allReplicas,
  apiCalls as calls,
  convergedReplicas,
  endedReplicas,
  lists,
  livePods,
  type ReplicaRow,
} from '../support/kube/sim-observe.js';

// 50 in the suite (every size of fleet, 1 to 10 replicas an endpoint, five times over): the simulation is CPU, and the suite's
// time is CPU; the benchmark runs 1,000.
const ENDPOINTS = Number(process.env.SIM_ENDPOINTS ?? 50);
/** The controller's interval (a full pass over every endpoint): production's default. */
const INTERVAL_MS = Number(process.env.SIM_INTERVAL_MS ?? 500);
/**
 * How often an endpoint at rest is passed over: here twice the interval, not production's ten times, so that the idle
 * window and the changes' waits for health checks stay short (the idle figures are per round over every endpoint);
 * the benchmark runs production's.
 */
const REST_INTERVAL_MS = Number(process.env.SIM_REST_INTERVAL_MS ?? 2 * INTERVAL_MS);
/** Health checks of every serving replica that the idle window lasts (each pass checks every one). */
const IDLE_CHECKS = 6;
const CONVERGE_TIMEOUT_MS = Number(process.env.SIM_CONVERGE_TIMEOUT_MS ?? Math.max(60_000, ENDPOINTS * 400));
const NS = 'default';
const totalReplicas = replicasOf(ENDPOINTS);

let kube: KubeStandInProcess;
let engine: SimEngine;
let hub: FakeHub;
let db: TestDatabase;
/** The test's own reads (not counted as the controller's statements). */
let observer: Sql;
let cacheDir: string;
let engines: EngineClient;
let runtime: KubernetesRuntime;
let controller: Controller | undefined;
let services: Services;
let principal: Principal;
/** Statements the controller's pool has sent (the services' too, while they write). */
let statements = 0;
/** With SIM_STATEMENTS=1, the statements sent while converging, by their first 90 characters (printed, the most sent first). */
const statementKinds = process.env.SIM_STATEMENTS === '1' ? new Map<string, number>() : undefined;
/** Endpoint id → replicas it wants. */
const wanted = new Map<string, number>();
const logged: string[] = [];
const figures: Record<string, unknown> = { endpoints: ENDPOINTS, replicas: totalReplicas, intervalMs: INTERVAL_MS };

const ipOf = (address: string) => new URL(address).hostname;

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; the controller logged:\n${logged.slice(-20).join('\n')}`);
    await sleep(200);
  }
}

const replicaRows = () => allReplicas(observer);
const endedRows = () => endedReplicas(observer);
const converged = () => convergedReplicas(observer, wanted);

/** Each READY replica has exactly one live pod, at its address's IP, and no other pod lives. */
async function expectOnePodEach(ready: ReplicaRow[]): Promise<void> {
  const pods = await livePods(kube, NS);
  expect(pods.size).toBe(ready.length);
  for (const r of ready) expect(pods.get(r.id), r.id).toEqual([ipOf(r.address!)]);
}

/** Waits until every READY replica's engine has answered `checks` more health checks than in `since`; returns the least and most. */
async function healthChecked(ready: ReplicaRow[], since: Record<string, number>, checks: number, timeoutMs: number) {
  return until(
    `${checks} health checks of every replica`,
    async () => {
      const { health } = await engine.counts();
      const added = ready.map((r) => (health[ipOf(r.address!)] ?? 0) - (since[ipOf(r.address!)] ?? 0));
      return Math.min(...added) >= checks ? { min: Math.min(...added), max: Math.max(...added) } : undefined;
    },
    timeoutMs,
  );
}

/** CPU milliseconds so far of this process, the stand-in's, the engine's and this database's PostgreSQL backends. */
async function cpuNow(): Promise<Record<'test' | 'standIn' | 'engine' | 'postgres', number>> {
  const ms = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000;
  const backends = await observer<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`;
  return {
    test: ms(process.cpuUsage()),
    standIn: ms(await kube.cpuUsage()),
    engine: ms(await engine.cpuUsage()),
    postgres: backends.reduce((sum, { pid }) => sum + (cpuTimeMs(pid) ?? 0), 0),
  };
}
const cpuSince = (before: Record<string, number>, after: Record<string, number>) =>
  Object.fromEntries(Object.entries(after).map(([key, value]) => [key, Math.round(value - (before[key] ?? 0))]));

beforeAll(async () => {
  ({ kube, engine, hub } = await startSimCluster(totalReplicas));
  db = await createTestDatabase({
    onQuery: (query) => {
      statements++;
      if (statementKinds) {
        const kind = query.replace(/\s+/g, ' ').trim().slice(0, 90);
        statementKinds.set(kind, (statementKinds.get(kind) ?? 0) + 1);
      }
    },
  });
  observer = connectDatabase(db.dbUrl, { max: 1 });
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kube-sim-controller-'));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kube.writeKubeconfig(NS));
  engines = new EngineClient();
  runtime = new KubernetesRuntime({
    settings: readKubernetesSettings({ ENGINE_IMAGE: 'sim:1', KUBERNETES_NAMESPACE: NS, KUBERNETES_ENGINE_PORT: String(engine.port) }),
    kubeConfig,
    hubEndpoint: hub.url,
    engines,
    log: (message, error) => logged.push(`[kubernetes] ${message} ${error ?? ''}`),
  });
  await runtime.open();

  // The endpoints, as the API creates them (each creation pokes the controller, once there is one).
  services = createServices(db.sql, { onEndpointChange: (id) => controller?.poke(id) });
  const seeded = await seedPrincipal(db.sql, services, 'sim');
  principal = seeded.principal;
  await createSimEndpoints(services, principal, seeded.projectId, ENDPOINTS, wanted);
}, 300_000);

afterAll(async () => {
  await controller?.stop();
  await runtime?.close();
  await engines?.close();
  await observer?.end({ timeout: 5 });
  await db?.close();
  await hub?.close();
  if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

/**
 * Reads endpoints through the services, as the API does, one every 20 ms (one at a time), until `stop`: how long
 * each took (median, 99th percentile, slowest) in this process, whose event loop the controller keeps busy. On a pool
 * of their own, so that the controller's statements are counted alone (sharing the controller's pool changed nothing
 * measurable: BENCHMARKS.md, session 27).
 */
function apiLatency() {
  const ids = [...wanted.keys()];
  const pool = connectDatabase(db.dbUrl, { max: 2 });
  const api = createServices(pool);
  const times: number[] = [];
  let stopped = false;
  const reading = (async () => {
    for (let i = 0; !stopped; i++) {
      const t0 = performance.now();
      const read = await api.endpoints.get(principal, ids[i % ids.length]!);
      times.push(performance.now() - t0);
      if (read.type === 'error') throw new Error(read.error.message);
      await sleep(20);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await reading.finally(() => pool.end({ timeout: 5 }));
      const [p50, p99, max] = quantiles(times, [0.5, 0.99, 1]).map((t) => Math.round(t));
      return { reads: times.length, p50, p99, max };
    },
  };
}

let ready: ReplicaRow[] = [];
/** The rows no longer live ("STATE: last error"), once the endpoints converged. */
let ended: string[] = [];

test(`${ENDPOINTS} endpoints (${totalReplicas} replicas) converge from nothing through the controller, one pod each`, async () => {
  await kube.resetCounts();
  statements = 0;
  statementKinds?.clear();
  const engineBefore = await engine.counts();
  const cpuBefore = await cpuNow();
  const hubBefore = hub.requests.length;
  const started = performance.now();
  controller = new Controller({
    sql: db.sql,
    runtime,
    models: new ModelStore({ cache: new ModelCache({ dir: cacheDir }), hubEndpoint: hub.url, allowExternalFormats: false }),
    builtInEngine: true,
    intervalMs: INTERVAL_MS,
    restIntervalMs: REST_INTERVAL_MS,
    engines,
    log: (message, error) => logged.push(`[controller] ${message} ${error ?? ''}`),
  });
  await controller.start();
  const api = apiLatency();
  // When every endpoint serves (RUNNING: one replica ready each), before all their replicas are.
  let servingMs = NaN;
  let waiting = true;
  const serving = (async () => {
    while (waiting) {
      const [row] = await observer<{ n: number }[]>`SELECT count(*)::int AS n FROM endpoints WHERE status <> 'RUNNING'`;
      if (row!.n === 0) return void (servingMs = performance.now() - started);
      await sleep(200);
    }
  })();
  let apiMs: Awaited<ReturnType<typeof api.stop>>;
  let convergeMs: number;
  try {
    ready = await until('every endpoint RUNNING with its replicas READY', converged, CONVERGE_TIMEOUT_MS);
    convergeMs = performance.now() - started;
    await serving;
  } finally {
    // The reads end however the wait ends (a timeout included: the next test file may run in this process).
    waiting = false;
    await serving;
    apiMs = await api.stop();
  }
  const cpu = cpuSince(cpuBefore, await cpuNow());
  const requests = await kube.requests();
  const hubRequests = hub.requests.length - hubBefore;

  // One live replica per wanted replica, one pod each; no replica failed or was given up.
  ended = await endedRows();
  expect(ready).toHaveLength(totalReplicas);
  expect(ended).toEqual([]);
  expect(await replicaRows()).toHaveLength(totalReplicas);
  await expectOnePodEach(ready);
  // Each replica warmed up once, on its own pod's IP, with the engine token.
  const engineCounts = await engine.counts();
  for (const r of ready) expect((engineCounts.warmUps[ipOf(r.address!)] ?? 0) - (engineBefore.warmUps[ipOf(r.address!)] ?? 0)).toBe(1);
  expect(engineCounts.unauthenticated).toBe(0);
  expect(engineCounts.other).toBe(0);
  // A pod create per replica, a Secret read (404) and create per endpoint: nothing else, no delete, no list.
  expect(requests['POST /api/v1/namespaces/{ns}/pods']).toBe(totalReplicas);
  expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}'] ?? 0).toBe(0);
  expect(requests['POST /api/v1/namespaces/{ns}/secrets']).toBe(ENDPOINTS);
  expect(lists(requests)).toEqual([]);
  expect(calls(requests)).toBe(totalReplicas + 2 * ENDPOINTS);

  Object.assign(figures, {
    convergeMs: Math.round(convergeMs),
    servingMs: Math.round(servingMs),
    convergeCpuMs: cpu,
    convergeCalls: calls(requests),
    callsPerReplica: Number((calls(requests) / totalReplicas).toFixed(2)),
    convergeStatements: statements,
    statementsPerReplica: Number((statements / totalReplicas).toFixed(1)),
    /** An endpoint's read through the services while converging, one every 20 ms: how long it took. */
    convergeApiReadMs: apiMs,
    convergeHealthChecks:
      Object.values(engineCounts.health).reduce((a, b) => a + b, 0) - Object.values(engineBefore.health).reduce((a, b) => a + b, 0),
    /** Requests to the hub while converging: a commit's file list is read once per gateway (hf-hub.ts, treeListings). */
    convergeHubRequests: hubRequests,
  });
  console.log(`controller simulation, convergence: ${JSON.stringify({ ...figures, requests })}`);
  if (statementKinds) {
    const top = [...statementKinds].sort((a, b) => b[1] - a[1]).slice(0, 40);
    console.log(`statements while converging, the most sent first:\n${top.map(([k, n]) => `${String(n).padStart(7)}  ${k}`).join('\n')}`);
    statementKinds.clear();
  }
}, 900_000);

test('idle passes make no API call: no list, no pod read', async () => {
  expect(ready).toHaveLength(totalReplicas);
  await kube.resetCounts();
  statements = 0;
  const since = (await engine.counts()).health;
  const cpuBefore = await cpuNow();
  const started = performance.now();
  // Every serving replica's health checked IDLE_CHECKS more times: that many passes over every endpoint, at least.
  const checks = await healthChecked(ready, since, IDLE_CHECKS, 120_000 + IDLE_CHECKS * ENDPOINTS * 50);
  const windowMs = performance.now() - started;
  const cpu = cpuSince(cpuBefore, await cpuNow());
  const requests = await kube.requests();
  expect(requests).toEqual({});
  // Nothing changed meanwhile.
  expect(await converged()).toHaveLength(totalReplicas);
  expect(await endedRows()).toEqual(ended);

  Object.assign(figures, {
    idleWindowMs: Math.round(windowMs),
    idleHealthChecksPerReplica: checks,
    idleCallsPerPass: calls(requests),
    /** one round of health checks over every replica */
    idleRoundMs: Math.round(windowMs / checks.min),
    idleStatements: statements,
    idleStatementsPerEndpointRound: Number((statements / ENDPOINTS / checks.min).toFixed(1)),
    idleCpuMs: cpu,
    /** the test process's CPU for one round over every endpoint at rest (its passes, the health checks) */
    idleCpuPerRoundMs: Math.round((cpu.test ?? 0) / checks.min),
    restIntervalMs: REST_INTERVAL_MS,
  });
  console.log(`controller simulation, idle: ${JSON.stringify(figures)}`);
}, 600_000);

interface Change {
  /** Makes the change; answers the API calls it made itself. */
  act: () => Promise<number>;
  /** Replicas wanted from then on, by endpoint (those that change). */
  wants?: Map<string, number>;
  /** What must hold before the controller can count as settled (it has seen the change). */
  seen?: () => Promise<boolean>;
  /** The states of the replicas the change ends. */
  ends: string[];
}

/**
 * Applies a change, waits until the controller has settled again and checked every replica's health twice more; the
 * calls the controller made (the change's own taken off).
 */
async function change(what: string, { act, wants = new Map(), seen = async () => true, ends }: Change) {
  await kube.resetCounts();
  const started = performance.now();
  const own = await act();
  for (const [id, n] of wants) wanted.set(id, n);
  ready = await until(`the controller to settle after ${what}`, async () => (await seen()) && converged(), 120_000);
  const settledMs = performance.now() - started;
  // Passes more over every replica: any call the change left behind is counted too.
  await healthChecked(ready, (await engine.counts()).health, 2, 120_000);
  const requests = await kube.requests();
  const before = ended;
  ended = await endedRows();
  const states = (rows: string[]) => rows.map((row) => row.slice(0, row.indexOf(':'))).sort();
  expect(states(ended), ended.join('; ')).toEqual(states([...before, ...ends.map((state) => `${state}:`)]));
  expect(lists(requests)).toEqual([]);
  await expectOnePodEach(ready);
  const made = calls(requests) - own;
  console.log(`controller simulation, ${what}: ${Math.round(settledMs)} ms, ${made} calls ${JSON.stringify(requests)}`);
  return { requests, calls: made };
}

test('a change costs a few API calls, whatever the number of endpoints', async () => {
  const [first, firstWanted] = [...wanted][0]!;
  const scale = (n: number) => async () => {
    const updated = await services.endpoints.update(principal, first, { autoscalingPolicy: { minReplica: n, maxReplica: n } });
    if (updated.type === 'error') throw new Error(updated.error.message);
    return 0;
  };
  // Scaled out by one: one pod created (the endpoint's Secret is known).
  const out = await change('a scale-out by one', { act: scale(firstWanted + 1), wants: new Map([[first, firstWanted + 1]]), ends: [] });
  expect(out.requests['POST /api/v1/namespaces/{ns}/pods']).toBe(1);
  expect(out.calls).toBe(1);

  // Scaled back in: the newest replica drained, its pod deleted.
  const scaleIn = await change('a scale-in by one', {
    act: scale(firstWanted),
    wants: new Map([[first, firstWanted]]),
    ends: ['STOPPED'],
  });
  expect(scaleIn.requests['DELETE /api/v1/namespaces/{ns}/pods/{name}']).toBe(1);
  expect(scaleIn.calls).toBe(1);

  // A pod deleted behind the controller's back (as `kubectl delete pod --grace-period=0` would): the replica is marked
  // STOPPED as disrupted (no engine died: no death for the crash policy) and replaced; the test's own call is taken off.
  const victim = ready.find((r) => wanted.get(r.endpoint_id)! > 1)!;
  const deleted = await change('a pod deleted behind its back', {
    act: async () => {
      const pod = (await kube.pods(NS)).find(
        (p) => (p.metadata as { labels?: Record<string, string> }).labels?.['dedicated-endpoints.io/replica'] === victim.id,
      )!;
      const res = await fetch(`${kube.url}/api/v1/namespaces/${NS}/pods/${pod.metadata.name}?gracePeriodSeconds=0`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${kube.token}` },
      });
      expect(res.status).toBe(200);
      return 1;
    },
    seen: async () => (await replicaRows()).find((r) => r.id === victim.id)?.state === 'STOPPED',
    ends: ['STOPPED'],
  });
  expect(deleted.requests['POST /api/v1/namespaces/{ns}/pods']).toBe(1);
  expect(deleted.calls).toBeLessThanOrEqual(2);

  // Every pod of an endpoint of ten replicas evicted through the Eviction API, as draining their nodes does (a node
  // pool's upgrade): ten disruptions, not ten deaths. Counted as deaths, they would pass the crash policy's five and
  // fail the endpoint; here each replica is replaced and the endpoint keeps RUNNING.
  const [drained] = [...wanted].find(([, n]) => n === 10)!;
  const victims = ready.filter((r) => r.endpoint_id === drained).map((r) => r.id);
  const drain = await change('every pod of an endpoint evicted', {
    act: async () => {
      const pods = (await kube.pods(NS)).filter((p) =>
        victims.includes((p.metadata as { labels?: Record<string, string> }).labels?.['dedicated-endpoints.io/replica'] ?? ''),
      );
      for (const pod of pods) {
        const res = await fetch(`${kube.url}/api/v1/namespaces/${NS}/pods/${pod.metadata.name}/eviction`, {
          method: 'POST',
          headers: { authorization: `Bearer ${kube.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod.metadata.name, namespace: NS } }),
        });
        expect(res.status).toBe(201);
      }
      return pods.length;
    },
    seen: async () => (await replicaRows()).filter((r) => victims.includes(r.id)).every((r) => r.state === 'STOPPED'),
    ends: victims.map(() => 'STOPPED'),
  });
  expect(victims).toHaveLength(10);
  expect(drain.requests['POST /api/v1/namespaces/{ns}/pods']).toBe(10);
  const [endpoint] = await observer<{ status: string }[]>`SELECT status FROM endpoints WHERE id = ${drained}`;
  expect(endpoint!.status).toBe('RUNNING');
  const [failedEvents] = await observer<{ n: number }[]>`
    SELECT count(*)::int AS n FROM endpoint_events WHERE endpoint_id = ${drained} AND status = 'FAILED'`;
  expect(failedEvents!.n).toBe(0);

  // A replica its node evicts under the node's own pressure (which the replica may cause: a model filling the disk),
  // three times in a row: replaced each time, no death counted, but each replacement waits the crash policy's back-off
  // for the evictions so far (1 s, 2 s, 4 s), so that one that fills its node is not started again at once, forever.
  const [pressed] = [...wanted].find(([, n]) => n === 1)!;
  const readyOf = async () => (await replicaRows()).find((r) => r.endpoint_id === pressed && r.state === 'READY' && r.address !== null)?.id;
  const waits: number[] = [];
  for (let i = 0; i < 3; i++) {
    const victim = await until('a ready replica to evict', readyOf, 60_000);
    const pod = (await kube.pods(NS)).find(
      (p) => (p.metadata as { labels?: Record<string, string> }).labels?.['dedicated-endpoints.io/replica'] === victim,
    )!;
    const evictedAt = Date.now();
    expect(await kube.evictByNode(NS, pod.metadata.name as string)).toBeDefined();
    const next = await until('its replacement', async () => (await readyOf()) !== victim && (await readyOf()), 60_000);
    const [row] = await observer<{ created: Date }[]>`SELECT created_at AS created FROM replicas WHERE id = ${next}`;
    waits.push(row!.created.getTime() - evictedAt);
    const [ended] = await observer<{ state: string; last_error: string }[]>`SELECT state, last_error FROM replicas WHERE id = ${victim}`;
    expect(ended).toEqual({ state: 'STOPPED', last_error: 'disrupted: the cluster took its pod away (TerminationByKubelet)' });
  }
  // The third waited the back-off of three evictions (4 s); measured from the eviction, so at least that, less a pass.
  expect(waits[2]).toBeGreaterThanOrEqual(3500);
  const [pressedNow] = await observer<{ status: string }[]>`SELECT status FROM endpoints WHERE id = ${pressed}`;
  expect(pressedNow!.status).toBe('RUNNING');
  ready = await until('every endpoint settled again', converged, 60_000);
  ended = await endedRows();

  Object.assign(figures, {
    evictionWaitsMs: waits,
    callsPerChange: { scaleOut: out.calls, scaleIn: scaleIn.calls, podDeleted: deleted.calls, drained: drain.calls },
    changeRequests: { scaleOut: out.requests, scaleIn: scaleIn.requests, podDeleted: deleted.requests },
  });
  console.log(`controller simulation: ${JSON.stringify(figures)}`);
  if (process.env.SIM_OUT) await writeFile(process.env.SIM_OUT, JSON.stringify(figures));
}, 600_000);
