/**
 * The deadlines of a starting pod's steps, for the Kubernetes runtime's `observe`: a pod no node takes within the
 * scheduling deadline, an engine not ready within the start timeout, and a step the kubelet keeps retrying (an image
 * pull) past the image pull deadline are reported dead. Each counts from when the step began, as the cluster recorded
 * it where it did, else from when this runtime first saw the pod at it; kept per pod name until the pod leaves its
 * steps (`forget`).
 */
import type { ReplicaObservation } from '../runtime.js';
import type { PodView } from './pod-status.js';
import type { KubernetesSettings } from './settings.js';

type Progress = Extract<PodView, { kind: 'progress' }>;

export class StepDeadlines {
  /** When each starting pod began its step, by pod name (a step's deadline counts from it). */
  private readonly stepSince = new Map<string, { phase: string; since: number }>();
  /** Since when the kubelet has been retrying each starting pod's failing step (an image pull), and that step, by pod name. */
  private readonly retryingSince = new Map<string, { phase: string; since: number }>();

  constructor(
    private readonly settings: Pick<KubernetesSettings, 'schedulingDeadlineMs' | 'imagePullDeadlineMs'>,
    private readonly startTimeoutMs: number,
    private readonly log: (message: string) => void,
  ) {}

  /** The pod left its steps (ready, failed, gone, stopped): its counts go. */
  forget(name: string): void {
    this.stepSince.delete(name);
    this.retryingSince.delete(name);
  }

  /** The starting pod `name` as `view` shows it: starting at its step, or dead past one of the step's deadlines. */
  observe(name: string, view: Progress): ReplicaObservation {
    const { phase, reason } = view.progress;
    // From when this runtime first saw the kubelet retry the step, not from when the step could first start: a pull of
    // a large image that took longer than the deadline, then failed once, gets the deadline's retries too. The kubelet
    // writes no time of its first failure, so a gateway that takes the endpoint over counts again. Kept while the
    // pod stays at the step (between two tries the kubelet may show another reason).
    const retrying = this.retryingSince.get(name);
    if (retrying !== undefined && retrying.phase !== phase) this.retryingSince.delete(name);
    if (view.retrying) {
      const since = retrying?.phase === phase ? retrying.since : Date.now();
      this.retryingSince.set(name, { phase, since });
      if (Date.now() - since > this.settings.imagePullDeadlineMs) {
        if (view.retrying.detail) this.log(`pod ${name}: ${view.retrying.reason}: ${view.retrying.detail}`);
        return { state: 'dead', code: view.retrying.code, reason: view.retrying.reason };
      }
    }
    // Counted from when the cluster says the step began, when it says (a takeover does not start the count again);
    // else from when this runtime first saw the pod at it.
    let step = this.stepSince.get(name);
    if (step?.phase !== phase) this.stepSince.set(name, (step = { phase, since: Math.min(Date.now(), view.since?.getTime() ?? Infinity) }));
    const waited = Date.now() - step.since;
    const { schedulingDeadlineMs } = this.settings;
    if (phase === 'REQUESTING_VIRTUAL_MACHINE' && waited > schedulingDeadlineMs) {
      return {
        state: 'dead',
        code: 'WORKLOAD_INIT_UNKNOWN_ERROR',
        reason: `no node took the replica within ${Math.round(schedulingDeadlineMs / 1000)} s (${reason ?? 'unschedulable'})`,
      };
    }
    if (phase === 'ENGINE_INITIALIZING' && waited > this.startTimeoutMs) {
      return {
        state: 'dead',
        code: 'WORKLOAD_INIT_GRPC_ERROR',
        reason: `the engine did not become ready within ${Math.round(this.startTimeoutMs / 1000)} s`,
      };
    }
    return { state: 'starting', phase, ...(reason !== undefined ? { reason } : {}) };
  }
}
