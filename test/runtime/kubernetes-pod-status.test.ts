/**
 * What a replica's pod says (src/runtime/kubernetes/pod-status.ts), on pods shaped as a real kubelet and API server
 * write them: a pod the cluster took away (the kubelet's eviction under node pressure, a preemption, a drain's
 * eviction, a node shut down) is a disruption, to be replaced; a pod whose engine failed is a failure with its code.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { engineAddress } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import { viewPod } from '../../src/runtime/kubernetes/pod-status.js';

const killed = { terminated: { exitCode: 137, reason: 'Error', startedAt: new Date(), finishedAt: new Date() } };

/** A scheduled pod whose fetcher finished, with the given engine state, phase and conditions. */
function pod(status: Partial<NonNullable<V1Pod['status']>>, engine: object = killed): V1Pod {
  return {
    metadata: { name: 'rep-1', namespace: 'default' },
    spec: { nodeName: 'gpu-0', containers: [{ name: 'engine', image: 'img:1' }] },
    status: {
      initContainerStatuses: [
        { name: 'fetch', image: 'img:1', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0 } } },
      ],
      containerStatuses: [{ name: 'engine', image: 'img:1', imageID: '', ready: false, restartCount: 0, state: engine }],
      ...status,
    },
  } as V1Pod;
}

const condition = (reason: string) => ({ type: 'DisruptionTarget', status: 'True', reason, message: '', lastTransitionTime: new Date() });

describe('a pod the cluster took away is a disruption, not a failure', () => {
  test.each([
    [
      'evicted by the kubelet under node pressure (older clusters: the reason alone)',
      pod({ phase: 'Failed', reason: 'Evicted' }),
      'Evicted',
    ],
    [
      'evicted by the kubelet, with the condition',
      pod({ phase: 'Failed', reason: 'Evicted', conditions: [condition('TerminationByKubelet')] }),
      'TerminationByKubelet',
    ],
    ['preempted by the scheduler', pod({ phase: 'Failed', conditions: [condition('PreemptionByScheduler')] }), 'PreemptionByScheduler'],
    ['its node shut down', pod({ phase: 'Failed', reason: 'Terminated' }), 'Terminated'],
    ['its node lost', pod({ phase: 'Failed', reason: 'NodeLost' }), 'NodeLost'],
    [
      'marked by a drain, its engine still running',
      pod({ phase: 'Running', conditions: [condition('EvictionByEvictionAPI')] }, { running: { startedAt: new Date() } }),
      'EvictionByEvictionAPI',
    ],
  ])('%s', (_what, p, reason) => {
    // The node's own evictions (it was short of memory or disk) are told apart: the replica may have caused them.
    const byNode = reason === 'Evicted' || reason === 'TerminationByKubelet';
    expect(viewPod(p)).toEqual({ kind: 'disrupted', reason: `the cluster took its pod away (${reason})`, byNode });
  });

  test("a graceful node shutdown (a spot VM's preemption) is a disruption but not the node's eviction: no back-off", () => {
    const message = 'Pod was terminated in response to imminent node shutdown.';
    const shutdown = pod({
      phase: 'Failed',
      reason: 'Terminated',
      message,
      conditions: [{ ...condition('TerminationByKubelet'), message }],
    });
    expect(viewPod(shutdown)).toEqual({ kind: 'disrupted', reason: 'the cluster took its pod away (TerminationByKubelet)', byNode: false });
    // Still running, the condition written first: its message tells.
    const going = pod({ phase: 'Running', conditions: [{ ...condition('TerminationByKubelet'), message }] }, { running: {} });
    expect(viewPod(going)).toMatchObject({ kind: 'disrupted', byNode: false });
  });

  test("a kubelet's refusal to admit the pod (a broken device plugin) is a failure, not a disruption", () => {
    expect(viewPod(pod({ phase: 'Failed', reason: 'UnexpectedAdmissionError' }))).toMatchObject({ kind: 'failed' });
  });

  test.each(['UnexpectedAdmissionError', 'OutOfnvidia.com/gpu', 'NodeAffinity'])(
    'refused by its node as a real kubelet writes it (%s: Failed, no container status): a failure, not a download for ever',
    (reason) => {
      const refused = pod({ phase: 'Failed', reason, message: `Pod was rejected: ${reason} on gpu-7.internal` });
      delete refused.status!.initContainerStatuses;
      delete refused.status!.containerStatuses;
      refused.spec!.initContainers = [{ name: 'fetch', image: 'img:1' }];
      expect(viewPod(refused)).toEqual({
        kind: 'failed',
        code: 'WORKLOAD_INIT_GRPC_ERROR',
        reason: `its node refused to run the pod (${reason})`,
        oom: false,
        detail: `Pod was rejected: ${reason} on gpu-7.internal`,
      });
    },
  );

  test('being deleted, whoever asked: deleting', () => {
    const deleting = pod({ phase: 'Running' }, { running: {} });
    deleting.metadata!.deletionTimestamp = new Date();
    expect(viewPod(deleting)).toEqual({ kind: 'deleting' });
  });
});

describe('a pod whose engine failed is a failure, with its code', () => {
  test('OOMKilled', () => {
    const oom = pod({ phase: 'Failed' }, { terminated: { exitCode: 137, reason: 'OOMKilled' } });
    expect(viewPod(oom)).toMatchObject({ kind: 'failed', code: 'INFERENCE_ENGINE_MEMORY_ERROR', oom: true });
  });
  test('an engine that exited', () => {
    expect(viewPod(pod({ phase: 'Failed' }))).toMatchObject({ kind: 'failed', code: 'WORKLOAD_INIT_GRPC_ERROR' });
  });
  test('a failed pod whose reason is not a disruption: its reason shown, its message (node names) for the log only', () => {
    const failed = pod({
      phase: 'Failed',
      reason: 'DeadlineExceeded',
      message: 'Pod was active on the node gpu-7.internal longer than allowed',
    });
    failed.status!.containerStatuses = [];
    expect(viewPod(failed)).toEqual({
      kind: 'failed',
      code: 'WORKLOAD_INIT_GRPC_ERROR',
      reason: 'the pod failed (DeadlineExceeded)',
      oom: false,
      detail: 'Pod was active on the node gpu-7.internal longer than allowed',
    });
  });
});

describe('a waiting container: retried by the kubelet, or wrong for good', () => {
  const waitingInit = (reason: string): V1Pod => {
    const p = pod({ phase: 'Pending' });
    p.status!.initContainerStatuses![0]!.state = { waiting: { reason, message: 'pull access denied' } };
    p.status!.containerStatuses![0]!.state = { waiting: { reason: 'PodInitializing' } };
    return p;
  };
  test.each(['ErrImagePull', 'ImagePullBackOff', 'CreateContainerError'])(
    '%s: its step, with the failure it becomes past the deadline',
    (reason) => {
      // The cluster's words (here "pull access denied"; often a registry's host or an image's name) are kept apart.
      expect(viewPod(waitingInit(reason))).toEqual({
        kind: 'progress',
        progress: { phase: 'DOWNLOADING_MODEL', reason: `the kubelet retries (${reason})` },
        retrying: {
          code: 'WORKLOAD_INIT_SETTINGS_ERROR',
          reason: `${reason}: the cluster could not start the model's fetcher container`,
          detail: 'pull access denied',
        },
      });
    },
  );
  test.each(['InvalidImageName', 'ErrImageNeverPull', 'CreateContainerConfigError'])('%s: a settings error at once', (reason) => {
    expect(viewPod(waitingInit(reason))).toEqual({
      kind: 'failed',
      code: 'WORKLOAD_INIT_SETTINGS_ERROR',
      reason: `${reason}: the cluster could not start the model's fetcher container`,
      oom: false,
      detail: 'pull access denied',
    });
  });
});

test("a scheduled pod the kubelet has not reported yet is at its model's download, not past it", () => {
  const fresh: V1Pod = {
    metadata: { name: 'rep-1' },
    spec: { nodeName: 'gpu-0', initContainers: [{ name: 'fetch', image: 'img:1' }], containers: [{ name: 'engine', image: 'img:1' }] },
    status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'True' }] },
  };
  expect(viewPod(fresh)).toEqual({ kind: 'progress', progress: { phase: 'DOWNLOADING_MODEL' } });
  // Without a fetcher (an engine that fetches its model itself), it is at the engine's start.
  expect(viewPod({ ...fresh, spec: { ...fresh.spec!, initContainers: [] } })).toEqual({
    kind: 'progress',
    progress: { phase: 'ENGINE_INITIALIZING' },
  });
});

test('a step waited for counts from when the cluster says it began: the pod created, its engine started', () => {
  const created = new Date('2026-12-05T08:00:00Z');
  const pending: V1Pod = {
    metadata: { name: 'rep-1', creationTimestamp: created },
    spec: { containers: [] },
    status: { phase: 'Pending' },
  };
  expect(viewPod(pending)).toEqual({ kind: 'progress', progress: { phase: 'REQUESTING_VIRTUAL_MACHINE' }, since: created });
  const startedAt = new Date('2026-12-05T08:05:00Z');
  const loading = pod({ phase: 'Running' }, { running: { startedAt } });
  expect(viewPod(loading)).toEqual({ kind: 'progress', progress: { phase: 'ENGINE_INITIALIZING' }, since: startedAt });
});

test("a ready pod's engine address: an IPv6 pod IP (a single-stack IPv6 cluster) in brackets, a valid URL", () => {
  expect(engineAddress('10.4.0.7', 8000)).toBe('http://10.4.0.7:8000');
  const v6 = engineAddress('fd00:10:244::5', 8000);
  expect(v6).toBe('http://[fd00:10:244::5]:8000');
  expect(new URL('/ready', v6).host).toBe('[fd00:10:244::5]:8000');
});
