/**
 * The Kubernetes runtime follows pods by shard (src/domain/shards.ts, src/runtime/kubernetes/pod-watches.ts): each pod
 * carries its endpoint's shard as a label, and a runtime the controller narrowed to some shards watches theirs alone,
 * so that the gateways of a cluster divide the work of following its pods as they divide the endpoints. What it does
 * not watch is "unknown" to it, never "gone"; pods created before pods carried their shard are followed by every
 * gateway. Against the stand-in API server (no processes: its kubelet marks pods ready).
 */
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { shardOf } from '../../src/domain/shards.js';
import type { KubernetesRuntime } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import { LABELS, podName } from '../../src/runtime/kubernetes/pod-spec.js';
import type { ReplicaRef } from '../../src/runtime/runtime.js';
import { waitFor } from '../support/app.js';
import { startKubeStandIn, type KubeStandIn } from '../support/kube/index.js';
import { simKubernetesRuntime, simLaunch, startReplica } from '../support/start-replica.js';

const NS = 'default';
let kube: KubeStandIn;
let kubeConfig: KubeConfig;
let runtime: KubernetesRuntime;
/** The endpoints the runtime told of a change. */
const told: string[] = [];
/** Set by a test: what a pass would observe of its replica when the runtime tells its endpoint. */
let onTold: ((endpointId: string) => void) | undefined;

/** An endpoint id of that shard. */
function endpointIn(shard: number, prefix: string): string {
  for (let i = 0; ; i++) if (shardOf(`${prefix}${i}`) === shard) return `${prefix}${i}`;
}

const labelsOf = (name: string) =>
  (kube.pods(NS).find((p) => p.metadata.name === name)?.metadata as { labels?: Record<string, string> } | undefined)?.labels;

beforeAll(async () => {
  kube = await startKubeStandIn({
    processes: false,
    nodes: [{ name: 'gpu-0', gpus: 8, labels: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' } }],
  });
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kube.writeKubeconfig(NS));
  runtime = simKubernetesRuntime(kubeConfig);
  runtime.onChange((endpointId) => {
    told.push(endpointId);
    onTold?.(endpointId);
  });
  await runtime.open();
});

afterAll(async () => {
  await runtime?.close();
  await kube?.close();
});

test("each pod carries its endpoint's shard; narrowed to some shards, the runtime follows theirs alone: another shard's replica is unknown (not gone), its changes untold, until its shard is followed again", async () => {
  const ours = endpointIn(1, 'ep_sh_a');
  const theirs = endpointIn(2, 'ep_sh_b');
  runtime.watchShards(new Set([1]));
  const mine = await startReplica(runtime, simLaunch('rep_sh_a', ours), { pollMs: 5 });
  expect(labelsOf(podName('rep_sh_a'))?.[LABELS.shard]).toBe('1');

  // Created here (any gateway may create a pod), in a shard this runtime does not follow.
  const other: ReplicaRef = await runtime.ensure(simLaunch('rep_sh_b', theirs));
  expect(labelsOf(podName('rep_sh_b'))?.[LABELS.shard]).toBe('2');
  await kube.waitForPod(NS, podName('rep_sh_b'), (p) =>
    ((p?.status as V1Pod['status'])?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
  );
  expect(runtime.observe(other)).toEqual({ state: 'unknown' });
  expect(runtime.liveness(other)).toEqual({ kind: 'unknown' });
  expect(await runtime.adopt({ ...other, endpointId: theirs, locator: null })).toBeUndefined();
  expect(runtime.observe(mine)).toMatchObject({ state: 'ready' });
  expect(told).not.toContain(theirs);

  // Its shard followed again: listed, then seen as it is (ready), and its changes told. Told once its view is known
  // too: the pass the list's events ask for runs before the watch is open (the shard still "unknown"), and finds nothing.
  const seenWhenTold: string[] = [];
  onTold = (endpointId) => void (endpointId === theirs && seenWhenTold.push(runtime.observe(other).state));
  runtime.watchShards(new Set([1, 2]));
  await waitFor('the other shard listed', async () => runtime.observe(other).state === 'ready');
  await waitFor('its endpoint told once its pod is known', async () => seenWhenTold.includes('ready'));
  onTold = undefined;
  expect((await runtime.adopt({ ...other, endpointId: theirs, locator: null }))?.locator).toBe(podName('rep_sh_b'));
  await runtime.stop(other, 0);
  await waitFor('its removal told', async () => told.includes(theirs));

  // Narrowed again: what it no longer follows is unknown at once (a gateway that holds it follows it).
  runtime.watchShards(new Set([2]));
  expect(runtime.observe(mine)).toEqual({ state: 'unknown' });
  expect(runtime.liveness(mine)).toEqual({ kind: 'unknown' });
  runtime.watchShards(new Set([1]));
  await waitFor('its shard listed again', async () => runtime.observe(mine).state === 'ready');
  await runtime.stop(mine, 0);
});

test("a pod created before pods carried their shard is followed where its endpoint's shard is, and reaped when no replica owns it; another shard's orphan is left to the gateway that follows it", async () => {
  runtime.watchShards(new Set([1, 3]));
  // A pod as an earlier version created it: no shard label. Copied from one this version makes, under another name.
  const model = await runtime.ensure(simLaunch('rep_sh_model', endpointIn(3, 'ep_sh_c')));
  const made = structuredClone(kube.pods(NS).find((p) => p.metadata.name === podName('rep_sh_model'))) as unknown as V1Pod;
  await runtime.stop(model, 0);
  const { [LABELS.shard]: _shard, ...labels } = made.metadata!.labels!;
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespacedPod({
    namespace: NS,
    body: {
      ...made,
      metadata: { name: podName('rep_sh_old'), namespace: NS, labels: { ...labels, [LABELS.replica]: 'rep_sh_old' } },
      spec: { ...made.spec!, nodeName: undefined },
      status: {},
    },
  });
  const old: ReplicaRef = {
    replicaId: 'rep_sh_old',
    endpointId: endpointIn(3, 'ep_sh_c'),
    address: null,
    locator: podName('rep_sh_old'),
    node: runtime.node,
  };
  // Its shard's watch selects it not (no label): the watch of unsharded pods, every gateway's, has it.
  await waitFor('the unsharded pod followed', async () => runtime.observe(old).state === 'ready');
  expect(runtime.liveness(old)).toEqual({ kind: 'alive' });
  expect(told).toContain(old.endpointId);

  // An orphan of a shard not followed here: another gateway's to judge.
  const foreign = await runtime.ensure(simLaunch('rep_sh_foreign', endpointIn(4, 'ep_sh_d')));
  await kube.waitForPod(NS, podName('rep_sh_foreign'), (p) => p !== undefined);
  const reaped = await runtime.reapOrphans(async () => new Set());
  expect(reaped).toContain('rep_sh_old');
  expect(reaped).not.toContain('rep_sh_foreign');
  await kube.waitForPod(NS, podName('rep_sh_old'), (p) => p === undefined || p.metadata.deletionTimestamp !== undefined);
  expect(kube.pods(NS).find((p) => p.metadata.name === podName('rep_sh_foreign'))?.metadata.deletionTimestamp).toBeUndefined();
  runtime.watchShards(new Set([4]));
  await waitFor('the foreign shard listed', async () => runtime.liveness(foreign).kind === 'alive');
  await runtime.stop(foreign, 0);
});
