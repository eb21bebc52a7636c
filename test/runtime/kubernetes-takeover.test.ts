/**
 * RUNTIME=kubernetes: a gateway process SIGKILLed while its endpoint's first
 * pod is still starting. The gateway that takes the endpoint over must adopt
 * that pod where it runs (the same replica, the same pod uid), wait for it to
 * become ready, and serve from it: no second pod, no fresh start. Gateways run
 * as real processes (src/main.ts, as `npm start` runs it) against the
 * stand-in API server, whose kubelet runs the pod's containers as processes.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { engineFetch, longRequest, standardRepos, statusOf, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';
import { endpointPods, kubernetesTestEnv } from '../support/kube-env.js';
import {
  isPodCreate,
  isPodRead,
  startApiProxy,
  startKubeStandIn,
  writeKubeconfig,
  type ApiProxy,
  type KubeStandIn,
} from '../support/kube/index.js';
import { startGatewayProcess, type GatewayProcess } from '../support/processes.js';

const NS = 'default';
const ADMIN_KEY = 'test_kube_takeover_admin_key_01234';
const H100 = 'NVIDIA-H100-80GB-HBM3';

let kube: KubeStandIn;
let db: TestDatabase;
let hub: FakeHub;
/** The hub's repositories, as it serves them: a test moves a branch by changing one's `commits`. */
const repos = standardRepos();
let dataDir: string;
let cacheDir: string;
let env: Record<string, string>;
const gateways: GatewayProcess[] = [];

/**
 * The gateways reach the API server directly or through a proxy (test/support/kube/api-proxy.ts) that, while
 * `outage` is set, answers pod creation as an overloaded API server does (503 ServiceUnavailable), and while
 * `podReadsDown` is set answers so to every read of pods (lists and watches).
 */
const faults = { outage: false, podReadsDown: false, refused: 0, loseCreates: 0 };
let apiProxy: ApiProxy | undefined;

beforeAll(async () => {
  [db, hub] = await Promise.all([createTestDatabase(), startFakeHub({ repos })]);
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'kube-takeover-'));
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kube-takeover-models-'));
  kube = await startKubeStandIn({
    cwd: process.cwd(),
    probePeriodMs: 100,
    nodes: [{ name: 'gpu-a', gpus: 4, labels: { 'nvidia.com/gpu.product': H100 } }],
  });
  env = testEnv(dataDir, hub.url, {
    DATABASE_URL: db.dbUrl,
    ADMIN_API_KEY: ADMIN_KEY,
    KUBECONFIG: kube.writeKubeconfig(NS),
    ...kubernetesTestEnv(NS, cacheDir, { KUBERNETES_TERMINATION_GRACE_SECONDS: '2' }),
    // The placements' back-off after an outage starts at 250 ms (production: 1 s), doubling: the outage tests wait
    // for fewer seconds of it. The passes come every 100 ms, so a window of 1 s without back-off holds about ten.
    PLACEMENT_BACKOFF_BASE_MS: '250',
  });
}, 120_000);

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  await kube?.close();
  await hub?.close();
  await db?.close();
  await Promise.all([dataDir, cacheDir].map((dir) => dir && rm(dir, { recursive: true, force: true })));
}, 60_000);

async function createEndpoint(gateway: GatewayProcess): Promise<string> {
  const rest = restClient(gateway.url, ADMIN_KEY);
  const teams = await rest('POST', '/graphql', { query: '{ teams { projects { id } } }' });
  const projectId = teams.body.data.teams[0].projects[0].id as string;
  const created = await rest(
    'POST',
    '/dedicated/beta/endpoint',
    createBody(projectId, { hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } }),
  );
  expect(created.status).toBe(200);
  return created.body.endpointId as string;
}

/** Deletes the endpoint and waits for its pods to go (each holds one of the node's 4 GPUs); then stops the gateway, unless `keep`. */
async function removeEndpoint(gateway: GatewayProcess, id: string, keep = false): Promise<void> {
  expect((await restClient(gateway.url, ADMIN_KEY)('DELETE', `/dedicated/beta/endpoint/${id}`)).status).toBe(200);
  await waitFor('the endpoint’s pods gone', async () => podsOf(id).length === 0, 60_000);
  if (!keep) await gateway.stop();
}

/** A gateway on the API server directly, or through the proxy that can play an outage. */
async function startGateway(through: 'direct' | 'proxy' = 'direct', extra: Record<string, string> = {}): Promise<GatewayProcess> {
  let kubeconfig: Record<string, string> = {};
  if (through === 'proxy') {
    apiProxy = await startApiProxy(kube.url, (req) => {
      if (faults.loseCreates > 0 && isPodCreate(req)) {
        faults.loseCreates--;
        return 'lose';
      }
      const refused = (faults.outage && isPodCreate(req)) || (faults.podReadsDown && isPodRead(req));
      if (refused) faults.refused++;
      return refused;
    });
    kubeconfig = { KUBECONFIG: writeKubeconfig({ server: apiProxy.url, token: kube.token, namespace: NS }) };
  }
  const gateway = await startGatewayProcess({ ...env, ...kubeconfig, ...extra });
  gateways.push(gateway);
  return gateway;
}

/**
 * The outage tests' gateway, through the proxy: one for the three of them (a gateway process's start is seconds of
 * CPU on a loaded machine), started by the first and stopped by the last.
 */
let outageGateway: Promise<GatewayProcess> | undefined;
const throughProxy = () => (outageGateway ??= startGateway('proxy'));

/** Drains as long as the answer takes (the test default is 5 s): the drain test's gateways. */
const drainable = { DRAIN_TIMEOUT_MS: '120000' };

/**
 * The gateway a test leaves running for the next one to take as its A (a gateway process's start is seconds of CPU on
 * a loaded machine): the outage tests' one goes on as the first takeover test's A, and each takeover test's B, which
 * holds nothing of the test's once its endpoint is deleted, as the next one's (the drain test's B starts with its
 * setting). Proxied or not makes no difference to a gateway while the proxy plays no fault. `serving`: an endpoint it
 * holds, serving on one replica, for a next test that needs no more (an engine's start the fewer).
 */
let handedOn: { gateway: GatewayProcess; serving?: string } | undefined;

/**
 * A takeover test's A: the gateway the test before handed on, or (run alone, or after a failure) a new one with
 * `extra`. Every other gateway is stopped first: one left by another test would take the lease over in B's place.
 */
async function gatewayA(extra: Record<string, string> = {}): Promise<{ a: GatewayProcess; serving?: string }> {
  const left = handedOn;
  handedOn = undefined;
  await Promise.all(gateways.splice(0).map((g) => (g === left?.gateway ? undefined : g.stop())));
  const a = left?.gateway;
  if (a && a.child.exitCode === null && a.child.signalCode === null) {
    gateways.push(a);
    return { a, serving: left.serving };
  }
  return { a: await startGateway('direct', extra) };
}

/** The endpoint the first outage test leaves serving under the outage tests' gateway, for the second. */
let outageServing: string | undefined;

const podsOf = (endpointId: string) => endpointPods(kube, NS, endpointId, true);

/** The endpoint's pod once its engine container runs: its name and the engine's process id. */
const enginePod = (endpointId: string) =>
  waitFor(
    "the pod's engine process",
    async () => {
      const pod = podsOf(endpointId)[0];
      const podName = (pod?.metadata as { name?: string } | undefined)?.name;
      const enginePid = podName ? kube.pid(NS, podName, 'engine') : undefined;
      return podName && enginePid ? { name: podName, pid: enginePid } : undefined;
    },
    90_000,
  );

/** Waits for the endpoint to be RUNNING on one ready replica. */
const servingOnOne = (endpointId: string, what: string) =>
  waitFor(
    what,
    async () => {
      const s = await statusOf(db.sql, endpointId);
      return s.status === 'RUNNING' && s.curr === 1 ? s : undefined;
    },
    90_000,
  );

/** The commit a pod's init container fetches its model at. */
const podCommit = (pod: object) => {
  // By name: a hostPath cache's pod runs its preparation (prepare-cache) before the fetcher.
  const inits = (pod as { spec: { initContainers: { name: string; args: string[] }[] } }).spec.initContainers;
  const args = inits.find((c) => c.name === 'fetch-model')!.args;
  return args[args.indexOf('--commit') + 1];
};

/** The gateway that holds the endpoint's lease, once one does. */
const leaseOwner = (endpointId: string) =>
  waitFor('a gateway to hold the endpoint', async () => {
    const [lease] = await db.sql<{ owner: string }[]>`SELECT owner FROM endpoint_leases WHERE endpoint_id = ${endpointId}`;
    return lease?.owner;
  });

/** A gateway started while the test goes on (awaited later): a start that fails then is not also an unhandled rejection. */
function beside(start: Promise<GatewayProcess>): Promise<GatewayProcess> {
  start.catch(() => {});
  return start;
}

const isReady = (pod: object) =>
  ((pod as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions ?? []).some(
    (c) => c.type === 'Ready' && c.status === 'True',
  );

test('an API server that answers 503 to pod creation is an outage, not the endpoint’s failure: it waits, then starts', async () => {
  const gateway = await throughProxy();
  faults.outage = true;
  faults.refused = 0;
  const id = await createEndpoint(gateway);
  // Several passes meet the outage; none fails the endpoint (before, the first made it FAILED with WORKLOAD_INIT_SETTINGS_ERROR).
  await waitFor('pod creation refused on several passes', async () => faults.refused >= 3, 30_000);
  // Each refused placement ends with a pass that could place again at once: the placements back off instead (250 ms
  // here, doubling: at most one more in the next second), so that a server in trouble is not asked again at the
  // controller's full speed (a pass every 100 ms: about ten in that second).
  const refusedThen = faults.refused;
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(faults.refused - refusedThen).toBeLessThanOrEqual(2);
  const during = await statusOf(db.sql, id);
  expect(during.status).toBe('INITIALIZING');
  expect(during.errorCode).toBeNull();
  expect(podsOf(id)).toEqual([]);
  faults.outage = false;
  await waitFor(
    'RUNNING once the API server answers',
    async () => {
      const s = await statusOf(db.sql, id);
      expect(s.status).not.toBe('FAILED');
      return s.status === 'RUNNING' ? s : undefined;
    },
    90_000,
  );
  expect(podsOf(id)).toHaveLength(1);
  // Serving on one replica: the next test's endpoint.
  outageServing = id;
}, 180_000);

test('a rollout that meets an outage keeps the old replica serving until it can place the new one', async () => {
  const gateway = await throughProxy();
  // The endpoint the test before left serving (or, run alone, a new one).
  const id = outageServing ?? (await createEndpoint(gateway));
  outageServing = undefined;
  await servingOnOne(id, 'RUNNING before the update');
  const [old] = await db.sql<{ id: string }[]>`SELECT id FROM replicas WHERE endpoint_id = ${id} AND state = 'READY'`;
  faults.outage = true;
  faults.refused = 0;
  const updated = await restClient(gateway.url, ADMIN_KEY)('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 2 } });
  expect(updated.status).toBe(200);
  await waitFor('the new version’s pod refused twice', async () => faults.refused >= 2, 30_000);
  // The placement backs off; no pass takes the back-off for "no room" and retires the old replica for a new one
  // (ten passes or so in this second: the first would have).
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const [still] = await db.sql<{ state: string }[]>`SELECT state FROM replicas WHERE id = ${old!.id}`;
  expect(still!.state).toBe('READY');
  faults.outage = false;
  await waitFor(
    'the rollout done once the API server answers',
    async () => {
      const rows = await db.sql<{ id: string; state: string }[]>`
        SELECT id, state FROM replicas WHERE endpoint_id = ${id} AND state IN ('STARTING', 'READY', 'DRAINING')`;
      return rows.length === 1 && rows[0]!.id !== old!.id && rows[0]!.state === 'READY';
    },
    90_000,
  );
  await removeEndpoint(gateway, id, true);
}, 180_000);

test('a pod create whose answer is lost (the API server made the pod, answered 504) leaves no pod behind: one pod serves', async () => {
  const gateway = await throughProxy();
  faults.loseCreates = 1;
  const id = await createEndpoint(gateway);
  const first = await servingOnOne(id, 'RUNNING after a lost create');
  expect(first.errorCode).toBeNull();
  expect(faults.loseCreates).toBe(0);
  // The lost create's replica ended as an outage; the pod it made is deleted (it would hold its GPU with no replica).
  const rows = await db.sql<{ id: string; state: string }[]>`SELECT id, state FROM replicas WHERE endpoint_id = ${id} ORDER BY created_at`;
  expect(rows.map((r) => r.state)).toEqual(['STOPPED', 'READY']);
  await waitFor('only the serving replica’s pod left', async () => podsOf(id).length === 1, 30_000);
  const labels = (pod: object) => (pod as { metadata: { labels: Record<string, string> } }).metadata.labels;
  expect(
    kube
      .pods(NS)
      .filter((p) => labels(p)['dedicated-endpoints.io/endpoint'] === id)
      .map((p) => labels(p)['dedicated-endpoints.io/replica']),
  ).toEqual([rows[1]!.id]);
  await removeEndpoint(gateway, id, true);
  handedOn = { gateway };
}, 180_000);

test('a gateway killed while its pod starts: the next gateway adopts that pod, serves from it, and starts no other', async () => {
  const { a } = await gatewayA();
  const id = await createEndpoint(a);

  // The engine container runs (the model fetched) but is not ready yet: frozen now, it cannot become ready under A.
  const { name, pid } = await enginePod(id);
  process.kill(-pid, 'SIGSTOP');
  expect(isReady(kube.pod(NS, name)!)).toBe(false);
  const uid = (kube.pod(NS, name)!.metadata as { uid: string }).uid;
  const exited = new Promise((resolve) => a.child.once('exit', resolve));
  a.child.kill('SIGKILL');
  await exited;
  const [atKill] = await db.sql<{ id: string; state: string; locator: string }[]>`
    SELECT id, state, locator FROM replicas WHERE endpoint_id = ${id}`;
  expect(atKill).toMatchObject({ state: 'STARTING', locator: name });
  // Only the gateway died: the engine goes on loading.
  process.kill(-pid, 'SIGCONT');
  // The repository's main branch moves on meanwhile: the version keeps the commit its first replica was started at.
  const commit = podCommit(kube.pod(NS, name)!);
  const tiny = repos.find((r) => r.id === TINY_REPO)!;
  tiny.commits = { main: 'c0ffee'.padEnd(40, '0') };

  const b = await startGateway();
  await servingOnOne(id, 'RUNNING under gateway B').catch(async (error: Error) => {
    const pods = JSON.stringify(podsOf(id).map((p) => p.status));
    throw new Error(`${error.message}: ${JSON.stringify(await statusOf(db.sql, id))}\npods: ${pods}\n${b.output().slice(-3000)}`);
  });
  const rows = await db.sql<{ id: string; state: string }[]>`SELECT id, state FROM replicas WHERE endpoint_id = ${id}`;
  expect(rows).toEqual([{ id: atKill!.id, state: 'READY' }]);
  expect(podsOf(id).map((p) => (p.metadata as { uid: string }).uid)).toEqual([uid]);
  const answer = await restClient(b.url, ADMIN_KEY)('POST', '/dedicated/v1/chat/completions', {
    model: id,
    messages: [{ role: 'user', content: 'Hello' }],
    max_tokens: 4,
  });
  expect(answer.status).toBe(200);

  // B records the model A's start resolved (the replica's row has it): a replica B adds runs the same commit.
  try {
    const [version] = await db.sql<{ model: { commitSha: string } | null }[]>`
      SELECT model FROM endpoint_versions WHERE endpoint_id = ${id} ORDER BY version_index DESC LIMIT 1`;
    expect(version!.model?.commitSha).toBe(commit);
    const scaled = await restClient(b.url, ADMIN_KEY)('PUT', `/dedicated/beta/endpoint/${id}`, {
      autoscalingPolicy: { minReplica: 2, maxReplica: 2 },
    });
    expect(scaled.status).toBe(200);
    const pods = await waitFor('a second pod', async () => (podsOf(id).length === 2 ? podsOf(id) : undefined), 60_000);
    expect(pods.map(podCommit)).toEqual([commit, commit]);
  } finally {
    delete tiny.commits;
  }
  // Its two pods hold two of the node's four GPUs: freed for the tests after.
  await removeEndpoint(b, id, true);
  handedOn = { gateway: b };
}, 240_000);

test('a gateway that takes over while it cannot read pods neither adopts nor replaces the starting pod until it can: then it serves from that pod', async () => {
  const { a } = await gatewayA();
  const id = await createEndpoint(a);
  // B runs beside A, started while A's pod starts, once A holds the lease; then B's pod watch is cut and its relists
  // refused: its cache is not synced. B has the drain test's setting (no drain here): that test takes it as its A.
  const held = await leaseOwner(id);
  const starting = beside(startGateway('proxy', drainable));
  const { name, pid } = await enginePod(id);
  process.kill(-pid, 'SIGSTOP'); // not ready under A
  const uid = (kube.pod(NS, name)!.metadata as { uid: string }).uid;
  const b = await starting;
  faults.podReadsDown = true;
  apiProxy!.cutPodWatches();
  expect(await leaseOwner(id)).toBe(held);
  const atKill = await statusOf(db.sql, id);
  const exited = new Promise((resolve) => a.child.once('exit', resolve));
  a.child.kill('SIGKILL');
  await exited;
  process.kill(-pid, 'SIGCONT');

  // B takes the lease when A's expires and renews it on every controller tick (100 ms here), each of which starts a
  // pass over the endpoint when none runs: ten renewals seen are a second and more of B's passes.
  const expiries = new Set<string>();
  await waitFor(
    'B to hold the lease for ten renewals',
    async () => {
      const [lease] = await db.sql<{ owner: string; expires_at: Date }[]>`
        SELECT owner, expires_at FROM endpoint_leases WHERE endpoint_id = ${id}`;
      if (lease && lease.owner !== held) expiries.add(lease.expires_at.toISOString());
      return expiries.size >= 10;
    },
    30_000,
  );
  // Those passes could not tell whether the pod runs: it was left as it is, no other was started (the node has
  // GPUs free for one), and the endpoint still shows what it showed.
  expect(podsOf(id).map((p) => (p.metadata as { uid: string }).uid)).toEqual([uid]);
  expect(await statusOf(db.sql, id)).toEqual(atKill);
  const during = await db.sql<{ state: string }[]>`SELECT state FROM replicas WHERE endpoint_id = ${id}`;
  expect(during.map((r) => r.state)).toEqual(['STARTING']);

  faults.podReadsDown = false;
  await servingOnOne(id, 'RUNNING under gateway B once it can read pods');
  expect(podsOf(id).map((p) => (p.metadata as { uid: string }).uid)).toEqual([uid]);
  // B and its endpoint, serving on that pod: the next test's A and endpoint.
  handedOn = { gateway: b, serving: id };
}, 240_000);

test('a gateway killed while its replica drains: the gateway that takes over lets the answer in flight finish, then stops the pod', async () => {
  // The endpoint the test before left serving under its B, now A (or, run alone, a new one).
  const { a, serving } = await gatewayA(drainable);
  const id = serving ?? (await createEndpoint(a));
  // B runs beside A (started while A's pod starts, for a new endpoint), once A holds the endpoint: holding nothing
  // while A holds it, it takes over as soon as A's lease expires.
  const held = await leaseOwner(id);
  const starting = beside(startGateway('direct', drainable));
  await servingOnOne(id, 'RUNNING under gateway A');
  const b = await starting;
  expect(await leaseOwner(id)).toBe(held);
  const [replica] = await db.sql<{ id: string; address: string; engine_token: string | null; locator: string }[]>`
    SELECT id, address, engine_token, locator FROM replicas WHERE endpoint_id = ${id} AND state = 'READY'`;

  // Answers that another gateway routed to the replica: straight to its engine, as that gateway's router sends it; one
  // after another, so that the engine is never idle until the test stops asking (one answer alone could end, on a
  // fast moment, before the taker's first look: then stopping the pod at once would be right).
  let asking = true;
  const answers: Promise<ArrayBuffer | undefined>[] = [];
  const asker = (async () => {
    while (asking) {
      const answer = longRequest(replica!, 3500, new AbortController().signal);
      answers.push(answer);
      await answer;
    }
  })();
  await waitFor('the answer under way', async () => {
    const health = (await (await engineFetch(replica!, '/health')).json()) as { active: number };
    return health.active > 0;
  });
  // A puts the endpoint to sleep: the replica leaves routing and drains; then A dies.
  expect((await restClient(a.url, ADMIN_KEY)('PUT', `/dedicated/beta/endpoint/${id}/sleep`)).status).toBe(200);
  await waitFor('the replica draining', async () => {
    const [row] = await db.sql<{ state: string }[]>`SELECT state FROM replicas WHERE id = ${replica!.id}`;
    return row?.state === 'DRAINING';
  });
  const exited = new Promise((resolve) => a.child.once('exit', resolve));
  a.child.kill('SIGKILL');
  await exited;
  await waitFor('B to hold the endpoint', async () => {
    const [lease] = await db.sql<{ owner: string }[]>`SELECT owner FROM endpoint_leases WHERE endpoint_id = ${id}`;
    return lease !== undefined && lease.owner !== held;
  });
  // B took over while answers are being generated: it does not stop the pod meanwhile...
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(kube.pod(NS, replica!.locator)?.metadata.deletionTimestamp, 'the pod is not deleted while it answers').toBeUndefined();
  // ...and once no more are asked for, the one in flight ends whole; only then does the pod go, and the endpoint sleeps.
  asking = false;
  await asker;
  const bodies = await Promise.all(answers);
  for (const body of bodies) {
    expect(body, 'an answer was cut').toBeDefined();
    expect(JSON.parse(Buffer.from(body!).toString()).choices[0].finish_reason).toBe('length');
  }
  await waitFor('the drained pod gone', async () => kube.pod(NS, replica!.locator) === undefined, 60_000);
  await waitFor('the endpoint asleep', async () => (await statusOf(db.sql, id)).status === 'SLEEPING', 60_000);
  const [row] = await db.sql<{ state: string }[]>`SELECT state FROM replicas WHERE id = ${replica!.id}`;
  expect(row!.state).toBe('STOPPED');
  await removeEndpoint(b, id);
}, 240_000);
