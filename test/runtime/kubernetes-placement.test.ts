/**
 * RUNTIME=kubernetes, as kubernetes-lifecycle.test.ts runs it (test/support/kube/suite-lifecycle.ts: the stand-in API
 * server, its kubelet running real engines, the real gateway), on a cluster of its own: how a pod gets placed and
 * started. A wake on a request, image pulls that fail (the stand-in's pull failures hold for every pod of the cluster,
 * so they are kept to this file), and pods that wait for a node: a GPU pool that scales from zero, and scale-outs on
 * a full cluster.
 */
import { describe, expect, test } from 'vitest';
import { engineFetch, liveReplicaRows, statusOf, TINY_REPO, waitFor, waitForStatus } from '../support/app.js';
import { scheduledCondition, useLifecycleSuite } from '../support/kube/suite-lifecycle.js';

const IMAGE = 'dedicated-endpoints:test';
const s = useLifecycleSuite({
  hangMs: 10_000,
  // The kubelet's retries of a failing pull end a start after 5 s here (production: 3 minutes): the tests of a pull
  // that fails for a while look 1.5 s after its first failure, with room to spare on a slow machine.
  env: { KUBERNETES_IMAGE_PULL_DEADLINE_MS: '5000' },
});
const { chat, deleteAndWaitGone, livePodsOf, podsOf, servesThenDeleted } = s;

// The tests up to the image pulls have endpoints and nodes of their own (the wake runs on gpu-a, the others on
// nodes of GPU kinds no other test asks for): they run concurrently, so that their engines' starts and the waits
// that see nothing happen overlap. The image pulls come after them, one at a time: a failing pull holds for every
// pod of the cluster.
test.concurrent(
  'a request to a sleeping endpoint is held while its pod starts, then answered',
  async () => {
    const id = await s.project.endpoint({
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 0, maxReplica: 1, cooldownPeriod: 600 },
    });
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    await s.alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
    await waitForStatus(s.t.sql, id, 'SLEEPING', 60_000);
    await waitFor('the pods to be gone', async () => livePodsOf(id).length === 0);
    const answer = await chat(id);
    expect(answer.status).toBe(200);
    expect(livePodsOf(id)).toHaveLength(1);
    await s.alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  },
  180_000,
);

describe.concurrent('a GPU pool that scales from zero', () => {
  test('the pod is created although no node offers the GPU kind, waits with the scheduler’s reason, and starts on the node an autoscaler adds', async () => {
    // 1 × A100: no node has one. The pod must exist for a cluster autoscaler to see it and add a node.
    const id = await s.project.endpoint({
      hfModelRepo: TINY_REPO,
      instanceOptionId: 'ShbPuOs4tfGb',
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    });
    const waiting = await waitFor('the endpoint to wait for a node', async () => {
      const body = (await s.alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`)).body as { phase?: string; waitReason?: string };
      return body.phase === 'REQUESTING_VIRTUAL_MACHINE' && body.waitReason ? body.waitReason : undefined;
    });
    expect(waiting).toContain("didn't match Pod's node affinity/selector");
    expect(livePodsOf(id)).toHaveLength(1);
    const [pod] = livePodsOf(id);
    // It waits: the pod is neither deleted nor created again while no node can take it.
    await new Promise((r) => setTimeout(r, 1500));
    expect(livePodsOf(id).map((p) => p.metadata.name)).toEqual([pod!.metadata.name]);
    expect((await statusOf(s.t.sql, id)).phase).toBe('REQUESTING_VIRTUAL_MACHINE');

    s.kube.addNode({ name: 'gpu-a100', gpus: 1, labels: { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB' } });
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    expect(livePodsOf(id).map((p) => p.metadata.name)).toEqual([pod!.metadata.name]);
    await servesThenDeleted(id);
  }, 180_000);
});

describe.concurrent('a scale-out on a full cluster', () => {
  test('waits for a node: its pod is kept, not deleted and created again, stopped if no longer wanted, and runs on the node that comes', async () => {
    s.kube.addNode({ name: 'gpu-h200-a', gpus: 1, labels: { 'nvidia.com/gpu.product': 'NVIDIA-H200' } });
    // 2 × (1 × H200) on a cluster that has one.
    const id = await s.project.endpoint({
      hfModelRepo: TINY_REPO,
      instanceOptionId: 'LnK1wTaKc7WO',
      autoscalingPolicy: { minReplica: 2, maxReplica: 2 },
    });
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
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
    const rows = await s.t.sql<{ state: string }[]>`SELECT state FROM replicas WHERE endpoint_id = ${id} ORDER BY state`;
    expect(rows.map((r) => r.state)).toEqual(['READY', 'STARTING']);
    expect((await statusOf(s.t.sql, id)).desired).toBe(2);

    // No longer wanted while it waits (the policy lowered): its pod is deleted, the endpoint wants one replica again.
    const scale = async (n: number) =>
      expect(
        (await s.alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { autoscalingPolicy: { minReplica: n, maxReplica: n } })).status,
      ).toBe(200);
    await scale(1);
    await waitFor('the waiting pod to go', async () => podsOf(id).length === 1, 30_000);
    // Its row is marked once its pod is deleted (a moment after the pod is gone): STOPPED, not failed.
    const stopped = await waitFor('its row to end', async () => {
      const [row] = await s.t.sql<
        { state: string }[]
      >`SELECT state FROM replicas WHERE id = ${pending.metadata.labels['dedicated-endpoints.io/replica']}`;
      return row?.state === 'STARTING' ? undefined : row?.state;
    });
    expect(stopped).toBe('STOPPED');
    await waitFor('one replica wanted', async () => (await statusOf(s.t.sql, id)).desired === 1);

    await scale(2);
    const next = await waitFor('a new pod to wait for a node', async () =>
      livePodsOf(id).find((p) => !(p.spec as { nodeName?: string }).nodeName),
    );
    s.kube.addNode({ name: 'gpu-h200-b', gpus: 1, labels: { 'nvidia.com/gpu.product': 'NVIDIA-H200' } });
    await waitFor(
      'both replicas to serve',
      async () => (await liveReplicaRows(s.t.sql, id)).filter((r) => r.state === 'READY').length === 2,
      90_000,
    );
    expect(podsOf(id).map((p) => p.metadata.name)).toContain(next.metadata.name);
    await servesThenDeleted(id);
  }, 180_000);
});

describe.concurrent('a scale-out on a full cluster, wanted no more', () => {
  test('the load that asked for it passes while its pod waits for a node: the pod is deleted, one replica is wanted again', async () => {
    s.kube.addNode({ name: 'gpu-b200-a', gpus: 1, labels: { 'nvidia.com/gpu.product': 'NVIDIA-B200' } });
    const id = await s.project.endpoint({
      hfModelRepo: TINY_REPO,
      instanceOptionId: '8GiQTLKfJNOr',
      autoscalingPolicy: { minReplica: 1, maxReplica: 2, cooldownPeriod: 1 },
      advanced: { max_batch_size: 1, max_token_count: 4096, max_input_length: 64 },
    });
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    const [first] = await liveReplicaRows(s.t.sql, id);
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
    expect((await statusOf(s.t.sql, id)).desired).toBe(2);
    clients.abort();
    await Promise.all(load);
    await waitFor('the waiting pod to go', async () => podsOf(id).length === 1, 60_000);
    const replicaId = (pending.metadata as { labels: Record<string, string> }).labels['dedicated-endpoints.io/replica']!;
    // Its row is marked once its pod is deleted (a moment after the pod is gone): STOPPED, not failed.
    const state = await waitFor('its row to end', async () => {
      const [row] = await s.t.sql<{ state: string }[]>`SELECT state FROM replicas WHERE id = ${replicaId}`;
      return row?.state === 'STARTING' ? undefined : row?.state;
    });
    expect(state).toBe('STOPPED');
    await waitFor('one replica wanted', async () => (await statusOf(s.t.sql, id)).desired === 1);
    expect((await liveReplicaRows(s.t.sql, id)).map((r) => r.id)).toEqual([first!.id]);
    await deleteAndWaitGone(id);
  }, 180_000);
});

describe('image pulls on Kubernetes', () => {
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
   * An endpoint whose image pull fails for a while (`failing` waits until it does; the failure is ended here): the
   * kubelet's retries get the pull deadline (5 s here), counted from the first failure, so the endpoint still waits in
   * its phase 1.5 s later; once the registry is back it serves, with no error code.
   */
  async function servesAfterPullFailures(failing: (id: string) => Promise<unknown>) {
    let id: string;
    try {
      id = await s.project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
      await failing(id);
      // Before, the first ErrImagePull failed the endpoint.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect((await statusOf(s.t.sql, id)).status).toBe('INITIALIZING');
    } finally {
      s.kube.setImagePullFailure(IMAGE, false);
    }
    const running = await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    expect(running.errorCode).toBeNull();
    await s.alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }

  test('an image pull that fails for a while (a registry’s outage) is retried: the endpoint waits in its phase, then serves', async () => {
    // Failing from the pod's first pull.
    s.kube.setImagePullFailure(IMAGE, true);
    await servesAfterPullFailures((id) => pullFailing(id));
  }, 120_000);

  test('a pull that took longer than the deadline, then fails for a while, gets the deadline’s retries: the endpoint then serves', async () => {
    // A large image: its pull takes 7 s, past the deadline (5 s here), and fails at its end (the registry went away
    // while it ran). A start whose deadline counted from when the pull began would fail at that first failure.
    s.kube.setImagePullDelay(IMAGE, 7000);
    await servesAfterPullFailures(async (id) => {
      // The kubelet begins the pull as the pod is bound; a change of the pull rules does not end a pull under way.
      await waitFor('the pod scheduled', async () => livePodsOf(id).some((p) => (p as { spec?: { nodeName?: string } }).spec?.nodeName));
      s.kube.setImagePullFailure(IMAGE, true);
      await pullFailing(id, 'ErrImagePull', 30_000);
    });
  }, 150_000);

  test('an image that cannot be pulled fails the endpoint with WORKLOAD_INIT_SETTINGS_ERROR and the kubelet’s reason', async () => {
    s.kube.setImagePullFailure(IMAGE, true);
    try {
      const id = await s.project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
      const failed = await waitForStatus(s.t.sql, id, 'FAILED', 60_000);
      expect(failed.errorCode).toBe('WORKLOAD_INIT_SETTINGS_ERROR');
      const [event] = await s.t.sql<{ detail: { message: string } }[]>`
        SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} ORDER BY id DESC LIMIT 1`;
      expect(event!.detail.message).toMatch(/ErrImagePull|ImagePullBackOff/);
      // The kubelet's own message names the image (and, on a cluster, its registry's host): the gateway's log has it.
      expect(event!.detail.message).not.toContain(IMAGE);
      await waitFor('the failed pod to be deleted', async () => livePodsOf(id).length === 0);
      await s.alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
    } finally {
      s.kube.setImagePullFailure(IMAGE, false);
    }
  }, 120_000);
});
