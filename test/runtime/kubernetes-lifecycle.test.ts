/**
 * RUNTIME=kubernetes through a stand-in API server (test/support/kube) that
 * also schedules pods on simulated GPU nodes and runs their containers as
 * real local processes: the model fetcher (init container) downloads from
 * the stand-in hub into the cache volume, and the built-in engine serves on
 * the pod's own loopback address. The gateway is the real one, with the
 * real controller: every lifecycle action goes through pods. Image pulls,
 * scale-outs that wait for a node and a wake on a request are in
 * kubernetes-placement.test.ts (the same setup, on a cluster of its own:
 * test/support/kube/suite-lifecycle.ts).
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { liveReplicaRows, statusOf, statusTrail, TINY_REPO, waitFor, waitForStatus } from '../support/app.js';
import { NS, useLifecycleSuite } from '../support/kube/suite-lifecycle.js';

// A serving engine that answers no health check for 6 s is killed (production: 30 s). The engines here serve short
// chats only, and a check times out after 2 s: a slow machine still gets several checks answered within it.
const s = useLifecycleSuite({ hangMs: 6000 });
const { chat, deleteAndWaitGone, livePodsOf, podsOf } = s;

describe('an endpoint on Kubernetes', () => {
  let id: string;

  test('starts as one pod: fetched by its init container, served from the pod address, phases reported on the way', async () => {
    id = await s.project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    const trail = await statusTrail(s.t.sql, id);
    expect(trail).toContain('INITIALIZING DOWNLOADING_MODEL');
    expect(trail).toContain('INITIALIZING ENGINE_INITIALIZING');

    const [replica] = await liveReplicaRows(s.t.sql, id);
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
    const [before] = await liveReplicaRows(s.t.sql, id);
    const podName = (livePodsOf(id)[0]!.metadata as { name: string }).name;
    s.kube.oomKill(NS, podName);
    const replacement = await waitFor(
      'a replacement replica',
      async () => {
        const rows = await liveReplicaRows(s.t.sql, id);
        return rows.find((r) => r.id !== before!.id && r.state === 'READY');
      },
      90_000,
    );
    const [dead] = await s.t.sql<{ state: string; last_error: string }[]>`SELECT state, last_error FROM replicas WHERE id = ${before!.id}`;
    expect(dead!.state).toBe('FAILED');
    expect(replacement.address).toMatch(/^http:\/\/127\.\d+\.\d+\.\d+:8000$/);
    expect((await chat(id)).status).toBe(200);
  }, 180_000);

  test('an update rolls out a new pod and deletes the old, also when the watches are cut and expire (410) mid-rollout', async () => {
    // The endpoint serves again after the OOM kill: its update starts a pod of version 1.
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    const [old] = await liveReplicaRows(s.t.sql, id);
    const updated = await s.alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 2 } });
    expect(updated.status).toBe(200);
    await waitFor('the new version to start', async () => (await liveReplicaRows(s.t.sql, id)).some((r) => r.version_index === 1));
    s.kube.expireHistory({ answer: 'http' });
    s.kube.cutWatches();
    const replaced = await waitFor(
      'the rollout to finish',
      async () => {
        const rows = await liveReplicaRows(s.t.sql, id);
        return rows.length === 1 && rows[0]!.version_index === 1 && rows[0]!.state === 'READY' ? rows[0] : undefined;
      },
      90_000,
    );
    expect(replaced.id).not.toBe(old!.id);
    await waitForStatus(s.t.sql, id, 'RUNNING', 60_000);
    await waitFor('one pod, of version 1', async () => {
      const pods = livePodsOf(id);
      return (
        pods.length === 1 && (pods[0]!.metadata as { labels: Record<string, string> }).labels['dedicated-endpoints.io/version'] === '1'
      );
    });
    expect((await chat(id)).status).toBe(200);
    s.kube.expireHistory({ answer: 'event' });
  }, 180_000);

  test('sleep deletes the pod; a wake creates a new one; terminate deletes it again', async () => {
    expect((await s.alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`)).status).toBe(200);
    await waitForStatus(s.t.sql, id, 'SLEEPING', 60_000);
    await waitFor('the pods to be gone', async () => livePodsOf(id).length === 0);

    expect((await s.alice.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`)).status).toBe(200);
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    expect(livePodsOf(id)).toHaveLength(1);

    expect((await s.alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`)).status).toBe(200);
    await waitForStatus(s.t.sql, id, 'TERMINATED', 60_000);
    await waitFor('the pods to be gone', async () => livePodsOf(id).length === 0);
  }, 180_000);
});

describe('failures on Kubernetes', () => {
  test('an engine that cannot load the weights: its ENGINE_ERROR code reaches the endpoint through the pod’s termination message', async () => {
    const id = await s.project.endpoint({ hfModelRepo: 'test-org/truncated-GGUF', autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    const failed = await waitForStatus(s.t.sql, id, 'FAILED', 90_000);
    expect(failed.errorCode).toBe('INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR');
    expect(await statusTrail(s.t.sql, id)).toContain('INITIALIZING DOWNLOADING_MODEL');
    await s.alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 120_000);
});

describe('a death, then a full cluster', () => {
  /** The endpoint whose hung engine was replaced: it then holds the one GPU a pod can be placed on, for the next test. */
  let serving: string;

  test('an engine that stops answering is killed as a death (counted by the crash policy), not taken for a disruption', async () => {
    const id = await s.project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    const [hung] = await s.t.sql<{ id: string }[]>`SELECT id FROM replicas WHERE endpoint_id = ${id} AND state = 'READY'`;
    const podName = (livePodsOf(id)[0]!.metadata as { name: string }).name;
    process.kill(s.kube.pid(NS, podName, 'engine')!, 'SIGSTOP');
    // No health answer for hangMs (6 s here): killed. Its pod is then gone, as a disrupted one is; it still counts.
    const ended = await waitFor(
      'the hung replica ended',
      async () => {
        const [row] = await s.t.sql<
          { state: string; last_error: string | null }[]
        >`SELECT state, last_error FROM replicas WHERE id = ${hung!.id}`;
        return row!.state === 'FAILED' || row!.state === 'STOPPED' ? row : undefined;
      },
      60_000,
    );
    expect(ended).toEqual({ state: 'FAILED', last_error: 'the engine process exited' });
    // Its replacement serves (the endpoint may have shown RUNNING all along: one replica died, the other starts).
    await waitFor(
      'a replacement serving',
      async () => (await liveReplicaRows(s.t.sql, id)).some((r) => r.id !== hung!.id && r.state === 'READY'),
      90_000,
    );
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    serving = id;
  }, 150_000);

  test("an unschedulable pod waits with the scheduler's reason, then starts once a GPU frees", async () => {
    // The previous test's endpoint serves on gpu-a. The nodes' capacity says two H100s, but the second is tainted:
    // the scheduler cannot place a second pod.
    const first = serving;
    expect((await statusOf(s.t.sql, first)).status).toBe('RUNNING');
    expect(livePodsOf(first).map((p) => (p.spec as { nodeName?: string }).nodeName)).toEqual(['gpu-a']);
    const second = await s.project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    const waiting = await waitFor('the second endpoint to wait for a node', async () => {
      const [row] = await s.t.sql<{ detail: { message?: string } | null }[]>`
        SELECT detail FROM endpoint_events WHERE endpoint_id = ${second} AND phase = 'REQUESTING_VIRTUAL_MACHINE' ORDER BY id DESC LIMIT 1`;
      return row?.detail?.message ? row.detail.message : undefined;
    });
    expect(waiting).toContain('0/2 nodes are available');
    expect((await statusOf(s.t.sql, second)).phase).toBe('REQUESTING_VIRTUAL_MACHINE');
    const status = await waitFor('the wait reason on the status', async () => {
      const body = (await s.alice.rest('GET', `/dedicated/beta/endpoint/${second}/status`)).body as { waitReason?: string };
      return body.waitReason;
    });
    expect(status).toContain('0/2 nodes are available');

    expect((await s.alice.rest('PUT', `/dedicated/beta/endpoint/${first}/terminate`)).status).toBe(200);
    await waitForStatus(s.t.sql, second, 'RUNNING', 90_000);
    expect((await chat(second)).status).toBe(200);
    expect((await s.alice.rest('DELETE', `/dedicated/beta/endpoint/${second}`)).status).toBe(200);
    // Deleting the endpoint deletes its Secret, and with it (owner references) its pods.
    await waitFor('the deleted endpoint’s pods to be gone', async () => podsOf(second).length === 0, 60_000);
    await s.alice.rest('DELETE', `/dedicated/beta/endpoint/${first}`);
  }, 180_000);
});

/** A pod labelled as ours for `replicaId` (its name from it), with no replica row: as a gateway that died between the two leaves. */
async function createOrphanPod(replicaId: string): Promise<void> {
  await s.kubeConfig.makeApiClient(CoreV1Api).createNamespacedPod({
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

describe('orphans, and a gateway restart', () => {
  /** One serving endpoint for both tests: the orphans must leave its pod alone, and the restart must adopt it. */
  let id: string;

  test("a pod labelled as ours that appears later with no replica row (a create that committed after its gateway died) is deleted; the others' pods stay", async () => {
    id = await s.project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(s.t.sql, id, 'RUNNING', 90_000);
    const podsBefore = livePodsOf(id).map((p) => (p.metadata as { uid: string }).uid);
    await createOrphanPod('rep_late_orphan');
    await waitFor('the late orphan to be deleted', async () => s.kube.pod(NS, 'rep-late-orphan') === undefined, 30_000);
    expect(livePodsOf(id).map((p) => (p.metadata as { uid: string }).uid)).toEqual(podsBefore);
    expect((await chat(id)).status).toBe(200);
  }, 180_000);

  test('a gateway restart adopts the running pods: no pod is duplicated or orphaned, the endpoint keeps serving', async () => {
    expect((await statusOf(s.t.sql, id)).status).toBe('RUNNING');
    const [before] = await liveReplicaRows(s.t.sql, id);
    const podsBefore = livePodsOf(id).map((p) => (p.metadata as { uid: string }).uid);
    // A pod labelled as ours whose replica has no row (left by a gateway that died between the two).
    await createOrphanPod('rep_orphan');
    s.kube.cutWatches();
    s.kube.expireHistory();
    await s.t.restart();
    await waitFor('the orphaned pod to be deleted', async () => s.kube.pod(NS, 'rep-orphan') === undefined, 30_000);
    expect((await chat(id)).status).toBe(200);
    // A few controller passes later, the same replica and the same pod serve.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const after = await liveReplicaRows(s.t.sql, id);
    expect(after.map((r) => r.id)).toEqual([before!.id]);
    expect(livePodsOf(id).map((p) => (p.metadata as { uid: string }).uid)).toEqual(podsBefore);
    expect((await statusOf(s.t.sql, id)).status).toBe('RUNNING');
    // Deleted through the restarted gateway, its pods go.
    await deleteAndWaitGone(id);
  }, 180_000);
});
