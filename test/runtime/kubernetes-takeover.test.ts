/**
 * RUNTIME=kubernetes: a gateway process SIGKILLed while its endpoint's first
 * pod is still starting. The gateway that takes the endpoint over must adopt
 * that pod where it runs (the same replica, the same pod uid), wait for it to
 * become ready, and serve from it: no second pod, no fresh start. Gateways run
 * as real processes (src/main.ts, as `npm start` runs it) against the
 * stand-in API server, whose kubelet runs the pod's containers as processes.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { standardRepos, statusOf, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';
import { endpointPods, kubernetesTestEnv } from '../support/kube-env.js';
import { startKubeStandIn, writeKubeconfig, type KubeStandIn } from '../support/kube/index.js';
import { startGatewayProcess, type GatewayProcess } from '../support/processes.js';

const NS = 'default';
const ADMIN_KEY = 'test_kube_takeover_admin_key_01234';
const H100 = 'NVIDIA-H100-80GB-HBM3';

let kube: KubeStandIn;
let db: TestDatabase;
let hub: FakeHub;
let dataDir: string;
let cacheDir: string;
let env: Record<string, string>;
const gateways: GatewayProcess[] = [];

/**
 * The gateways reach the API server through this proxy, which passes every request (watches included) on, except
 * that while `outage` is set it answers pod creation as an overloaded API server does: 503 ServiceUnavailable.
 */
const apiProxy = { server: undefined as http.Server | undefined, outage: false, refused: 0 };

function startApiProxy(upstream: URL): Promise<string> {
  apiProxy.server = http.createServer((req, res) => {
    if (apiProxy.outage && req.method === 'POST' && /\/pods$/.test(req.url ?? '')) {
      apiProxy.refused++;
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          message: 'etcdserver: request timed out',
          reason: 'ServiceUnavailable',
          code: 503,
        }),
      );
      return;
    }
    const forward = http.request(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        // At once, as the API server does: a watch's answer has no body until something changes, and Node.js holds
        // written headers until the first body bytes (the gateway's first watch waited 30 s for them).
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    res.on('close', () => forward.destroy());
    req.pipe(forward);
  });
  return new Promise((resolve) =>
    apiProxy.server!.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(apiProxy.server!.address() as AddressInfo).port}`)),
  );
}

beforeAll(async () => {
  [db, hub] = await Promise.all([createTestDatabase(), startFakeHub({ repos: standardRepos() })]);
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'kube-takeover-'));
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kube-takeover-models-'));
  kube = await startKubeStandIn({
    cwd: process.cwd(),
    probePeriodMs: 100,
    nodes: [{ name: 'gpu-a', gpus: 2, labels: { 'nvidia.com/gpu.product': H100 } }],
  });
  env = testEnv(dataDir, hub.url, {
    DATABASE_URL: db.dbUrl,
    ADMIN_API_KEY: ADMIN_KEY,
    KUBECONFIG: kube.writeKubeconfig(NS),
    ...kubernetesTestEnv(NS, cacheDir, { KUBERNETES_TERMINATION_GRACE_SECONDS: '2' }),
  });
}, 120_000);

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  apiProxy.server?.closeAllConnections();
  apiProxy.server?.close();
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

/** A gateway on the API server directly, or through the proxy that can play an outage. */
async function startGateway(through: 'direct' | 'proxy' = 'direct'): Promise<GatewayProcess> {
  const kubeconfig: Record<string, string> =
    through === 'proxy'
      ? { KUBECONFIG: writeKubeconfig({ server: await startApiProxy(new URL(kube.url)), token: kube.token, namespace: NS }) }
      : {};
  const gateway = await startGatewayProcess({ ...env, ...kubeconfig });
  gateways.push(gateway);
  return gateway;
}

const podsOf = (endpointId: string) => endpointPods(kube, NS, endpointId, true);

const isReady = (pod: object) =>
  ((pod as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions ?? []).some(
    (c) => c.type === 'Ready' && c.status === 'True',
  );

test('an API server that answers 503 to pod creation is an outage, not the endpoint’s failure: it waits, then starts', async () => {
  const gateway = await startGateway('proxy');
  apiProxy.outage = true;
  apiProxy.refused = 0;
  const id = await createEndpoint(gateway);
  // Several passes meet the outage; none fails the endpoint (before, the first made it FAILED with WORKLOAD_INIT_SETTINGS_ERROR).
  await waitFor('pod creation refused on several passes', async () => apiProxy.refused >= 3, 30_000);
  const during = await statusOf(db.sql, id);
  expect(during.status).toBe('INITIALIZING');
  expect(during.errorCode).toBeNull();
  expect(podsOf(id)).toEqual([]);
  apiProxy.outage = false;
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
  await gateway.stop();
}, 180_000);

test('a gateway killed while its pod starts: the next gateway adopts that pod, serves from it, and starts no other', async () => {
  const a = await startGateway();
  const id = await createEndpoint(a);

  // The engine container runs (the model fetched) but is not ready yet: frozen now, it cannot become ready under A.
  const { name, pid } = await waitFor(
    "the pod's engine process",
    async () => {
      const pod = podsOf(id)[0];
      const podName = (pod?.metadata as { name?: string } | undefined)?.name;
      const enginePid = podName ? kube.pid(NS, podName, 'engine') : undefined;
      return podName && enginePid ? { name: podName, pid: enginePid } : undefined;
    },
    90_000,
  );
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

  const b = await startGateway();
  await waitFor(
    'RUNNING under gateway B',
    async () => {
      const s = await statusOf(db.sql, id);
      return s.status === 'RUNNING' && s.curr === 1 ? s : undefined;
    },
    90_000,
  ).catch(async (error: Error) => {
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
}, 240_000);
