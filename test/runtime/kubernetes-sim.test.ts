/**
 * The Kubernetes runtime at scale, against the stand-in API server in its
 * simulated mode (the kubelet marks pods ready without processes): many
 * endpoints of up to 10 replicas each converge from nothing, then the
 * controller's questions (liveness, capacity) are asked pass after pass.
 *
 * The stand-in runs in a child process of its own (SIM_IN_PROCESS=1: in this
 * one), so that its work does not share the runtime's event loop, as a real
 * API server's does not; the CPU time of each process is reported.
 *
 * What is asserted is counted, not timed: the passes make no API call at all
 * (they read the informers' caches: no list per pass), and a change costs a
 * fixed number of calls whatever the number of endpoints. Times are printed,
 * and written to SIM_OUT when set (`npm run bench -- kubernetes-sim` runs
 * this file with SIM_ENDPOINTS=1000 and reports them in BENCHMARKS.md).
 */
import { simKubernetesRuntime, simLaunch, startReplica } from '../support/start-replica.js';
import { writeFile } from 'node:fs/promises';
import { CoreV1Api, KubeConfig, makeInformer, type Informer, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { KubernetesRuntime } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import type { ReplicaRef } from '../../src/runtime/runtime.js';
import { startKubeStandIn, startKubeStandInProcess } from '../support/kube/index.js';

const ENDPOINTS = Number(process.env.SIM_ENDPOINTS ?? 150);
const PASSES = 20;
const CONCURRENCY = Number(process.env.SIM_CONCURRENCY ?? 100);
const H100 = 'NVIDIA-H100-80GB-HBM3';
/** SIM_IN_PROCESS=1: the stand-in in this process, sharing the runtime's event loop (as before session 16). */
const IN_PROCESS = process.env.SIM_IN_PROCESS === '1';

/** What the test reads of the stand-in, wherever it runs. */
interface SimStandIn {
  writeKubeconfig(namespace?: string): string;
  requests(): Record<string, number> | Promise<Record<string, number>>;
  resetCounts(): void | Promise<void>;
  /** The stand-in's own CPU time (µs); undefined in this process, where it is part of the test's. */
  cpuUsage(): Promise<NodeJS.CpuUsage | undefined>;
  close(): Promise<void>;
}

let kube: SimStandIn;
let runtime: KubernetesRuntime;
/** The pods' watch events as any client sees them, counted by this test's own informer. */
let watched: Informer<V1Pod>;
let podEvents = 0;
/** How often the runtime told its listener (the controller) that a replica changed. */
let told = 0;

/** Endpoint i runs 1 + (i mod 10) replicas. */
const replicasOf = (i: number) => 1 + (i % 10);
const totalReplicas = Array.from({ length: ENDPOINTS }, (_, i) => replicasOf(i)).reduce((a, b) => a + b, 0);

const launch = (endpoint: number, replica: number) => simLaunch(`rep_sim${endpoint}x${replica}`, `ep_sim${endpoint}`);

/** Runs `tasks` with at most `limit` at once. */
async function pool<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, tasks.length) }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await tasks[i]!();
      }
    }),
  );
  return results;
}

async function until(probe: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
}

const percentile = (values: number[], q: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))] ?? 0;
const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
/** Calls other than the informers' own watches (which stay open, one each). */
const calls = (counts: Record<string, number>) =>
  Object.entries(counts)
    .filter(([key]) => !key.startsWith('WATCH'))
    .reduce((sum, [, n]) => sum + n, 0);

beforeAll(async () => {
  const nodes = Math.ceil(totalReplicas / 8) + 2;
  const options = {
    processes: false,
    nodes: Array.from({ length: nodes }, (_, i) => ({ name: `gpu-${i}`, gpus: 8, labels: { 'nvidia.com/gpu.product': H100 } })),
  };
  // The stand-in runs in a child process of its own, as an API server runs beside its clients
  // (SIM_STAND_IN_EXEC_ARGV: its Node.js options, e.g. --cpu-prof).
  kube = IN_PROCESS
    ? Object.assign(await startKubeStandIn(options), { cpuUsage: async () => undefined })
    : await startKubeStandInProcess({ ...options, execArgv: process.env.SIM_STAND_IN_EXEC_ARGV?.split(' ').filter(Boolean) ?? [] });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kube.writeKubeconfig('default'));
  runtime = simKubernetesRuntime(kubeConfig);
  runtime.onChange(() => told++);
  await runtime.open();
  const core = kubeConfig.makeApiClient(CoreV1Api);
  watched = makeInformer<V1Pod>(kubeConfig, '/api/v1/namespaces/default/pods', () => core.listNamespacedPod({ namespace: 'default' }));
  for (const verb of ['add', 'update', 'delete'] as const) watched.on(verb, () => podEvents++);
  await watched.start();
}, 120_000);

afterAll(async () => {
  await watched?.stop();
  await runtime?.close();
  await kube?.close();
});

test(`${ENDPOINTS} endpoints (${totalReplicas} replicas) converge; passes read the caches only; a change costs its own calls`, async () => {
  await kube.resetCounts();
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const standInBefore = await kube.cpuUsage();
  // Each start timed from its call to its pod's readiness seen in the informer's cache.
  const startMs: number[] = [];
  const timedStart = async (i: number, r: number) => {
    const t0 = performance.now();
    const ref = await startReplica(runtime, launch(i, r), { pollMs: 5 });
    startMs.push(performance.now() - t0);
    return ref;
  };
  const refs = await pool(
    Array.from({ length: ENDPOINTS }, (_, i) => Array.from({ length: replicasOf(i) }, (_, r) => () => timedStart(i, r))).flat(),
    CONCURRENCY,
  );
  const convergeMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const standInAfter = await kube.cpuUsage();
  const convergeCalls = await kube.requests();
  expect(refs.every((ref) => ref.address !== null)).toBe(true);
  // Per replica one pod create; per endpoint one Secret read (404) and create: nothing else, no list.
  expect(convergeCalls['POST /api/v1/namespaces/{ns}/pods']).toBe(totalReplicas);
  expect(Object.keys(convergeCalls).filter((k) => k.startsWith('GET') && !k.includes('secrets'))).toEqual([]);

  // The controller is told of a pod's change only when what it reads of the pod (its step, readiness, failure)
  // changed: at most its create, its model's download, its engine's load, its readiness.
  await until(() => podEvents >= totalReplicas * 4);
  expect(told).toBeLessThanOrEqual(totalReplicas * 4);
  const toldWhileConverging = told;
  const podEventsWhileConverging = podEvents;

  // The controller's passes: liveness of every replica and the capacity, PASSES times over.
  await kube.resetCounts();
  const passesStarted = performance.now();
  for (let pass = 0; pass < PASSES; pass++) {
    let alive = 0;
    for (const ref of refs) if (runtime.liveness(ref).kind === 'alive') alive++;
    expect(alive).toBe(refs.length);
    expect(runtime.capacity().H100).toBeGreaterThanOrEqual(totalReplicas);
  }
  const passMs = (performance.now() - passesStarted) / PASSES;
  expect(total(await kube.requests())).toBe(0);

  // Changes: ten replicas stopped; the calls are those deletions, whatever the number of endpoints.
  await kube.resetCounts();
  const victims: ReplicaRef[] = refs.slice(0, 10);
  await Promise.all(victims.map((ref) => runtime.stop(ref, 0)));
  const changeRequests = await kube.requests();
  const changeCalls = calls(changeRequests);
  expect(changeRequests['DELETE /api/v1/namespaces/{ns}/pods/{name}']).toBe(10);
  expect(changeCalls).toBe(10);
  for (const ref of victims) expect(runtime.liveness(ref).kind).toBe('dead');
  // Each deletion is told twice: the pod marked for deletion (the shortest grace, a second: never a force delete), then
  // removed once the kubelet ended it.
  await until(() => told >= toldWhileConverging + 20);
  expect(told).toBe(toldWhileConverging + 20);

  const figures = {
    endpoints: ENDPOINTS,
    replicas: totalReplicas,
    convergeMs: Math.round(convergeMs),
    convergeCpuMs: Math.round((cpu.user + cpu.system) / 1000),
    standInCpuMs:
      standInBefore && standInAfter
        ? Math.round((standInAfter.user + standInAfter.system - standInBefore.user - standInBefore.system) / 1000)
        : null,
    startMsP50: Math.round(percentile(startMs, 0.5)),
    startMsP99: Math.round(percentile(startMs, 0.99)),
    convergeCalls: calls(convergeCalls),
    callsPerReplica: Number((calls(convergeCalls) / totalReplicas).toFixed(2)),
    passMs: Number(passMs.toFixed(2)),
    callsPerPass: 0,
    callsPerChange: changeCalls / victims.length,
    podEventsWhileConverging,
    toldWhileConverging,
  };
  console.log(`kubernetes simulation: ${JSON.stringify(figures)}`);
  if (process.env.SIM_OUT) await writeFile(process.env.SIM_OUT, JSON.stringify(figures));
}, 300_000);
