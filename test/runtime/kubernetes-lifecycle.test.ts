/**
 * RUNTIME=kubernetes through a stand-in API server (test/support/kube) that
 * also schedules pods on simulated GPU nodes and runs their containers as
 * real local processes: the model fetcher (init container) downloads from
 * the stand-in hub into the cache volume, and the built-in engine serves on
 * the pod's own loopback address. The gateway is the real one, with the
 * real controller: every lifecycle action goes through pods.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  engineFetch,
  liveReplicaRows,
  startTestApp,
  stopAllReplicas,
  statusOf,
  statusTrail,
  TINY_REPO,
  waitFor,
  waitForStatus,
  type SeededUser,
  type TestApp,
} from '../support/app.js';
import { restClient, type SeededProject } from '../support/gateway.js';
import { endpointPods, kubernetesTestEnv } from '../support/kube-env.js';
import { startKubeStandIn, type KubeObject, type KubeStandIn } from '../support/kube/index.js';

const H100 = 'NVIDIA-H100-80GB-HBM3';
const NS = 'default';
let kube: KubeStandIn;
let t: TestApp;
let alice: SeededUser;
let project: SeededProject;
let cacheDir: string;
let kubeConfig: KubeConfig;

beforeAll(async () => {
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kube-models-'));
  kube = await startKubeStandIn({
    cwd: process.cwd(),
    probePeriodMs: 100,
    nodes: [
      { name: 'gpu-a', gpus: 1, labels: { 'nvidia.com/gpu.product': H100 } },
      // Counted as capacity (its labels match), but its taint is not tolerated: pods placed by the scheduler never land there.
      {
        name: 'gpu-b',
        gpus: 1,
        labels: { 'nvidia.com/gpu.product': H100 },
        taints: [{ key: 'team', value: 'other', effect: 'NoSchedule' }],
      },
    ],
  });
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kube.writeKubeconfig(NS));
  t = await startTestApp({
    kubeConfig,
    env: kubernetesTestEnv(NS, cacheDir),
    controller: { crashLoop: { failures: 3, windowMs: 60_000, backoffBaseMs: 500, hangMs: 10_000 }, orphanReapIntervalMs: 1000 },
  });
  alice = await t.seed.user();
  project = await alice.project('kube');
}, 120_000);

afterAll(async () => {
  await t?.app.close();
  if (t) await stopAllReplicas(t.sql, t.app);
  await kube?.close();
  await rm(cacheDir, { recursive: true, force: true });
});

const podsOf = (endpointId: string) => endpointPods(kube, NS, endpointId);
const livePodsOf = (endpointId: string) => endpointPods(kube, NS, endpointId, true);
const scheduledCondition = (pod: KubeObject) =>
  (pod.status as { conditions?: { type: string; message?: string }[] } | undefined)?.conditions?.find((c) => c.type === 'PodScheduled');

async function chat(endpointId: string) {
  // The gateway's address changes when it restarts.
  return restClient(t.url, alice.key)('POST', '/dedicated/v1/chat/completions', {
    model: endpointId,
    messages: [{ role: 'user', content: 'Hello' }],
    max_tokens: 4,
  });
}

/** Waits until one of the endpoint's pods shows its image pull failing (`reasons`: the kubelet's reasons that count). */
const pullFailing = (endpointId: string, reasons = 'ErrImagePull|ImagePullBackOff', timeoutMs?: number) =>
  waitFor(
    'the pull failing',
    async () =>
      livePodsOf(endpointId).some((p) =>
        JSON.stringify((p as { status?: unknown }).status ?? {}).match(new RegExp(`"reason":"(${reasons})"`)),
      ),
    timeoutMs,
  );

/**
 * An endpoint whose image pull fails for a while (`failing` waits until it does; the failure is ended here): the kubelet's
 * retries get the pull deadline (8 s here), counted from the first failure, so the endpoint still waits in its phase
 * 1.5 s later; once the registry is back it serves, with no error code.
 */
async function servesAfterPullFailures(failing: (id: string) => Promise<unknown>) {
  let id: string;
  try {
    id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await failing(id);
    // Before, the first ErrImagePull failed the endpoint.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await statusOf(t.sql, id)).status).toBe('INITIALIZING');
  } finally {
    kube.setImagePullFailure('dedicated-endpoints:test', false);
  }
  const running = await waitForStatus(t.sql, id, 'RUNNING', 90_000);
  expect(running.errorCode).toBeNull();
  await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
}

/** The endpoint answers a chat; then it is deleted, and its pods go (the owner reference's garbage collection). */
async function servesThenDeleted(endpointId: string) {
  expect((await chat(endpointId)).status).toBe(200);
  await deleteAndWaitGone(endpointId);
}

async function deleteAndWaitGone(endpointId: string) {
  expect((await alice.rest('DELETE', `/dedicated/beta/endpoint/${endpointId}`)).status).toBe(200);
  await waitFor('the deleted endpoint’s pods to be gone', async () => podsOf(endpointId).length === 0, 60_000);
}

describe('an endpoint on Kubernetes', () => {
  let id: string;

  test('starts as one pod: fetched by its init container, served from the pod address, phases reported on the way', async () => {
    id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    const trail = await statusTrail(t.sql, id);
    expect(trail).toContain('INITIALIZING DOWNLOADING_MODEL');
    expect(trail).toContain('INITIALIZING ENGINE_INITIALIZING');

    const [replica] = await liveReplicaRows(t.sql, id);
    const pods = livePodsOf(id);
    expect(pods).toHaveLength(1);
    const pod = pods[0] as {
      metadata: { name: string; labels: Record<string, string>; ownerReferences: { kind: string; name: string }[] };
      spec: { restartPolicy: string; nodeName: string; containers: { resources: { limits: Record<string, string> } }[] };
      status: { podIP: string };
    };
    expect(pod.metadata.labels['dedicated-endpoints.io/replica']).toBe(replica!.id);
    expect(pod.spec.restartPolicy).toBe('Never');
    expect(pod.spec.nodeName).toBe('gpu-a');
    expect(pod.spec.containers[0]!.resources.limits['nvidia.com/gpu']).toBe('1');
    expect(pod.metadata.ownerReferences[0]).toMatchObject({ kind: 'Secret' });
    // The gateway dials the pod, at its own address and declared port.
    expect(replica!.address).toBe(`http://${pod.status.podIP}:8000`);
    expect(pod.status.podIP).not.toBe('127.0.0.1');

    const answer = await chat(id);
    expect(answer.status).toBe(200);
    expect(answer.body.choices[0].message).toMatchObject({ role: 'assistant' });
  }, 180_000);

  test('a pod OOM-killed is a death: replaced by a new pod under the crash policy, the endpoint serves again', async () => {
    const [before] = await liveReplicaRows(t.sql, id);
    const podName = (livePodsOf(id)[0]!.metadata as { name: string }).name;
    kube.oomKill(NS, podName);
    const replacement = await waitFor(
      'a replacement replica',
      async () => {
        const rows = await liveReplicaRows(t.sql, id);
        return rows.find((r) => r.id !== before!.id && r.state === 'READY');
      },
      90_000,
    );
    const [dead] = await t.sql<{ state: string; last_error: string }[]>`SELECT state, last_error FROM replicas WHERE id = ${before!.id}`;
    expect(dead!.state).toBe('FAILED');
    expect(replacement.address).toMatch(/^http:\/\/127\.\d+\.\d+\.\d+:8000$/);
    expect((await chat(id)).status).toBe(200);
  }, 180_000);

  test('sleep deletes the pod; a wake creates a new one; terminate deletes it again', async () => {
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`)).status).toBe(200);
    await waitForStatus(t.sql, id, 'SLEEPING', 60_000);
    await waitFor('the pods to be gone', async () => livePodsOf(id).length === 0);

    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`)).status).toBe(200);
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    expect(livePodsOf(id)).toHaveLength(1);

    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`)).status).toBe(200);
    await waitForStatus(t.sql, id, 'TERMINATED', 60_000);
    await waitFor('the pods to be gone', async () => livePodsOf(id).length === 0);
  }, 180_000);
});

describe('updates, scale and failures on Kubernetes', () => {
  test('an update rolls out a new pod and deletes the old, also when the watches are cut and expire (410) mid-rollout', async () => {
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    const [old] = await liveReplicaRows(t.sql, id);
    const updated = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 2 } });
    expect(updated.status).toBe(200);
    await waitFor('the new version to start', async () => (await liveReplicaRows(t.sql, id)).some((r) => r.version_index === 1));
    kube.expireHistory({ answer: 'http' });
    kube.cutWatches();
    const replaced = await waitFor(
      'the rollout to finish',
      async () => {
        const rows = await liveReplicaRows(t.sql, id);
        return rows.length === 1 && rows[0]!.version_index === 1 && rows[0]!.state === 'READY' ? rows[0] : undefined;
      },
      90_000,
    );
    expect(replaced.id).not.toBe(old!.id);
    await waitForStatus(t.sql, id, 'RUNNING', 60_000);
    await waitFor('one pod, of version 1', async () => {
      const pods = livePodsOf(id);
      return (
        pods.length === 1 && (pods[0]!.metadata as { labels: Record<string, string> }).labels['dedicated-endpoints.io/version'] === '1'
      );
    });
    expect((await chat(id)).status).toBe(200);
    kube.expireHistory({ answer: 'event' });
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 180_000);

  test('a request to a sleeping endpoint is held while its pod starts, then answered', async () => {
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 0, maxReplica: 1, cooldownPeriod: 600 },
    });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
    await waitForStatus(t.sql, id, 'SLEEPING', 60_000);
    await waitFor('the pods to be gone', async () => livePodsOf(id).length === 0);
    const answer = await chat(id);
    expect(answer.status).toBe(200);
    expect(livePodsOf(id)).toHaveLength(1);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 180_000);

  test('an image pull that fails for a while (a registry’s outage) is retried: the endpoint waits in its phase, then serves', async () => {
    // Failing from the pod's first pull.
    kube.setImagePullFailure('dedicated-endpoints:test', true);
    await servesAfterPullFailures((id) => pullFailing(id));
  }, 120_000);

  test('a pull that took longer than the deadline, then fails for a while, gets the deadline’s retries: the endpoint then serves', async () => {
    // A large image: its pull takes 12 s, past the deadline (8 s here), and fails at its end (the registry went away).
    kube.setImagePullDelay('dedicated-endpoints:test', 12_000);
    await servesAfterPullFailures(async (id) => {
      await waitFor('the pod scheduled', async () => livePodsOf(id).some((p) => (p as { spec?: { nodeName?: string } }).spec?.nodeName));
      await new Promise((resolve) => setTimeout(resolve, 6000));
      kube.setImagePullFailure('dedicated-endpoints:test', true);
      await pullFailing(id, 'ErrImagePull', 30_000);
    });
  }, 150_000);

  test('an image that cannot be pulled fails the endpoint with WORKLOAD_INIT_SETTINGS_ERROR and the kubelet’s reason', async () => {
    kube.setImagePullFailure('dedicated-endpoints:test', true);
    try {
      const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
      const failed = await waitForStatus(t.sql, id, 'FAILED', 60_000);
      expect(failed.errorCode).toBe('WORKLOAD_INIT_SETTINGS_ERROR');
      const [event] = await t.sql<{ detail: { message: string } }[]>`
        SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} ORDER BY id DESC LIMIT 1`;
      expect(event!.detail.message).toMatch(/ErrImagePull|ImagePullBackOff/);
      // The kubelet's own message names the image (and, on a cluster, its registry's host): the gateway's log has it.
      expect(event!.detail.message).not.toContain('dedicated-endpoints:test');
      await waitFor('the failed pod to be deleted', async () => livePodsOf(id).length === 0);
      await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
    } finally {
      kube.setImagePullFailure('dedicated-endpoints:test', false);
    }
  }, 120_000);

  test('an engine that stops answering is killed as a death (counted by the crash policy), not taken for a disruption', async () => {
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    const [hung] = await t.sql<{ id: string }[]>`SELECT id FROM replicas WHERE endpoint_id = ${id} AND state = 'READY'`;
    const podName = (livePodsOf(id)[0]!.metadata as { name: string }).name;
    process.kill(kube.pid(NS, podName, 'engine')!, 'SIGSTOP');
    // No health answer for hangMs (10 s here): killed. Its pod is then gone, as a disrupted one is; it still counts.
    const ended = await waitFor(
      'the hung replica ended',
      async () => {
        const [row] = await t.sql<
          { state: string; last_error: string | null }[]
        >`SELECT state, last_error FROM replicas WHERE id = ${hung!.id}`;
        return row!.state === 'FAILED' || row!.state === 'STOPPED' ? row : undefined;
      },
      60_000,
    );
    expect(ended).toEqual({ state: 'FAILED', last_error: 'the engine process exited' });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 150_000);

  test('an engine that cannot load the weights: its ENGINE_ERROR code reaches the endpoint through the pod’s termination message', async () => {
    const id = await project.endpoint({ hfModelRepo: 'test-org/truncated-GGUF', autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    const failed = await waitForStatus(t.sql, id, 'FAILED', 90_000);
    expect(failed.errorCode).toBe('INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR');
    expect(await statusTrail(t.sql, id)).toContain('INITIALIZING DOWNLOADING_MODEL');
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 120_000);
});

describe('capacity on Kubernetes', () => {
  test("an unschedulable pod waits with the scheduler's reason, then starts once a GPU frees", async () => {
    const first = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(t.sql, first, 'RUNNING', 90_000);
    // The nodes' capacity says two H100s, but the second is tainted: the scheduler cannot place a second pod.
    const second = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    const waiting = await waitFor('the second endpoint to wait for a node', async () => {
      const [row] = await t.sql<{ detail: { message?: string } | null }[]>`
        SELECT detail FROM endpoint_events WHERE endpoint_id = ${second} AND phase = 'REQUESTING_VIRTUAL_MACHINE' ORDER BY id DESC LIMIT 1`;
      return row?.detail?.message ? row.detail.message : undefined;
    });
    expect(waiting).toContain('0/2 nodes are available');
    expect((await statusOf(t.sql, second)).phase).toBe('REQUESTING_VIRTUAL_MACHINE');
    const status = await waitFor('the wait reason on the status', async () => {
      const body = (await alice.rest('GET', `/dedicated/beta/endpoint/${second}/status`)).body as { waitReason?: string };
      return body.waitReason;
    });
    expect(status).toContain('0/2 nodes are available');

    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${first}/terminate`)).status).toBe(200);
    await waitForStatus(t.sql, second, 'RUNNING', 90_000);
    expect((await chat(second)).status).toBe(200);
    expect((await alice.rest('DELETE', `/dedicated/beta/endpoint/${second}`)).status).toBe(200);
    // Deleting the endpoint deletes its Secret, and with it (owner references) its pods.
    await waitFor('the deleted endpoint’s pods to be gone', async () => podsOf(second).length === 0, 60_000);
  }, 180_000);
});

describe('a GPU pool that scales from zero', () => {
  test('the pod is created although no node offers the GPU kind, waits with the scheduler’s reason, and starts on the node an autoscaler adds', async () => {
    // 1 × A100: no node has one. The pod must exist for a cluster autoscaler to see it and add a node.
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      instanceOptionId: 'ShbPuOs4tfGb',
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    });
    const waiting = await waitFor('the endpoint to wait for a node', async () => {
      const body = (await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`)).body as { phase?: string; waitReason?: string };
      return body.phase === 'REQUESTING_VIRTUAL_MACHINE' && body.waitReason ? body.waitReason : undefined;
    });
    expect(waiting).toContain("didn't match Pod's node affinity/selector");
    expect(livePodsOf(id)).toHaveLength(1);
    const [pod] = livePodsOf(id);
    // It waits: the pod is neither deleted nor created again while no node can take it.
    await new Promise((r) => setTimeout(r, 1500));
    expect(livePodsOf(id).map((p) => p.metadata.name)).toEqual([pod!.metadata.name]);
    expect((await statusOf(t.sql, id)).phase).toBe('REQUESTING_VIRTUAL_MACHINE');

    kube.addNode({ name: 'gpu-a100', gpus: 1, labels: { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB' } });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    expect(livePodsOf(id).map((p) => p.metadata.name)).toEqual([pod!.metadata.name]);
    await servesThenDeleted(id);
  }, 180_000);
});

describe('a scale-out on a full cluster', () => {
  test('waits for a node: its pod is kept, not deleted and created again, stopped if no longer wanted, and runs on the node that comes', async () => {
    kube.addNode({ name: 'gpu-h200-a', gpus: 1, labels: { 'nvidia.com/gpu.product': 'NVIDIA-H200' } });
    // 2 × (1 × H200) on a cluster that has one.
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      instanceOptionId: 'LnK1wTaKc7WO',
      autoscalingPolicy: { minReplica: 2, maxReplica: 2 },
    });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    const pending = await waitFor('the second pod to wait for a node', async () => {
      const pods = livePodsOf(id);
      const waiting = pods.filter((p) => !(p.spec as { nodeName?: string }).nodeName);
      // Seen once the scheduler has looked at it: a pod just created has no PodScheduled condition yet.
      return pods.length === 2 && waiting.length === 1 && scheduledCondition(waiting[0]!) ? waiting[0] : undefined;
    });
    expect(scheduledCondition(pending)?.message).toContain('Insufficient nvidia.com/gpu');
    await new Promise((r) => setTimeout(r, 1500));
    expect(
      livePodsOf(id)
        .map((p) => p.metadata.name)
        .sort(),
    ).toEqual(
      podsOf(id)
        .map((p) => p.metadata.name)
        .sort(),
    );
    expect(podsOf(id)).toHaveLength(2);
    const rows = await t.sql<{ state: string }[]>`SELECT state FROM replicas WHERE endpoint_id = ${id} ORDER BY state`;
    expect(rows.map((r) => r.state)).toEqual(['READY', 'STARTING']);
    expect((await statusOf(t.sql, id)).desired).toBe(2);

    // No longer wanted while it waits (the policy lowered): its pod is deleted, the endpoint wants one replica again.
    const scale = async (n: number) =>
      expect(
        (await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { autoscalingPolicy: { minReplica: n, maxReplica: n } })).status,
      ).toBe(200);
    await scale(1);
    await waitFor('the waiting pod to go', async () => podsOf(id).length === 1, 30_000);
    // Its row is marked once its pod is deleted (a moment after the pod is gone): STOPPED, not failed.
    const stopped = await waitFor('its row to end', async () => {
      const [row] = await t.sql<
        { state: string }[]
      >`SELECT state FROM replicas WHERE id = ${pending.metadata.labels['dedicated-endpoints.io/replica']}`;
      return row?.state === 'STARTING' ? undefined : row?.state;
    });
    expect(stopped).toBe('STOPPED');
    await waitFor('one replica wanted', async () => (await statusOf(t.sql, id)).desired === 1);

    await scale(2);
    const next = await waitFor('a new pod to wait for a node', async () =>
      livePodsOf(id).find((p) => !(p.spec as { nodeName?: string }).nodeName),
    );
    kube.addNode({ name: 'gpu-h200-b', gpus: 1, labels: { 'nvidia.com/gpu.product': 'NVIDIA-H200' } });
    await waitFor(
      'both replicas to serve',
      async () => (await liveReplicaRows(t.sql, id)).filter((r) => r.state === 'READY').length === 2,
      90_000,
    );
    expect(podsOf(id).map((p) => p.metadata.name)).toContain(next.metadata.name);
    await servesThenDeleted(id);
  }, 180_000);
});

describe('a scale-out on a full cluster, wanted no more', () => {
  test('the load that asked for it passes while its pod waits for a node: the pod is deleted, one replica is wanted again', async () => {
    kube.addNode({ name: 'gpu-b200-a', gpus: 1, labels: { 'nvidia.com/gpu.product': 'NVIDIA-B200' } });
    const id = await project.endpoint({
      hfModelRepo: TINY_REPO,
      instanceOptionId: '8GiQTLKfJNOr',
      autoscalingPolicy: { minReplica: 1, maxReplica: 2, cooldownPeriod: 1 },
      advanced: { max_batch_size: 1, max_token_count: 4096, max_input_length: 64 },
    });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    const [first] = await liveReplicaRows(t.sql, id);
    // Requests queued on the only replica (a batch of one): the autoscaler wants a second, which no node can take.
    const clients = new AbortController();
    const load = Array.from({ length: 4 }, () =>
      engineFetch(first!, '/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'go' }], max_tokens: 4000, temperature: 0 }),
        signal: clients.signal,
      })
        .then((r) => r.arrayBuffer())
        .catch(() => undefined),
    );
    const pending = await waitFor('a second pod to wait for a node', async () =>
      livePodsOf(id).find((p) => !(p.spec as { nodeName?: string }).nodeName),
    );
    expect((await statusOf(t.sql, id)).desired).toBe(2);
    clients.abort();
    await Promise.all(load);
    await waitFor('the waiting pod to go', async () => podsOf(id).length === 1, 60_000);
    const replicaId = (pending.metadata as { labels: Record<string, string> }).labels['dedicated-endpoints.io/replica']!;
    // Its row is marked once its pod is deleted (a moment after the pod is gone): STOPPED, not failed.
    const state = await waitFor('its row to end', async () => {
      const [row] = await t.sql<{ state: string }[]>`SELECT state FROM replicas WHERE id = ${replicaId}`;
      return row?.state === 'STARTING' ? undefined : row?.state;
    });
    expect(state).toBe('STOPPED');
    await waitFor('one replica wanted', async () => (await statusOf(t.sql, id)).desired === 1);
    expect((await liveReplicaRows(t.sql, id)).map((r) => r.id)).toEqual([first!.id]);
    await deleteAndWaitGone(id);
  }, 180_000);
});

/** A pod labelled as ours for `replicaId` (its name from it), with no replica row: as a gateway that died between the two leaves. */
async function createOrphanPod(replicaId: string): Promise<void> {
  await kubeConfig.makeApiClient(CoreV1Api).createNamespacedPod({
    namespace: NS,
    body: {
      metadata: {
        name: replicaId.replace(/_/g, '-'),
        labels: { 'app.kubernetes.io/managed-by': 'dedicated-endpoints', 'dedicated-endpoints.io/replica': replicaId },
      },
      spec: { restartPolicy: 'Never', containers: [{ name: 'engine', image: 'dedicated-endpoints:test', command: ['sleep', '600'] }] },
    },
  });
}

describe('orphans while the gateway runs', () => {
  test("a pod labelled as ours that appears later with no replica row (a create that committed after its gateway died) is deleted; the others' pods stay", async () => {
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    const podsBefore = livePodsOf(id).map((p) => (p.metadata as { uid: string }).uid);
    await createOrphanPod('rep_late_orphan');
    await waitFor('the late orphan to be deleted', async () => kube.pod(NS, 'rep-late-orphan') === undefined, 30_000);
    expect(livePodsOf(id).map((p) => (p.metadata as { uid: string }).uid)).toEqual(podsBefore);
    await servesThenDeleted(id);
  }, 180_000);
});

describe('a gateway restart on Kubernetes', () => {
  test('adopts the running pods: no pod is duplicated or orphaned, the endpoint keeps serving', async () => {
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(t.sql, id, 'RUNNING', 90_000);
    const [before] = await liveReplicaRows(t.sql, id);
    const podsBefore = livePodsOf(id).map((p) => (p.metadata as { uid: string }).uid);
    // A pod labelled as ours whose replica has no row (left by a gateway that died between the two).
    await createOrphanPod('rep_orphan');
    kube.cutWatches();
    kube.expireHistory();
    await t.restart();
    await waitFor('the orphaned pod to be deleted', async () => kube.pod(NS, 'rep-orphan') === undefined, 30_000);
    expect((await chat(id)).status).toBe(200);
    // A few controller passes later, the same replica and the same pod serve.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const after = await liveReplicaRows(t.sql, id);
    expect(after.map((r) => r.id)).toEqual([before!.id]);
    expect(livePodsOf(id).map((p) => (p.metadata as { uid: string }).uid)).toEqual(podsBefore);
    expect((await statusOf(t.sql, id)).status).toBe('RUNNING');
  }, 180_000);
});
