/**
 * Models on the Kubernetes runtime, through the stand-in API server (test/support/kube) and the stand-in W&B
 * registry (test/support/fake-wandb.ts): an endpoint of a W&B registry artifact whose pod's init container fetches
 * the artifact with the API key from the endpoint's Secret, then serves; a bad key in the Secret fails the start
 * with the code a local download reports; and the cache volume's bound (KUBERNETES_MODEL_CACHE_MAX_BYTES): a model
 * larger than the bound, and one that finds the bound held by a running replica's model, fail with
 * WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Pod as PodModel } from 'kubernetes-models/v1/Pod';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ConfigError } from '../../src/config-env.js';
import type { ReplicaLaunch } from '../../src/runtime/runtime.js';
import { EMPTY_DIR_HEADROOM_BYTES, endpointSecret, FETCH_CONTAINER, replicaPod } from '../../src/runtime/kubernetes/pod-spec.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { startTestApp, stopAllReplicas, statusTrail, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { kubernetesTestEnv, podContext, podLaunch } from '../support/kube-env.js';
import { FAKE_WANDB_KEY, startFakeWandb, type FakeWandb } from '../support/fake-wandb.js';
import { restClient, type SeededProject } from '../support/gateway.js';
import { expand } from '../support/kube/containers.js';
import { startKubeStandIn, type KubeStandIn } from '../support/kube/index.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';

const H100 = 'NVIDIA-H100-80GB-HBM3';
const NS = 'default';
const ROUTE = '/dedicated/endpoint/wandb-artifact-create';
const tiny = buildTinyGguf({ seed: 21 });
/** Room for one tiny model, not two. */
const BOUND = Math.floor(tiny.length * 1.5);

let kube: KubeStandIn;
let registry: FakeWandb;
let t: TestApp;
let alice: SeededUser;
let project: SeededProject;
let cacheDir: string;
let core: CoreV1Api;

beforeAll(async () => {
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kube-wandb-'));
  registry = await startFakeWandb({
    artifacts: [
      {
        org: 'acme',
        registry: 'model',
        name: 'tiny-llama',
        versions: [{ version: 'v0', aliases: ['latest'], files: { 'tiny-Q8_0.gguf': tiny } }],
      },
      {
        org: 'acme',
        registry: 'model',
        name: 'second',
        versions: [{ version: 'v0', files: { 'second-Q8_0.gguf': buildTinyGguf({ seed: 22 }) } }],
      },
      { org: 'acme', registry: 'model', name: 'huge', versions: [{ version: 'v0', files: { 'huge-Q8_0.gguf': Buffer.alloc(BOUND + 1) } }] },
    ],
  });
  kube = await startKubeStandIn({
    cwd: process.cwd(),
    probePeriodMs: 100,
    nodes: [{ name: 'gpu-a', gpus: 4, labels: { 'nvidia.com/gpu.product': H100 } }],
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kube.writeKubeconfig(NS));
  core = kubeConfig.makeApiClient(CoreV1Api);
  t = await startTestApp({
    kubeConfig,
    env: kubernetesTestEnv(NS, cacheDir, {
      KUBERNETES_MODEL_CACHE_MAX_BYTES: String(BOUND),
      WANDB_BASE_URL: registry.url,
      WANDB_API_KEY: FAKE_WANDB_KEY,
    }),
  });
  alice = await t.seed.user();
  project = await alice.project('kube-wandb');
}, 120_000);

afterAll(async () => {
  await t?.app.close();
  if (t) await stopAllReplicas(t.sql, t.app);
  await kube?.close();
  await registry?.close();
  await rm(cacheDir, { recursive: true, force: true });
});

type Pod = {
  metadata: { name: string; labels: Record<string, string>; deletionTimestamp?: string };
  spec: {
    initContainers: {
      name: string;
      args: string[];
      env: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
    }[];
    containers: { livenessProbe?: { exec: { command: string[] } } }[];
  };
};
const livePodsOf = (endpointId: string) =>
  (kube.pods(NS) as unknown as Pod[]).filter(
    (p) => p.metadata.labels['dedicated-endpoints.io/endpoint'] === endpointId && !p.metadata.deletionTimestamp,
  );

async function createFromArtifact(name: string): Promise<string> {
  const res = await alice.rest('POST', ROUTE, {
    wandbArtifactVersionName: name,
    projectId: project.id,
    accelerator: { type: 'H100', count: 1 },
  });
  expect(res.status).toBe(200);
  return res.body.endpointId as string;
}

async function lastMessage(id: string): Promise<string> {
  const [event] = await t.sql<{ detail: { message?: string } | null }[]>`
    SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} AND error_code IS NOT NULL ORDER BY id DESC LIMIT 1`;
  return event?.detail?.message ?? '';
}

// First: the W&B tests below restart the gateway (its address changes; the seeded clients keep the old one).
describe('a start cut while it resolves its model', () => {
  test('a terminate while the hub holds the resolution (Retry-After) cuts it: no more hub requests, no pod', async () => {
    const repo = 'test-org/fault-GGUF';
    t.hub.setFault({ type: 'rate-limit', retryAfter: 3 }, { repo, times: 1 });
    try {
      const id = await project.endpoint({ hfModelRepo: repo, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
      const ofRepo = () => t.hub.requests.filter((r) => r.path.includes(repo));
      await expect.poll(() => ofRepo().some((r) => r.status === 429), { timeout: 30_000 }).toBe(true);
      expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`)).status).toBe(200);
      await waitForStatus(t.sql, id, 'TERMINATED');
      const seen = ofRepo().length;
      // Past the Retry-After: the start, cut, neither asked the hub again nor created a pod.
      await new Promise((resolve) => setTimeout(resolve, 4500));
      expect(ofRepo()).toHaveLength(seen);
      expect(
        kube.pods(NS).filter((p) => (p.metadata as { labels: Record<string, string> }).labels['dedicated-endpoints.io/endpoint'] === id),
      ).toEqual([]);
      const [replica] = await t.sql<{ state: string }[]>`SELECT state FROM replicas WHERE endpoint_id = ${id}`;
      expect(replica?.state).toBe('STOPPED');
    } finally {
      t.hub.setFault(null);
    }
  }, 60_000);
});

describe('a W&B registry artifact on Kubernetes', () => {
  let id: string;

  test("the pod's init container fetches the artifact with the Secret's API key, and the engine serves it", async () => {
    id = await createFromArtifact('acme/model/tiny-llama:latest');
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    expect(await statusTrail(t.sql, id)).toContain('INITIALIZING DOWNLOADING_MODEL');

    const [pod] = livePodsOf(id);
    const fetcher = pod!.spec.initContainers.find((c) => c.name === FETCH_CONTAINER)!;
    // Pinned to the version `latest` resolved to, when the gateway resolved it.
    expect(fetcher.args.slice(0, 2)).toEqual(['--artifact', 'acme/model/tiny-llama:v0']);
    expect(fetcher.args).toContain('--max-bytes');
    expect(fetcher.env).toContainEqual({ name: 'WANDB_BASE_URL', value: registry.url });
    const key = fetcher.env.find((e) => e.name === 'WANDB_API_KEY')!.valueFrom!.secretKeyRef!;
    const secret = await core.readNamespacedSecret({ name: key.name, namespace: NS });
    expect(Buffer.from(secret.data![key.key]!, 'base64').toString()).toBe(FAKE_WANDB_KEY);
    // The bytes were downloaded from W&B by the pod (the gateway only resolves), with the key.
    const downloads = registry.requests.filter((r) => r.route === 'download');
    expect(downloads.length).toBeGreaterThan(0);
    expect(downloads.every((r) => r.authorization?.startsWith('Basic '))).toBe(true);

    // The pod holds a lease on the file it serves, refreshed by its engine container's heartbeat probe.
    const lease = `${NS}.${pod!.metadata.name}`;
    const [blob] = await readdir(path.join(cacheDir, 'blobs'));
    expect((await readFile(path.join(cacheDir, 'leases', lease), 'utf8')).trim()).toBe(blob);
    expect(pod!.spec.containers[0]!.livenessProbe!.exec.command.at(-1)).toBe(path.join(cacheDir, 'leases', lease));

    const answer = await restClient(t.url, alice.key)('POST', '/dedicated/v1/chat/completions', {
      model: id,
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: 4,
    });
    expect(answer.status).toBe(200);
    expect(answer.body.choices[0].message).toMatchObject({ role: 'assistant' });
  }, 180_000);

  test('a model larger than the bound fails with WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR before any byte is fetched', async () => {
    const before = registry.requests.filter((r) => r.route === 'download').length;
    const huge = await createFromArtifact('acme/model/huge:v0');
    const failed = await waitForStatus(t.sql, huge, 'FAILED', 90_000);
    expect(failed.errorCode).toBe('WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR');
    expect(await lastMessage(huge)).toContain("is larger than the model cache's bound (KUBERNETES_MODEL_CACHE_MAX_BYTES");
    expect(registry.requests.filter((r) => r.route === 'download').length).toBe(before);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${huge}`);
  }, 120_000);

  test("a model that finds the bound held by a running replica's model fails, and leaves that model in place", async () => {
    const second = await createFromArtifact('acme/model/second:v0');
    const failed = await waitForStatus(t.sql, second, 'FAILED', 90_000);
    expect(failed.errorCode).toBe('WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR');
    expect(await lastMessage(second)).toContain('does not fit in the model cache');
    expect(await readdir(path.join(cacheDir, 'blobs'))).toHaveLength(1);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${second}`);
  }, 120_000);

  test("a gateway restarted with a revoked W&B key writes it into the endpoint's Secret; the pod's fetch fails with WORKLOAD_INIT_INVALID_TOKEN_ERROR", async () => {
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`)).status).toBe(200);
    await waitForStatus(t.sql, id, 'SLEEPING', 60_000);
    await waitFor('the pods to be gone', async () => livePodsOf(id).length === 0);
    // The gateway restarted with a key W&B has since revoked: it writes that key into the endpoint's Secret (the
    // engines' token kept) before its next pod starts.
    const secretName = (await core.listNamespacedSecret({ namespace: NS })).items.find(
      (s) => s.metadata?.labels?.['dedicated-endpoints.io/endpoint'] === id,
    )!.metadata!.name!;
    const keyIn = async () => {
      const secret = await core.readNamespacedSecret({ name: secretName, namespace: NS });
      return Buffer.from(secret.data!['wandb-api-key']!, 'base64').toString('utf8');
    };
    expect(await keyIn()).toBe(FAKE_WANDB_KEY);
    await t.restart({ WANDB_API_KEY: 'revoked-key' });
    // The gateway listens on a new address after its restart.

    // The wake starts a pod for the version resolved before: its fetcher is the one that talks to W&B.
    expect((await restClient(t.url, alice.key)('PUT', `/dedicated/beta/endpoint/${id}/wake`)).status).toBe(200);
    const failed = await waitForStatus(t.sql, id, 'FAILED', 90_000);
    expect(await keyIn()).toBe('revoked-key');
    expect(failed.errorCode).toBe('WORKLOAD_INIT_INVALID_TOKEN_ERROR');
    expect(await lastMessage(id)).toContain('W&B rejected the API key (401)');
    const revoked = `Basic ${Buffer.from('api:revoked-key').toString('base64')}`;
    expect(registry.requests.some((r) => r.authorization === revoked)).toBe(true);
    await restClient(t.url, alice.key)('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 180_000);
});

describe('the pod of a W&B artifact, and the bound, as specified', () => {
  // A hostPath cache's pod prepares the directory first (kubernetes-pod-security.test.ts).
  const fetcherOf = (pod: ReturnType<typeof replicaPod>) => pod.spec!.initContainers!.find((c) => c.name === FETCH_CONTAINER)!;
  const launch = (model: Pick<ReplicaLaunch, 'modelRepo' | 'modelRevision'>) => podLaunch(model);
  const context = podContext;

  test('an artifact: the fetcher reads the pinned version with the Secret key; an emptyDir gets the bound as its sizeLimit', () => {
    const pod = replicaPod(
      launch({ modelRepo: 'acme/model/llama:latest', modelRevision: 'v3' }),
      context({ KUBERNETES_MODEL_CACHE: 'emptyDir', KUBERNETES_MODEL_CACHE_MAX_BYTES: '20G' }),
    );
    expect(() => new PodModel(pod as never).validate()).not.toThrow();
    const fetcher = fetcherOf(pod);
    const link = '/models/links/wandb/acme/model/llama/v3/llama-Q4_K_M.gguf';
    expect(fetcher.args).toEqual([
      ...['--artifact', 'acme/model/llama:v3', '--file', 'llama-Q4_K_M.gguf', '--size', '4000000000'],
      ...['--cache-dir', '/models', '--link', link, '--lease', 'ml.rep-abc', '--max-bytes', String(20 * 2 ** 30)],
    ]);
    expect(fetcher.env).toEqual([
      { name: 'WANDB_BASE_URL', value: 'https://api.wandb.ai' },
      { name: 'WANDB_API_KEY', valueFrom: { secretKeyRef: { name: 'ep-xyz-engine', key: 'wandb-api-key', optional: true } } },
    ]);
    const engine = pod.spec!.containers[0]!;
    expect(engine.args).toContain(link);
    expect(engine.livenessProbe!.exec!.command).toEqual(['sh', '-c', 'touch -c "$0" || true', '/models/leases/ml.rep-abc']);
    expect(pod.spec!.volumes!.find((v) => v.name === 'models')).toEqual({
      name: 'models',
      emptyDir: { sizeLimit: String(20 * 2 ** 30 + EMPTY_DIR_HEADROOM_BYTES) },
    });
  });

  test('a hub repository on a hostPath without a bound: as before, plus its lease', () => {
    const pod = replicaPod(launch({ modelRepo: 'acme/llama-GGUF', modelRevision: 'c'.repeat(40) }), context({}));
    expect(() => new PodModel(pod as never).validate()).not.toThrow();
    const fetcher = fetcherOf(pod);
    expect(fetcher.args!.slice(0, 4)).toEqual(['--repo', 'acme/llama-GGUF', '--commit', 'c'.repeat(40)]);
    expect(fetcher.args).not.toContain('--max-bytes');
    expect(fetcher.args).toContain('ml.rep-abc');
    expect(fetcher.env!.map((e) => e.name)).toEqual(['HF_ENDPOINT', 'HF_TOKEN']);
    expect(pod.spec!.volumes!.find((v) => v.name === 'models')!.hostPath).toBeDefined();
    expect(pod.spec!.automountServiceAccountToken).toBe(false);
  });

  test("a model file named like a $(VAR) reference reaches the containers as named: the Secret's tokens are not expanded into it", () => {
    const hostile = '$(WANDB_API_KEY)-$$-$(HF_TOKEN)-$.gguf';
    const vars = new Map([
      ['WANDB_API_KEY', 'SECRET-KEY'],
      ['HF_TOKEN', 'SECRET-TOKEN'],
      ['POD_IP', '10.0.0.7'],
    ]);
    const asRun = (words: readonly string[]) => words.map((word) => expand(word, vars));
    const model = {
      ...launch({ modelRepo: 'acme/llama-GGUF', modelRevision: 'c'.repeat(40) }),
      modelFile: { path: hostile, sha256: null, size: 1 },
    };
    const pod = replicaPod(model, context({}));
    const link = `/models/links/${'c'.repeat(40)}/${hostile}`;
    const fetcher = asRun(fetcherOf(pod).args!);
    expect(fetcher.slice(4, 6)).toEqual(['--file', hostile]);
    expect(fetcher).toContain(link);
    const engine = asRun(pod.spec!.containers[0]!.args!);
    expect(engine[engine.indexOf('--model') + 1]).toBe(link);
    expect(engine[engine.indexOf('--host') + 1]).toBe('10.0.0.7'); // the gateway's own reference is still expanded
    expect(JSON.stringify(pod)).not.toMatch(/SECRET/);
    // An operator's template keeps its own references; the values put into it do not expand.
    const templated = replicaPod(model, { ...context({}), engineTemplate: 'serve {model} --host $(POD_IP) --port {port}' });
    expect(asRun([templated.spec!.containers[0]!.command![0]!, ...templated.spec!.containers[0]!.args!])).toEqual([
      'serve',
      link,
      '--host',
      '10.0.0.7',
      '--port',
      '8000',
    ]);
  });

  test("the GPU map's requestsPerGpu: the engine requests that CPU and memory per GPU; a malformed one is refused by name", () => {
    const map = (h100: object) => JSON.stringify({ H100: { nodeSelector: { 'nvidia.com/gpu.product': 'H' }, ...h100 } });
    const twoGpus = { ...launch({ modelRepo: 'acme/llama-GGUF', modelRevision: 'c'.repeat(40) }), numGpu: 2 };
    const pod = replicaPod(twoGpus, context({ KUBERNETES_GPU_NODE_MAP: map({ requestsPerGpu: { cpu: '7.5', memory: '64Gi' } }) }));
    expect(() => new PodModel(pod as never).validate()).not.toThrow();
    expect(pod.spec!.containers[0]!.resources).toEqual({ limits: { 'nvidia.com/gpu': '2' }, requests: { cpu: '15', memory: '128Gi' } });
    // Without it, the GPUs alone (a BestEffort pod, as before).
    expect(replicaPod(twoGpus, context({})).spec!.containers[0]!.resources).toEqual({ limits: { 'nvidia.com/gpu': '2' } });
    for (const bad of [{ cpu: '8 cores' }, { memory: '64 GB' }, { gpu: '1' }, { cpu: 8 }, 'lots'])
      expect(() => context({ KUBERNETES_GPU_NODE_MAP: map({ requestsPerGpu: bad }) }), JSON.stringify(bad)).toThrow(
        /KUBERNETES_GPU_NODE_MAP.*requestsPerGpu/,
      );
  });

  test("the endpoint's Secret carries the W&B key when the gateway has one", () => {
    expect(endpointSecret('ep_1', 'tok', { wandbApiKey: 'k' }).stringData).toEqual({ 'engine-token': 'tok', 'wandb-api-key': 'k' });
  });

  test('KUBERNETES_MODEL_CACHE_MAX_BYTES: a size with a unit, more than 0; otherwise an error naming it and the rule', () => {
    const read = (value: string) =>
      readKubernetesSettings({ ENGINE_IMAGE: 'img:1', KUBERNETES_MODEL_CACHE_MAX_BYTES: value }).modelCacheMaxBytes;
    expect(read('500G')).toBe(500 * 2 ** 30);
    expect(read('')).toBeUndefined();
    for (const bad of ['0', 'lots', '-5G']) {
      expect(() => read(bad)).toThrow(ConfigError);
      expect(() => read(bad)).toThrow(/KUBERNETES_MODEL_CACHE_MAX_BYTES/);
    }
  });
});
