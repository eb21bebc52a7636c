/**
 * The status the stand-in's kubelet writes for a pod, built from what it knows of each container, in the shape and
 * with the reasons the real kubelet uses: container statuses (waiting/running/terminated), the pod conditions
 * (PodReadyToStartContainers, Initialized, Ready, ContainersReady, PodScheduled) and the phase for the pod's
 * restart policy.
 */
import { createHash } from 'node:crypto';
import { timestamp, type KubeObject } from './objects.js';

/** What the kubelet knows of one container. */
export interface ContainerState {
  name: string;
  image: string;
  init: boolean;
  waiting?: { reason: string; message?: string };
  running?: { startedAt: string };
  terminated?: { exitCode: number; reason: string; message?: string; startedAt?: string; finishedAt: string };
  ready: boolean;
  containerID?: string;
}

export function containerID(podUid: string, name: string): string {
  return `containerd://${createHash('sha256').update(`${podUid}/${name}`).digest('hex')}`;
}

function imageID(image: string): string {
  const repo = image.replace(/[:@].*$/, '');
  return `${repo}@sha256:${createHash('sha256').update(image).digest('hex')}`;
}

function statusOf(c: ContainerState): Record<string, any> {
  const state: Record<string, any> = {};
  if (c.terminated) {
    const t = c.terminated;
    state.terminated = {
      exitCode: t.exitCode,
      reason: t.reason,
      ...(t.message ? { message: t.message } : {}),
      startedAt: t.startedAt ?? null,
      finishedAt: t.finishedAt,
      containerID: c.containerID,
    };
  } else if (c.running) state.running = { startedAt: c.running.startedAt };
  else state.waiting = { reason: c.waiting?.reason ?? 'ContainerCreating', ...(c.waiting?.message ? { message: c.waiting.message } : {}) };
  const started = c.running !== undefined || c.terminated?.startedAt !== undefined;
  return {
    name: c.name,
    state,
    lastState: {},
    ready: c.ready,
    restartCount: 0,
    image: c.image,
    imageID: started ? imageID(c.image) : '',
    ...(started && c.containerID ? { containerID: c.containerID } : {}),
    started: c.running !== undefined,
  };
}

function condition(previous: any[] | undefined, type: string, status: boolean, reason?: string, message?: string): Record<string, any> {
  const value = status ? 'True' : 'False';
  const before = previous?.find((c) => c.type === type);
  const lastTransitionTime = before && before.status === value ? before.lastTransitionTime : timestamp();
  return { type, status: value, ...(reason ? { reason } : {}), ...(message ? { message } : {}), lastProbeTime: null, lastTransitionTime };
}

/** The phase for restartPolicy Never (the only policy whose containers the stand-in does not restart). */
export function podPhase(init: ContainerState[], main: ContainerState[]): 'Pending' | 'Running' | 'Succeeded' | 'Failed' {
  if (init.some((c) => c.terminated && c.terminated.exitCode !== 0)) return 'Failed';
  if (!init.every((c) => c.terminated)) return 'Pending';
  if (main.some((c) => !c.running && !c.terminated)) return 'Pending';
  if (main.some((c) => c.running)) return 'Running';
  return main.some((c) => c.terminated!.exitCode !== 0) ? 'Failed' : 'Succeeded';
}

/** Writes the kubelet's view into `draft.status` (keeps PodScheduled and unchanged transition times). */
export function writeStatus(draft: KubeObject, init: ContainerState[], main: ContainerState[], sandbox: boolean): void {
  const status = draft.status;
  const previous: any[] | undefined = status.conditions;
  const phase = podPhase(init, main);
  const completed = phase === 'Succeeded';
  const initPending = init.filter((c) => !(c.terminated && c.terminated.exitCode === 0)).map((c) => c.name);
  const unready = main.filter((c) => !c.ready).map((c) => c.name);
  const notReady = (reason: string) => (completed ? 'PodCompleted' : reason);
  const conditions = [
    condition(previous, 'PodReadyToStartContainers', sandbox),
    condition(
      previous,
      'Initialized',
      initPending.length === 0,
      initPending.length === 0 ? (completed ? 'PodCompleted' : undefined) : 'ContainersNotInitialized',
      initPending.length === 0 ? undefined : `containers with incomplete status: [${initPending.join(' ')}]`,
    ),
    condition(
      previous,
      'Ready',
      unready.length === 0,
      unready.length ? notReady('ContainersNotReady') : undefined,
      unready.length && !completed ? `containers with unready status: [${unready.join(' ')}]` : undefined,
    ),
    condition(
      previous,
      'ContainersReady',
      unready.length === 0,
      unready.length ? notReady('ContainersNotReady') : undefined,
      unready.length && !completed ? `containers with unready status: [${unready.join(' ')}]` : undefined,
    ),
    ...(previous ?? []).filter((c) => c.type === 'PodScheduled' || c.type === 'DisruptionTarget'),
  ];
  status.phase = phase;
  status.conditions = conditions;
  if (init.length > 0) status.initContainerStatuses = init.map(statusOf);
  status.containerStatuses = main.map(statusOf);
}
