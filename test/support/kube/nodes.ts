/**
 * Simulated nodes of the stand-in cluster, registered and changed by tests as a node's kubelet and the node
 * lifecycle controller would: labels (with the well-known kubernetes.io/hostname, os and arch), taints, capacity and
 * allocatable (nvidia.com/gpu, cpu, memory, pods), and the Ready condition, a not-ready node getting the
 * node.kubernetes.io/not-ready taints as the node lifecycle controller adds them.
 */
import { newUid, timestamp, type KubeObject } from './objects.js';
import type { Taint } from './pod-spec.js';

export interface NodeSpec {
  name: string;
  labels?: Record<string, string>;
  taints?: Taint[];
  /** nvidia.com/gpu capacity and allocatable (omitted when 0 / undefined) */
  gpus?: number;
  /** default "64" */
  cpu?: string;
  /** default "512Gi" */
  memory?: string;
  /** default 110 */
  pods?: number;
  /** extra or overriding allocatable (and capacity) entries */
  resources?: Record<string, string>;
  /** default true */
  ready?: boolean;
  unschedulable?: boolean;
}

const NOT_READY = 'node.kubernetes.io/not-ready';

function condition(type: string, ok: boolean, reason: string, message: string, now: string) {
  return { type, status: ok ? 'True' : 'False', lastHeartbeatTime: now, lastTransitionTime: now, reason, message };
}

export function nodeObject(spec: NodeSpec): KubeObject {
  const now = timestamp();
  const ready = spec.ready ?? true;
  const resources: Record<string, string> = {
    cpu: spec.cpu ?? '64',
    memory: spec.memory ?? '512Gi',
    'ephemeral-storage': '1Ti',
    pods: String(spec.pods ?? 110),
    ...(spec.gpus ? { 'nvidia.com/gpu': String(spec.gpus) } : {}),
    ...spec.resources,
  };
  const taints = (spec.taints ?? []).filter((t) => t.key !== NOT_READY);
  if (!ready)
    taints.push(
      { key: NOT_READY, effect: 'NoSchedule', timeAdded: now } as Taint,
      { key: NOT_READY, effect: 'NoExecute', timeAdded: now } as Taint,
    );
  return {
    kind: 'Node',
    apiVersion: 'v1',
    metadata: {
      name: spec.name,
      uid: newUid(),
      creationTimestamp: now,
      labels: {
        'beta.kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/hostname': spec.name,
        'kubernetes.io/os': 'linux',
        ...spec.labels,
      },
    },
    spec: { ...(taints.length ? { taints } : {}), ...(spec.unschedulable ? { unschedulable: true } : {}) },
    status: {
      capacity: { ...resources },
      allocatable: { ...resources },
      conditions: [
        condition('MemoryPressure', false, 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available', now),
        condition('DiskPressure', false, 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure', now),
        condition('PIDPressure', false, 'KubeletHasSufficientPID', 'kubelet has sufficient PID available', now),
        ready
          ? condition('Ready', true, 'KubeletReady', 'kubelet is posting ready status', now)
          : condition('Ready', false, 'KubeletNotReady', 'container runtime network not ready: NetworkReady=false', now),
      ],
      addresses: [
        { type: 'InternalIP', address: '127.0.0.1' },
        { type: 'Hostname', address: spec.name },
      ],
      nodeInfo: {
        architecture: 'amd64',
        operatingSystem: 'linux',
        osImage: 'Ubuntu 22.04.4 LTS',
        kernelVersion: '5.15.0',
        containerRuntimeVersion: 'containerd://1.7.20',
        kubeletVersion: 'v1.31.0',
        kubeProxyVersion: 'v1.31.0',
        machineID: '',
        systemUUID: '',
        bootID: '',
      },
    },
  };
}

/** What a node was registered with, recovered from its object (to apply a partial change). */
export function nodeSpecOf(node: KubeObject): NodeSpec {
  const { allocatable } = node.status;
  const ready = node.status.conditions.find((c: any) => c.type === 'Ready')?.status === 'True';
  const { cpu, memory, pods, 'nvidia.com/gpu': gpus, ...resources } = allocatable;
  delete resources['ephemeral-storage'];
  return {
    name: node.metadata.name,
    labels: node.metadata.labels,
    taints: (node.spec.taints ?? []).filter((t: Taint) => t.key !== NOT_READY),
    gpus: gpus ? Number(gpus) : undefined,
    cpu,
    memory,
    pods: Number(pods),
    resources,
    ready,
    unschedulable: node.spec.unschedulable,
  };
}
