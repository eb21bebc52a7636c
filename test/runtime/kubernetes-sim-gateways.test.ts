/**
 * Several gateways share the endpoints (src/controller/lease-share.ts), through the Kubernetes runtime, as the gateway
 * runs in a cluster: a Deployment of several replicas on one PostgreSQL. SIM_GATEWAYS gateway processes (src/main.ts,
 * RUNTIME=kubernetes, as `npm start` runs it) start together against the stand-in API server in its simulated mode
 * (its kubelet marks pods ready without processes), every pod IP's engine one small server in another process.
 *
 * Asserted, counted: from nothing, every endpoint reaches RUNNING with its wanted replicas READY, one pod each; each
 * gateway ends up holding its share of the endpoints (whoever started first hands the excess over at its next
 * renewal), and the handing over restarts nothing: no pod created twice, none deleted. Then one gateway is killed
 * (SIGKILL): the others adopt its endpoints once its leases expire, again without touching a pod.
 *
 * Times and each process's CPU are printed, and written to SIM_OUT when set (`npm run bench -- kubernetes-sim` runs
 * this file with 1,000 endpoints, one gateway then two).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { cpuTimeMs } from '../../bench/lib/proc.js';
import { createServices } from '../../src/services/index.js';
import { testEnv, TINY_REPO } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, seedPrincipal } from '../support/gateway.js';
import { startKubeStandInProcess, type KubeStandInProcess } from '../support/kube/index.js';
import { startSimEngine, type SimEngine } from '../support/kube/sim-engine.js';
import { convergedReplicas, endedReplicas, livePods, type ReplicaRow } from '../support/kube/sim-observe.js';
import { startGatewayProcess, type GatewayProcess } from '../support/processes.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';

const ENDPOINTS = Number(process.env.SIM_ENDPOINTS ?? 40);
const GATEWAYS = Number(process.env.SIM_GATEWAYS ?? 2);
const LEASE_TTL_MS = 3000;
const NS = 'default';
const H100 = 'NVIDIA-H100-80GB-HBM3';

/** Endpoint i wants 1 + (i mod 10) replicas. */
const wantedOf = (i: number) => 1 + (i % 10);
const totalReplicas = Array.from({ length: ENDPOINTS }, (_, i) => wantedOf(i)).reduce((a, b) => a + b, 0);

let kube: KubeStandInProcess;
let engine: SimEngine;
let hub: FakeHub;
let db: TestDatabase;
let dataDir: string;
const wanted = new Map<string, number>();
const gateways: GatewayProcess[] = [];
const figures: Record<string, unknown> = { endpoints: ENDPOINTS, replicas: totalReplicas, gateways: GATEWAYS };

beforeAll(async () => {
  const nodes = Math.ceil(totalReplicas / 8) + 2;
  [kube, engine, hub, db] = await Promise.all([
    startKubeStandInProcess({
      processes: false,
      nodes: Array.from({ length: nodes }, (_, i) => ({ name: `gpu-${i}`, gpus: 8, labels: { 'nvidia.com/gpu.product': H100 } })),
    }),
    startSimEngine(),
    startFakeHub({ repos: [{ id: TINY_REPO, files: { 'tiny-llama-Q8_0.gguf': buildTinyGguf() } }] }),
    createTestDatabase(),
  ]);
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'kube-sim-gateways-'));
  // The endpoints, as the API creates them, before any gateway runs.
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'sim-gw');
  let next = 0;
  const create = async () => {
    for (let i = next++; i < ENDPOINTS; i = next++) {
      const n = wantedOf(i);
      const body = createBody(projectId, { name: `sim-${i}`, hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: n, maxReplica: n } });
      const created = await services.endpoints.create(principal, body);
      if (created.type === 'error') throw new Error(created.error.message);
      wanted.set(created.value.id, n);
    }
  };
  await Promise.all(Array.from({ length: 8 }, create));
}, 300_000);

afterAll(async () => {
  if (process.env.SIM_OUT) await writeFile(process.env.SIM_OUT, JSON.stringify(figures));
  await Promise.all(gateways.map((g) => g.stop()));
  await db?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline)
      throw new Error(
        `timed out waiting for ${what}; the gateways wrote:\n${gateways.map((g) => g.output().slice(-3000)).join('\n---\n')}`,
      );
    await sleep(200);
  }
}

/** Live leases by gateway (its process id, from the lease's owner: gw-<pid>-<uuid>). */
async function leasesByGateway(): Promise<Map<number, number>> {
  const rows = await db.sql<{ owner: string; n: number }[]>`
    SELECT owner, count(*)::int AS n FROM endpoint_leases WHERE expires_at > now() GROUP BY owner`;
  return new Map(rows.map((r) => [Number(/^gw-(\d+)-/.exec(r.owner)?.[1]), r.n]));
}

const converged = () => convergedReplicas(db.sql, wanted);

/** Each READY replica has exactly one live pod, and no other pod lives. */
async function expectOnePodEach(ready: ReplicaRow[]): Promise<void> {
  const pods = await livePods(kube, NS);
  expect(pods.size).toBe(ready.length);
  for (const r of ready) expect(pods.get(r.id)?.length, r.id).toBe(1);
}

/** No gateway holds more than its share (the endpoints over the gateways, rounded up) and a tenth (one at least). */
const shareBound = (members: number) => {
  const share = Math.ceil(ENDPOINTS / members);
  return share + Math.max(1, Math.floor(share / 10));
};

let ready: ReplicaRow[] = [];

test(`${GATEWAYS} gateway processes converge ${ENDPOINTS} endpoints (${totalReplicas} replicas) together, each holding its share`, async () => {
  await kube.resetCounts();
  const started = performance.now();
  const env = testEnv(dataDir, hub.url, {
    DATABASE_URL: db.dbUrl,
    RUNTIME: 'kubernetes',
    KUBECONFIG: kube.writeKubeconfig(NS),
    ENGINE_IMAGE: 'sim:1',
    KUBERNETES_NAMESPACE: NS,
    KUBERNETES_ENGINE_PORT: String(engine.port),
    // Production's pace of passes; a short lease, so that the renewals (a third of it apart) hand endpoints over soon.
    CONTROLLER_INTERVAL_MS: '500',
    LEASE_TTL_MS: String(LEASE_TTL_MS),
  });
  gateways.push(...(await Promise.all(Array.from({ length: GATEWAYS }, () => startGatewayProcess(env)))));
  const servingMs = performance.now() - started;
  ready = await until('every endpoint RUNNING with its replicas READY', converged, Math.max(120_000, ENDPOINTS * 400));
  const convergeMs = performance.now() - started;
  const cpu = gateways.map((g) => Math.round(cpuTimeMs(g.child.pid!) ?? 0));
  expect(ready).toHaveLength(totalReplicas);
  expect(await endedReplicas(db.sql)).toEqual([]);
  await expectOnePodEach(ready);
  const converging = await kube.requests();
  expect(converging['POST /api/v1/namespaces/{ns}/pods']).toBe(totalReplicas);

  // Whoever started first took more than its share (the others were not members yet): it hands the excess over.
  const bound = shareBound(GATEWAYS);
  const shares = await until(
    'each gateway to hold its share',
    async () => {
      const by = await leasesByGateway();
      const counts = gateways.map((g) => by.get(g.child.pid!) ?? 0);
      return counts.reduce((a, b) => a + b, 0) === ENDPOINTS && counts.every((n) => n <= bound) ? counts : undefined;
    },
    60_000,
  );
  const sharedMs = performance.now() - started;
  // Handed over, adopted where they run: still one pod each, none created again, none deleted.
  expect(await converged()).toHaveLength(totalReplicas);
  await expectOnePodEach(ready);
  const requests = await kube.requests();
  expect(requests['POST /api/v1/namespaces/{ns}/pods']).toBe(totalReplicas);
  expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}'] ?? 0).toBe(0);
  expect(await endedReplicas(db.sql)).toEqual([]);

  Object.assign(figures, {
    servingMs: Math.round(servingMs),
    convergeMs: Math.round(convergeMs),
    sharedMs: Math.round(sharedMs),
    gatewayCpuMs: cpu,
    leases: shares,
    requests,
  });
  console.log(`gateways simulation, convergence: ${JSON.stringify(figures)}`);
}, 900_000);

test.skipIf(GATEWAYS < 2)(
  'a gateway killed: the others adopt its endpoints once its leases expire, and no pod changes',
  async () => {
    expect(ready).toHaveLength(totalReplicas);
    await kube.resetCounts();
    const victim = gateways.pop()!;
    victim.child.kill('SIGKILL');
    await new Promise((resolve) => victim.child.once('exit', resolve));
    const started = performance.now();
    const bound = shareBound(gateways.length);
    const shares = await until(
      'the other gateways to hold every endpoint',
      async () => {
        const by = await leasesByGateway();
        const counts = gateways.map((g) => by.get(g.child.pid!) ?? 0);
        return counts.reduce((a, b) => a + b, 0) === ENDPOINTS && counts.every((n) => n <= bound) ? counts : undefined;
      },
      60_000,
    );
    const adoptedMs = performance.now() - started;
    // A pass over each adopted endpoint has run (a lease is taken by its pass): give them a few intervals.
    await sleep(1500);
    expect(await converged()).toHaveLength(totalReplicas);
    await expectOnePodEach(ready);
    const requests = await kube.requests();
    expect(requests['POST /api/v1/namespaces/{ns}/pods'] ?? 0).toBe(0);
    expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}'] ?? 0).toBe(0);
    expect(await endedReplicas(db.sql)).toEqual([]);
    Object.assign(figures, { adoptedMs: Math.round(adoptedMs), leasesAfterKill: shares });
    console.log(`gateways simulation, a gateway killed: ${JSON.stringify({ adoptedMs: figures.adoptedMs, leases: shares })}`);
  },
  300_000,
);
