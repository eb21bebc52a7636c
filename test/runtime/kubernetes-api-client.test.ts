/**
 * The Kubernetes runtime's pooled API client (src/runtime/kubernetes/api-client.ts): calls share keep-alive
 * connections, and the pool closes an idle one before the server's keep-alive timeout would, so that no call goes
 * out on a connection the server is closing (an ECONNRESET, which the runtime reads as an API server outage). And what
 * a refusal means for a start (api-failure.ts), on the client's own exceptions.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, expect, test } from 'vitest';
import { pooledCoreApi } from '../../src/runtime/kubernetes/api-client.js';
import { apiFailure } from '../../src/runtime/kubernetes/api-failure.js';
import { ReplicaStartError, RuntimeUnavailableError } from '../../src/runtime/runtime.js';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** An API server that answers every call with an empty pod list, and records when each connection opened and closed. */
async function apiServer(keepAliveMs: number) {
  const connections: { opened: number; closed?: number }[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: '1' }, items: [] }));
  });
  server.keepAliveTimeout = keepAliveMs;
  server.on('connection', (socket) => {
    const entry: { opened: number; closed?: number } = { opened: Date.now() };
    connections.push(entry);
    socket.on('close', () => (entry.closed = Date.now()));
  });
  return { kc: await listening(server), connections };
}

/** Listens on a free loopback port; a client configuration for it (a token user, namespace default). */
async function listening(server: http.Server): Promise<KubeConfig> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u', namespace: 'default' }],
    currentContext: 'x',
  });
  return kc;
}

test('calls share a connection; an idle one is closed by the pool before the server would close it', async () => {
  const { kc, connections } = await apiServer(10_000);
  const pooled = pooledCoreApi(kc, { idleMs: 300 });
  try {
    for (let i = 0; i < 3; i++) expect((await pooled.api.listNamespacedPod({ namespace: 'default' })).items).toEqual([]);
    expect(connections).toHaveLength(1);
    // Idle past the pool's 300 ms, far from the server's 10 s: the client closed it.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(connections[0]!.closed, 'the idle connection is closed').toBeDefined();
    expect(connections[0]!.closed! - connections[0]!.opened).toBeLessThan(5000);
    // The next call opens a new one.
    expect((await pooled.api.listNamespacedPod({ namespace: 'default' })).items).toEqual([]);
    expect(connections).toHaveLength(2);
  } finally {
    pooled.close();
  }
});

test("a refused pod create: a namespace's full ResourceQuota is an outage (retried with back-off), missing RBAC the settings'", async () => {
  const refusal = (message: string) => ({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: 'Forbidden',
    code: 403,
  });
  const answers = [
    refusal(
      'pods "rep-1" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8',
    ),
    refusal(
      'pods is forbidden: User "system:serviceaccount:ml:gateway" cannot create resource "pods" in API group "" in the namespace "ml"',
    ),
    refusal(
      'pods "rep-1" is forbidden: exceeded quota: gpu-quota, requested: requests.cpu=16,requests.nvidia.com/gpu=8, used: requests.cpu=0,requests.nvidia.com/gpu=0, limited: requests.cpu=64,requests.nvidia.com/gpu=4',
    ),
  ];
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify(answers.shift()));
  });
  const { api, close } = pooledCoreApi(await listening(server));
  const create = () =>
    api
      .createNamespacedPod({ namespace: 'ml', body: { metadata: { name: 'rep-1' }, spec: { containers: [{ name: 'e', image: 'i' }] } } })
      .then(() => undefined, apiFailure);
  const quota = await create();
  expect(quota).toBeInstanceOf(RuntimeUnavailableError);
  expect((quota as Error).message).toBe("the namespace's ResourceQuota has no room for the replica's pod");
  const rbac = await create();
  expect(rbac).toBeInstanceOf(ReplicaStartError);
  expect(rbac).toMatchObject({ code: 'WORKLOAD_INIT_SETTINGS_ERROR' });
  // More GPUs than the quota allows at all: no stop of another replica makes room, so it is the settings', not a wait.
  const never = await create();
  expect(never).toBeInstanceOf(ReplicaStartError);
  expect(never).toMatchObject({
    code: 'WORKLOAD_INIT_SETTINGS_ERROR',
    message: "the replica's pod asks for more than the namespace's ResourceQuota allows",
  });
  close();
});
