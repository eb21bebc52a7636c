/**
 * Several gateways share the endpoints (src/controller/lease-share.ts), through the Kubernetes runtime, as the gateway
 * runs in a cluster: a Deployment of several replicas on one PostgreSQL. SIM_GATEWAYS gateway processes (src/main.ts,
 * RUNTIME=kubernetes, as `npm start` runs it) run against the stand-in API server in its simulated mode (its kubelet
 * marks pods ready without processes), every pod IP's engine one small server in another process.
 *
 * Asserted, counted: the endpoints, created through the services once the gateways run, reach RUNNING with their
 * wanted replicas READY, one pod each, and each gateway holds the endpoints of its shards. Then the gateways are stopped and
 * started again at once, the pods running: whoever starts first takes more than its share (the others are not
 * members yet) and hands the excess over at its next renewal; the handing over restarts nothing (no pod created, none
 * deleted). Then one gateway is killed (SIGKILL): the others adopt its endpoints once its leases expire, again
 * without touching a pod.
 *
 * Times and each process's CPU are printed, and written to SIM_OUT when set (`npm run bench -- kubernetes-sim` runs
 * this file with 1,000 endpoints, one gateway, two, then four).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { cpuTimeMs } from '../../bench/lib/proc.js';
import { assignShards, shardOf } from '../../src/domain/shards.js';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { testEnv } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import type { FakeHub } from '../support/fake-hub.js';
import { seedPrincipal } from '../support/gateway.js';
import type { KubeStandInProcess } from '../support/kube/index.js';
import type { SimEngine } from '../support/kube/sim-engine.js';
import { createSimEndpoints, replicasOf, startSimCluster, type SimCluster } from '../support/kube/sim-fleet.js';
import { convergedReplicas, endedReplicas, livePods, type ReplicaRow } from '../support/kube/sim-observe.js';
import { startGatewayProcess, type GatewayProcess } from '../support/processes.js';

// 20 in the suite (each gateway's share still has endpoints of 1 to 10 replicas); the benchmark runs 1,000.
const ENDPOINTS = Number(process.env.SIM_ENDPOINTS ?? 20);
const GATEWAYS = Number(process.env.SIM_GATEWAYS ?? 2);
const LEASE_TTL_MS = 3000;
const NS = 'default';
const totalReplicas = replicasOf(ENDPOINTS);

let kube: KubeStandInProcess;
let engine: SimEngine;
let hub: FakeHub;
let db: TestDatabase;
let dataDir: string;
let services: Services;
let principal: Principal;
let projectId: string;
const wanted = new Map<string, number>();
const gateways: GatewayProcess[] = [];
const figures: Record<string, unknown> = { endpoints: ENDPOINTS, replicas: totalReplicas, gateways: GATEWAYS };

beforeAll(async () => {
  let cluster: SimCluster;
  [cluster, db] = await Promise.all([startSimCluster(totalReplicas), createTestDatabase()]);
  ({ kube, engine, hub } = cluster);
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'kube-sim-gateways-'));
  services = createServices(db.sql);
  ({ principal, projectId } = await seedPrincipal(db.sql, services, 'sim-gw'));
}, 300_000);

afterAll(async () => {
  if (process.env.SIM_OUT) await writeFile(process.env.SIM_OUT, JSON.stringify(figures));
  await Promise.all(gateways.map((g) => g.stop()));
  await db?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** The endpoints, as the API creates them (no gateway is poked: each finds them at its next pass). */
const createEndpoints = () => createSimEndpoints(services, principal, projectId, ENDPOINTS, wanted);

const gatewayEnv = () =>
  testEnv(dataDir, hub.url, {
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

const startGateways = async () => {
  gateways.push(...(await Promise.all(Array.from({ length: GATEWAYS }, () => startGatewayProcess(gatewayEnv())))));
};

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

/** The gateways' live membership rows. */
/** The live members; `counted`: only those the others count (they have run for a lease's TTL: see leases-repository.ts). */
const members = async ({ counted = false } = {}) =>
  (
    await db.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM controller_members
      WHERE expires_at > now() ${counted ? db.sql`AND joined_at <= now() - ${LEASE_TTL_MS} * interval '1 millisecond'` : db.sql``}`
  )[0]!.n;

/**
 * Waits until the gateways hold every endpoint, each one those of its shards (src/domain/shards.ts: the members
 * divide the pool's shards, each computing the same division); each gateway's count.
 */
const sharing = (what: string) =>
  until(
    what,
    async () => {
      const rows = await db.sql<{ owner: string; pool: string; node: string }[]>`
        SELECT owner, pool, node FROM controller_members WHERE expires_at > now()`;
      // Gateways that divide shards are a pool of their own (one of an earlier version, sharing by count, is not in it),
      // each member saying which replicas' pool its runtime follows (another installation's gateways leave those alone).
      expect(rows.every((m) => m.pool.endsWith('#shards') && m.node === `kubernetes/${NS}`)).toBe(true);
      const members = rows.map((m) => m.owner);
      const leases = await db.sql<{ endpoint_id: string; owner: string }[]>`
        SELECT endpoint_id, owner FROM endpoint_leases WHERE expires_at > now()`;
      if (members.length !== gateways.length || leases.length !== ENDPOINTS) return undefined;
      const shardsOf = new Map(members.map((m) => [m, assignShards(members, m)]));
      if (!leases.every((l) => shardsOf.get(l.owner)?.has(shardOf(l.endpoint_id)))) return undefined;
      const pidOf = (owner: string) => Number(/^gw-(\d+)-/.exec(owner)?.[1]);
      return gateways.map((g) => leases.filter((l) => pidOf(l.owner) === g.child.pid).length);
    },
    60_000,
  );

const converged = () => convergedReplicas(db.sql, wanted);

/** Each READY replica has exactly one live pod, and no other pod lives. */
async function expectOnePodEach(ready: ReplicaRow[]): Promise<void> {
  const pods = await livePods(kube, NS);
  expect(pods.size).toBe(ready.length);
  for (const r of ready) expect(pods.get(r.id)?.length, r.id).toBe(1);
}

/** After a handing over: every endpoint still serves from the same pods, none created or deleted, no replica ended. */
async function expectNothingRestarted(): Promise<void> {
  expect(await converged()).toHaveLength(totalReplicas);
  await expectOnePodEach(ready);
  const requests = await kube.requests();
  expect(requests['POST /api/v1/namespaces/{ns}/pods'] ?? 0).toBe(0);
  expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}'] ?? 0).toBe(0);
  expect(await endedReplicas(db.sql)).toEqual([]);
}

/** CPU milliseconds so far of each gateway, the stand-in, the engine and this database's PostgreSQL backends. */
async function cpuNow() {
  const ms = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000;
  const backends = await db.sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`;
  return {
    gateways: gateways.map((g) => cpuTimeMs(g.child.pid!) ?? 0),
    standIn: ms(await kube.cpuUsage()),
    engine: ms(await engine.cpuUsage()),
    postgres: backends.reduce((sum, { pid }) => sum + (cpuTimeMs(pid) ?? 0), 0),
  };
}
type Cpu = Awaited<ReturnType<typeof cpuNow>>;
const cpuSince = (before: Cpu, after: Cpu) => ({
  gateways: after.gateways.map((ms, i) => Math.round(ms - (before.gateways[i] ?? 0))),
  standIn: Math.round(after.standIn - before.standIn),
  engine: Math.round(after.engine - before.engine),
  postgres: Math.round(after.postgres - before.postgres),
});

let ready: ReplicaRow[] = [];

test(`${GATEWAYS} gateway processes converge ${ENDPOINTS} endpoints (${totalReplicas} replicas) created while they run, each holding its share`, async () => {
  await startGateways();
  await until('every gateway a member', async () => (await members()) === GATEWAYS, 30_000);
  // As in a deployment whose gateways run before the endpoints come: each counts the others (once they have run for a
  // lease's TTL, then at its next pass), so each takes its own shards' endpoints from the first.
  await until('every gateway counted by the others', async () => (await members({ counted: true })) === GATEWAYS, 30_000);
  await sleep(1000);
  await kube.resetCounts();
  const cpuBefore = await cpuNow();
  const started = performance.now();
  await createEndpoints();
  const createdMs = performance.now() - started;
  ready = await until('every endpoint RUNNING with its replicas READY', converged, Math.max(120_000, ENDPOINTS * 400));
  const convergeMs = performance.now() - started;
  const cpu = cpuSince(cpuBefore, await cpuNow());
  expect(ready).toHaveLength(totalReplicas);
  expect(await endedReplicas(db.sql)).toEqual([]);
  await expectOnePodEach(ready);
  const requests = await kube.requests();
  expect(requests['POST /api/v1/namespaces/{ns}/pods']).toBe(totalReplicas);
  expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}'] ?? 0).toBe(0);
  const leases = await sharing('each gateway to hold its share');
  Object.assign(figures, { createdMs: Math.round(createdMs), convergeMs: Math.round(convergeMs), convergeCpuMs: cpu, leases, requests });
  console.log(`gateways simulation, convergence: ${JSON.stringify(figures)}`);
}, 900_000);

test.skipIf(GATEWAYS < 2)(
  'gateways restarted together, the pods running: the first up hands the excess over, and no pod changes',
  async () => {
    await Promise.all(gateways.splice(0).map((g) => g.stop()));
    await kube.resetCounts();
    const started = performance.now();
    await startGateways();
    const leases = await sharing('each gateway to hold its share again');
    const sharedMs = performance.now() - started;
    // The first up took every endpoint (the others count for it once they have run for a lease's TTL), and handed the
    // excess over.
    expect(gateways.some((g) => /handed \d+ endpoint\(s\) over/.test(g.output()))).toBe(true);
    // The passes over the endpoints handed over have run (a lease is taken by its pass): a few intervals more.
    await sleep(1500);
    await expectNothingRestarted();
    Object.assign(figures, { restartSharedMs: Math.round(sharedMs), leasesAfterRestart: leases });
    console.log(`gateways simulation, restarted: ${JSON.stringify({ sharedMs: figures.restartSharedMs, leases })}`);
  },
  300_000,
);

test.skipIf(GATEWAYS < 2)(
  'a gateway killed: the others adopt its endpoints once its leases expire, and no pod changes',
  async () => {
    await kube.resetCounts();
    const victim = gateways.pop()!;
    victim.child.kill('SIGKILL');
    await new Promise((resolve) => victim.child.once('exit', resolve));
    const started = performance.now();
    const leases = await sharing('the other gateways to hold every endpoint');
    const adoptedMs = performance.now() - started;
    await sleep(1500);
    await expectNothingRestarted();
    Object.assign(figures, { adoptedMs: Math.round(adoptedMs), leasesAfterKill: leases });
    console.log(`gateways simulation, a gateway killed: ${JSON.stringify({ adoptedMs: figures.adoptedMs, leases })}`);
  },
  300_000,
);
