/**
 * The Kubernetes runtime's pooled API client (src/runtime/kubernetes/api-client.ts): calls share keep-alive
 * connections, and the pool closes an idle one before the server's keep-alive timeout would, so that no call goes
 * out on a connection the server is closing (an ECONNRESET, which the runtime reads as an API server outage). Pods are
 * created as plain JSON, the same body the generated client's serializer would send. And what a refusal means for a
 * start (api-failure.ts), on the client's own exceptions.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiException, KubeConfig, type V1Pod } from '@kubernetes/client-node';
// The generated client's serializer (not exported from the package's root): what its createNamespacedPod would send.
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { afterEach, expect, test } from 'vitest';
import { pooledCoreApi } from '../../src/runtime/kubernetes/api-client.js';
import { apiFailure } from '../../src/runtime/kubernetes/api-failure.js';
import { isStatus } from '../../src/runtime/kubernetes/endpoint-secrets.js';
import { replicaPod } from '../../src/runtime/kubernetes/pod-spec.js';
import { ReplicaStartError, RuntimeUnavailableError } from '../../src/runtime/runtime.js';
import { podContext, podLaunch } from '../support/kube-env.js';

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
  const { createPod, close } = pooledCoreApi(await listening(server));
  const create = () =>
    createPod('ml', { metadata: { name: 'rep-1' }, spec: { containers: [{ name: 'e', image: 'i' }] } }).then(() => undefined, apiFailure);
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

/** A replica's pod with every part the runtime may set: GPUs and their placement, Secrets, the cache volume, probes. */
function richPod(): V1Pod {
  const gpuMap = {
    H100: {
      nodeSelector: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' },
      tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
      requestsPerGpu: { cpu: '7.5', memory: '64Gi' },
    },
  };
  return replicaPod(
    podLaunch({
      versionIndex: 2,
      numGpu: 2,
      skipSpecialTokens: false,
      modelFile: { path: 'llama-Q4_K_M.gguf', sha256: 'f'.repeat(64), size: 4_000_000_000 },
    }),
    podContext({
      KUBERNETES_GPU_NODE_MAP: JSON.stringify(gpuMap),
      KUBERNETES_MODEL_CACHE: 'pvc:models',
      KUBERNETES_MODEL_CACHE_MAX_BYTES: '100Gi',
    }),
  );
}

test("a pod is created as plain JSON: the generated serializer's body, with the credentials, on the pool's connection; a refusal is the client's ApiException", async () => {
  const pod = richPod();
  // The runtime's pods are their own wire form: the generated client's serializer would send the same document.
  expect(JSON.parse(JSON.stringify(pod))).toEqual(ObjectSerializer.serialize(pod, 'V1Pod', ''));

  const received: { method?: string; url?: string; type?: string; auth?: string; body: unknown }[] = [];
  let connections = 0;
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      const body: unknown = JSON.parse(text);
      received.push({ method: req.method, url: req.url, type: req.headers['content-type'], auth: req.headers.authorization, body });
      if (received.length === 1) return res.writeHead(201, { 'content-type': 'application/json' }).end(text);
      const status = {
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        message: 'pods "rep-abc" already exists',
        reason: 'AlreadyExists',
        code: 409,
      };
      res.writeHead(409, { 'content-type': 'application/json' }).end(JSON.stringify(status));
    });
  });
  server.on('connection', () => connections++);
  const { createPod, close } = pooledCoreApi(await listening(server));
  try {
    await expect(createPod('ml', pod)).resolves.toBeUndefined();
    const conflict = await createPod('ml', pod).catch((error: unknown) => error);
    expect(conflict).toBeInstanceOf(ApiException);
    expect(isStatus(conflict, 409)).toBe(true);
    // The body as the generated client leaves it: the Status's JSON text.
    expect(JSON.parse((conflict as ApiException<string>).body)).toMatchObject({ reason: 'AlreadyExists', code: 409 });
    expect(received).toHaveLength(2);
    for (const request of received) {
      expect(request).toMatchObject({ method: 'POST', url: '/api/v1/namespaces/ml/pods', type: 'application/json', auth: 'Bearer t' });
      expect(request.body).toEqual(ObjectSerializer.serialize(pod, 'V1Pod', ''));
    }
    expect(connections).toBe(1);
  } finally {
    close();
  }
});
