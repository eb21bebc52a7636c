/**
 * What the Kubernetes runtime tells the controller (`onChange`): a pod's watch event asks for its endpoint's pass
 * only when it changes what a pass reads of the pod (its step, its readiness, its failure). A real kubelet updates a
 * pod's status far more often than that (a probe's time, each container's state): each of those asking for a pass
 * would cost a read of the endpoint and its replicas, for nothing.
 */
import { CoreV1Api, KubeConfig, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { podName } from '../../src/runtime/kubernetes/pod-spec.js';
import { EngineLogUnavailable, type ReplicaRef } from '../../src/runtime/runtime.js';
import type { KubernetesRuntime } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import { waitFor } from '../support/app.js';
import { startKubeStandIn, type KubeStandIn } from '../support/kube/index.js';
import { simKubernetesRuntime, simLaunch, startReplica } from '../support/start-replica.js';

let kube: KubeStandIn;
let runtime: KubernetesRuntime;
let kubeConfig: KubeConfig;
/** The endpoints the runtime told of a change, in order. */
const told: string[] = [];

const launch = simLaunch('rep_told1', 'ep_told');

beforeAll(async () => {
  kube = await startKubeStandIn({
    processes: false,
    nodes: [{ name: 'gpu-0', gpus: 8, labels: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' } }],
  });
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kube.writeKubeconfig('default'));
  runtime = simKubernetesRuntime(kubeConfig);
  runtime.onChange((endpointId) => told.push(endpointId));
  await runtime.open();
});

afterAll(async () => {
  await runtime?.close();
});

test("a pod's update that changes nothing a pass reads asks for no pass; its readiness and its removal do", async () => {
  // Every watch event of the pod, as any client sees it.
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1Pod>(kubeConfig, '/api/v1/namespaces/default/pods', () =>
    core.listNamespacedPod({ namespace: 'default' }),
  );
  let events = 0;
  /** The graces the pod was marked for deletion with, as clients saw them. */
  const graces: number[] = [];
  for (const verb of ['add', 'update', 'delete'] as const)
    informer.on(verb, (pod) => {
      events++;
      if (verb === 'update' && pod.metadata?.deletionTimestamp) graces.push(pod.metadata.deletionGracePeriodSeconds ?? -1);
    });
  await informer.start();
  try {
    const ref = await startReplica(runtime, launch, { pollMs: 5 });
    // Created, then one tell per step it went through to ready: never more than the steps a pass reads.
    await waitFor('the ready pod told', async () => told.length >= 2);
    expect(new Set(told)).toEqual(new Set(['ep_told']));
    expect(told.length).toBeLessThanOrEqual(4);
    const before = { told: told.length, events };

    // Three status syncs of the kubelet: each is a watch event, and none is told.
    const name = ref.locator ?? podName(ref.replicaId);
    for (let i = 0; i < 3; i++) {
      const seen = events;
      expect(kube.touchPod('default', name)).toBeDefined();
      await waitFor('the sync seen by a client', async () => events > seen);
    }
    // The runtime's own informer has them too by now (the same server sends them in order): its next event is the removal.
    // A stop without grace is still a graceful delete of one second: a grace of 0 is a force delete, which takes the
    // pod out of the API before the kubelet has ended its processes (their GPUs would look free while still held).
    await runtime.stop(ref, 0);
    expect(graces).toEqual([1]);
    // Told twice: the pod marked for deletion (no longer serving), then removed.
    await waitFor('the removal told', async () => told.length >= before.told + 2);
    await waitFor('the removal seen by a client', async () => events >= before.events + 5);
    expect(told.length).toBe(before.told + 2);
    expect(runtime.liveness(ref).kind).toBe('dead');
    // Its log is gone with it: following it fails as it is asked for (a 503 naming why), not once a client reads.
    const following = runtime.followLog(ref, new AbortController().signal);
    await expect(following).rejects.toBeInstanceOf(EngineLogUnavailable);
    await expect(following).rejects.toThrow("the replica's pod is gone, and its log with it");
  } finally {
    await informer.stop();
  }
});

test("a pod's scheduling deadline counts from its creation: a gateway that takes it over does not start the count again", async () => {
  const settings = { KUBERNETES_SCHEDULING_DEADLINE_MS: '1500' };
  // No node has a B200: the pod waits for one.
  const waiting = { ...simLaunch('rep_told2', 'ep_told2'), gpuType: 'B200' as const };
  const first = simKubernetesRuntime(kubeConfig, settings);
  const taker = simKubernetesRuntime(kubeConfig, settings);
  try {
    await first.open();
    const ref = await first.ensure(waiting);
    await waitFor('the pod seen waiting', async () => first.observe(ref).state === 'starting');
    await new Promise((resolve) => setTimeout(resolve, 2000));
    // Another gateway's runtime, seeing the pod for the first time, past the deadline since its creation.
    await taker.open();
    expect(taker.observe(ref)).toMatchObject({ state: 'dead', code: 'WORKLOAD_INIT_UNKNOWN_ERROR' });
    await taker.stop(ref, 0);
  } finally {
    await first.close();
    await taker.close();
  }
});

test('orphans are read before the live rows: a pod placed meanwhile (its row written first, by another gateway) is not reaped', async () => {
  let placed: ReplicaRef | undefined;
  // The other tests' pods have their rows (as far as this test goes): only the one placed inside the read has none.
  const others = new Set(
    kube.pods('default').map((p) => (p.metadata as { labels?: Record<string, string> }).labels?.['dedicated-endpoints.io/replica'] ?? ''),
  );
  const reaped = await runtime.reapOrphans(async () => {
    // Another gateway writes its replica's row (after this read of the rows, here) and creates its pod.
    placed = await runtime.ensure(simLaunch('rep_told3', 'ep_told3'));
    await waitFor('the new pod in the cache', async () => runtime.liveness(placed!).kind === 'alive');
    return others;
  });
  expect(reaped).not.toContain('rep_told3');
  expect(runtime.liveness(placed!).kind).toBe('alive');
  await runtime.stop(placed!, 0);
});

test("a pod marked for disruption and still running (a node shutting down) is deleted with its own grace, its answers' time", async () => {
  const ref = await startReplica(runtime, simLaunch('rep_told4', 'ep_told4'), { pollMs: 5 });
  const name = ref.locator ?? podName(ref.replicaId);
  expect(kube.markDisruption('default', name, 'TerminationByKubelet')).toBeDefined();
  await waitFor('the mark seen', async () => runtime.liveness(ref).kind === 'dead');
  const marked = kube.waitForPod('default', name, (p) => p?.metadata.deletionTimestamp !== undefined);
  await runtime.stop(ref, 0);
  // Its own terminationGracePeriodSeconds (the runtime's default, 300 s), not the 1 s of a stop without grace.
  expect((await marked)!.metadata.deletionGracePeriodSeconds).toBe(300);
});

test("a replica of another pool (a gateway in another namespace placed it) is unknown here, not gone: its pod is not this cache's to miss", async () => {
  const ours = runtime.node;
  expect(ours).toBe('kubernetes/default');
  const ref: ReplicaRef = {
    replicaId: 'rep_elsewhere',
    endpointId: 'ep_elsewhere',
    address: null,
    locator: podName('rep_elsewhere'),
    node: 'kubernetes/other',
  };
  expect(runtime.liveness(ref)).toEqual({ kind: 'unknown' });
  expect(runtime.observe(ref)).toEqual({ state: 'unknown' });
  // The same replica recorded in this pool, with no pod: gone.
  expect(runtime.liveness({ ...ref, node: ours })).toMatchObject({ kind: 'dead' });
  expect(runtime.observe({ ...ref, node: ours })).toMatchObject({ state: 'dead' });
});
