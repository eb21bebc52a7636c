/**
 * What a replica's pod says, as the controller reads it: the pod's status
 * (written by the scheduler and the kubelet) mapped to a start's phase, a
 * failure with the endpoint's error code, or a ready engine. Pure: the
 * runtime calls it on each change its informer sees.
 *
 * | the pod                                          | the replica                                   |
 * |--------------------------------------------------|-----------------------------------------------|
 * | not scheduled yet                                | REQUESTING_VIRTUAL_MACHINE                    |
 * | unschedulable (PodScheduled False)               | REQUESTING_VIRTUAL_MACHINE, scheduler's words |
 * | init container (the model's download) running    | DOWNLOADING_MODEL                             |
 * | init container failed                            | its ENGINE_ERROR code, else WORKLOAD_INIT_DOWNLOAD_ERROR |
 * | image pull failing (retried by the kubelet)      | its step, with the kubelet's reason, until the runtime's deadline |
 * | image or configuration error no retry fixes      | WORKLOAD_INIT_SETTINGS_ERROR                  |
 * | engine running, not ready                        | ENGINE_INITIALIZING                           |
 * | engine ready                                     | ready, at the pod's IP                        |
 * | OOMKilled                                        | INFERENCE_ENGINE_MEMORY_ERROR                 |
 * | engine exited                                    | its ENGINE_ERROR code, else WORKLOAD_INIT_GRPC_ERROR |
 * | evicted, preempted, its node drained or lost     | disrupted: replaced, not a failure            |
 * | refused by its node's kubelet (admission)        | WORKLOAD_INIT_GRPC_ERROR, the kubelet's reason |
 * | being deleted                                    | deleting (by the gateway, or a disruption)    |
 */
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { EndpointErrorCode } from '../../domain/lifecycle.js';
import { reportedError } from '../engine-report.js';
import type { StartProgress } from '../runtime.js';

/**
 * A failing step the kubelet retries, and the failure it becomes past the runtime's deadline (counted from when the
 * runtime first saw it retried: the kubelet writes no time of its first failure).
 */
export interface Retrying {
  code: EndpointErrorCode;
  reason: string;
  detail?: string;
}

export type PodView =
  /**
   * `retrying`: the kubelet retries a step that fails (an image pull); past the runtime's deadline, this failure.
   * `since`: when the pod began its step, as the cluster recorded it (its creation, while it waits for a node; its
   * engine's start, while the engine loads): a step's deadline counts from it, whichever gateway reads it.
   */
  | { kind: 'progress'; progress: StartProgress; retrying?: Retrying; since?: Date }
  | { kind: 'ready'; podIP: string }
  /** `detail`: the cluster's own words (image names, registry hosts, node names), for the gateway's log only. */
  | { kind: 'failed'; code: EndpointErrorCode; reason: string; oom: boolean; detail?: string }
  | { kind: 'deleting' }
  /** `byNode`: its node evicted it for its own pressure (memory, disk), which the replica may have brought on. */
  | { kind: 'disrupted'; reason: string; byNode: boolean };

/**
 * How the cluster marks a pod it took away, rather than one whose engine failed: the `DisruptionTarget` condition
 * (Kubernetes 1.26 on: an eviction through the API, as a drain does; a preemption; a taint's eviction; the kubelet's
 * own eviction or a node shutdown), and the failed pod's `reason` where the condition is not written (older clusters).
 */
const DISRUPTED_REASONS = new Set(['Evicted', 'Preempting', 'NodeLost', 'Terminated', 'Shutdown', 'NodeShutdown']);
/** The node's own evictions (under memory or disk pressure): what the replica may have brought on itself. */
const BY_NODE = new Set(['Evicted', 'TerminationByKubelet']);
/**
 * A graceful node shutdown (a spot VM's preemption, a node pool's upgrade) also writes TerminationByKubelet, with the
 * pod's reason Terminated (or Shutdown, NodeShutdown) and a message that says so: the node went, the replica caused
 * nothing, and its replacement need not wait an eviction's back-off.
 */
const SHUTDOWN_REASONS = new Set(['Terminated', 'Shutdown', 'NodeShutdown']);

/** Whether, and why, the cluster is taking the pod away (see above); undefined for a pod it leaves alone. */
export function disruption(pod: V1Pod): { reason: string; byNode: boolean } | undefined {
  const target = pod.status?.conditions?.find((c) => c.type === 'DisruptionTarget' && c.status === 'True');
  const failed = pod.status?.phase === 'Failed' ? pod.status.reason : undefined;
  const reason = target ? (target.reason ?? 'DisruptionTarget') : failed && DISRUPTED_REASONS.has(failed) ? failed : undefined;
  if (reason === undefined) return undefined;
  const shutdown = (failed !== undefined && SHUTDOWN_REASONS.has(failed)) || /node shutdown/i.test(target?.message ?? '');
  return { reason, byNode: !shutdown && (BY_NODE.has(reason) || (failed !== undefined && BY_NODE.has(failed))) };
}

/**
 * A pod its node's kubelet refused to run (its admission: `UnexpectedAdmissionError` when the GPU device plugin could
 * not allocate the devices, as on a node whose plugin restarted; `OutOfnvidia.com/gpu`; `NodeAffinity` when the node
 * changed after the scheduler chose it): the kubelet writes Failed with its reason and message and no container
 * status, as nothing ran. A failed start (the crash policy counts it: a node that refuses every pod does not get one
 * after another for ever), read before the init containers' statuses, whose absence would otherwise read as a download
 * that has not begun, for ever.
 */
function admissionRejection(pod: V1Pod): PodView | undefined {
  const status = pod.status ?? {};
  if (status.phase !== 'Failed' || (status.initContainerStatuses?.length ?? 0) > 0 || (status.containerStatuses?.length ?? 0) > 0)
    return undefined;
  return {
    kind: 'failed',
    code: 'WORKLOAD_INIT_GRPC_ERROR',
    reason: `its node refused to run the pod (${status.reason ?? 'Failed'})`,
    oom: false,
    ...detail(status.message),
  };
}

/** Waiting reasons that no retry fixes: the image or the pod's configuration is wrong. */
const SETTINGS_WAITING = new Set(['InvalidImageName', 'ErrImageNeverPull', 'CreateContainerConfigError', 'RunContainerError']);
/**
 * Waiting reasons the kubelet retries by itself, which may pass: a registry that answers 429 or is down, a node just
 * added whose first pulls time out, containerd's "failed to reserve container name". A failure only once they have
 * lasted the runtime's deadline (KUBERNETES_IMAGE_PULL_DEADLINE_MS); a wrong image name fails then too.
 */
const RETRIED_WAITING = new Set(['ErrImagePull', 'ImagePullBackOff', 'CreateContainerError']);

/** A container the kubelet retries: its step, with why, and the failure it becomes. */
function retried(status: V1ContainerStatus, phase: StartProgress['phase']): PodView | undefined {
  const waiting = status.state?.waiting;
  if (!waiting?.reason || !RETRIED_WAITING.has(waiting.reason)) return undefined;
  const init = phase === 'DOWNLOADING_MODEL';
  const reason = `${waiting.reason}: the cluster could not start the ${init ? "model's fetcher" : 'engine'} container`;
  return {
    kind: 'progress',
    progress: { phase, reason: `the kubelet retries (${waiting.reason})` },
    retrying: { code: 'WORKLOAD_INIT_SETTINGS_ERROR', reason, ...detail(waiting.message) },
  };
}

/** A failed container's account: OOM, the ENGINE_ERROR it reported, or its exit code. */
function containerFailure(status: V1ContainerStatus, init: boolean): PodView | undefined {
  const waiting = status.state?.waiting;
  if (waiting?.reason && SETTINGS_WAITING.has(waiting.reason)) {
    return {
      kind: 'failed',
      code: 'WORKLOAD_INIT_SETTINGS_ERROR',
      reason: `${waiting.reason}: the cluster could not start the ${init ? "model's fetcher" : 'engine'} container`,
      oom: false,
      ...detail(waiting.message),
    };
  }
  const ended = status.state?.terminated;
  if (!ended || ended.exitCode === 0) return undefined;
  if (ended.reason === 'OOMKilled') {
    return {
      kind: 'failed',
      code: 'INFERENCE_ENGINE_MEMORY_ERROR',
      reason: `the ${init ? 'model download' : 'engine'} ran out of memory (OOMKilled)`,
      oom: true,
    };
  }
  const reported = reportedError(ended.message);
  if (reported) return { kind: 'failed', code: reported.code, reason: reported.message?.slice(0, 500) ?? 'the engine failed', oom: false };
  return {
    kind: 'failed',
    code: init ? 'WORKLOAD_INIT_DOWNLOAD_ERROR' : 'WORKLOAD_INIT_GRPC_ERROR',
    reason: `the ${init ? 'model download' : 'engine'} exited with code ${ended.exitCode}${ended.reason ? ` (${ended.reason})` : ''}`,
    oom: false,
  };
}

const created = (pod: V1Pod) => (pod.metadata?.creationTimestamp ? { since: new Date(pod.metadata.creationTimestamp) } : {});

/** The cluster's own message, kept apart from what the user is shown (it names images, registries and nodes). */
const detail = (message: string | undefined) => (message ? { detail: message.slice(0, 500) } : {});

/** Reads a replica's pod. */
export function viewPod(pod: V1Pod): PodView {
  if (pod.metadata?.deletionTimestamp) return { kind: 'deleting' };
  const disrupted = disruption(pod);
  if (disrupted) return { kind: 'disrupted', reason: `the cluster took its pod away (${disrupted.reason})`, byNode: disrupted.byNode };
  const status = pod.status ?? {};
  const conditions = status.conditions ?? [];
  const scheduled = conditions.find((c) => c.type === 'PodScheduled');
  if (!pod.spec?.nodeName && scheduled?.status === 'False') {
    const reason = scheduled.message ? `no node can take the replica yet: ${scheduled.message}` : 'waiting for a node';
    return { kind: 'progress', progress: { phase: 'REQUESTING_VIRTUAL_MACHINE', reason }, ...created(pod) };
  }
  // Not tried by the scheduler yet: no reason (a reason means that no node could take it).
  if (!pod.spec?.nodeName) return { kind: 'progress', progress: { phase: 'REQUESTING_VIRTUAL_MACHINE' }, ...created(pod) };
  const rejected = admissionRejection(pod);
  if (rejected) return rejected;
  for (const init of status.initContainerStatuses ?? []) {
    const failed = containerFailure(init, true) ?? retried(init, 'DOWNLOADING_MODEL');
    if (failed) return failed;
  }
  // Scheduled, before the kubelet's first status: its init containers are not listed yet, and have not run.
  const inits = status.initContainerStatuses ?? [];
  const initsDone = inits.length >= (pod.spec.initContainers?.length ?? 0) && inits.every((s) => s.state?.terminated?.exitCode === 0);
  if (!initsDone) return { kind: 'progress', progress: { phase: 'DOWNLOADING_MODEL' } };
  for (const container of status.containerStatuses ?? []) {
    const failed = containerFailure(container, false) ?? retried(container, 'ENGINE_INITIALIZING');
    if (failed) return failed;
    if (container.state?.terminated) {
      return { kind: 'failed', code: 'WORKLOAD_INIT_GRPC_ERROR', reason: 'the engine exited', oom: false };
    }
  }
  if (status.phase === 'Failed' || status.phase === 'Succeeded') {
    return {
      kind: 'failed',
      code: 'WORKLOAD_INIT_GRPC_ERROR',
      reason: `the pod ${status.phase.toLowerCase()}${status.reason ? ` (${status.reason})` : ''}`,
      oom: false,
      ...detail(status.message),
    };
  }
  const ready = conditions.find((c) => c.type === 'Ready')?.status === 'True';
  if (ready && status.podIP) return { kind: 'ready', podIP: status.podIP };
  const started = status.containerStatuses?.find((c) => c.state?.running?.startedAt)?.state?.running?.startedAt;
  return { kind: 'progress', progress: { phase: 'ENGINE_INITIALIZING' }, ...(started ? { since: new Date(started) } : {}) };
}
