/**
 * The Kubernetes runtime's configuration (RUNTIME=kubernetes), read from the
 * environment with the same rules as the rest (config-env.ts). Every variable
 * is documented in docs/kubernetes.md.
 */
import { readFileSync } from 'node:fs';
import { ConfigError, optional, readInteger, readSize, type Env } from '../../config-env.js';
import { GPU_TYPES, type GpuType } from '../../domain/instance-catalog.js';
import { isQuantity } from './quantity.js';

/** Where a GPU kind's pods go: the node labels to select, and the taints they tolerate. */
export interface GpuPlacement {
  nodeSelector: Record<string, string>;
  tolerations: { key: string; operator?: 'Exists' | 'Equal'; value?: string; effect?: string }[];
  /**
   * The CPU and memory the engine container requests per GPU (times the option's GPUs): its pod is then Burstable,
   * not BestEffort (the first a node under pressure evicts), and a namespace whose ResourceQuota limits requests
   * admits it. Unset: no request.
   */
  requestsPerGpu?: { cpu?: string; memory?: string };
}

/** The volume that holds downloaded models: a directory of the node, a claim, or a pod's own scratch space. */
export type ModelCacheVolume = { kind: 'hostPath'; path: string } | { kind: 'pvc'; claim: string } | { kind: 'emptyDir' };

export interface KubernetesSettings {
  /** KUBERNETES_NAMESPACE; @default the in-cluster namespace, else the kubeconfig context's, else `default` */
  namespace: string | undefined;
  /** ENGINE_IMAGE: the image replicas run (our image runs the built-in engine and the model fetcher). */
  engineImage: string;
  /** KUBERNETES_NODE_COMMAND: how the image runs our TypeScript entry points. @default `node --import tsx` */
  nodeCommand: string[];
  /** KUBERNETES_APP_DIR: where the image holds this repository. @default `/app` */
  appDir: string;
  /** KUBERNETES_ENGINE_PORT: the port the engine container declares and listens on. @default 8000 */
  enginePort: number;
  /** KUBERNETES_GPU_NODE_MAP: JSON, GPU kind → { nodeSelector, tolerations }. @default the NVIDIA GPU feature discovery labels */
  gpuPlacement: Record<GpuType, GpuPlacement>;
  /** KUBERNETES_MODEL_CACHE: `hostPath:/dir`, `pvc:NAME` or `emptyDir`. @default hostPath:/var/cache/dedicated-models */
  modelCache: ModelCacheVolume;
  /** KUBERNETES_MODEL_CACHE_MOUNT: where the model cache is mounted in the pods. @default /models */
  modelCacheMount: string;
  /**
   * KUBERNETES_MODEL_CACHE_MAX_BYTES: the most bytes of model files the cache volume may hold (complete files and
   * downloads under way); the pods' fetchers evict the least recently used files no pod uses (src/models/cache-bound.ts),
   * and an emptyDir gets a `sizeLimit` just above it. @default unbounded (only the volume's free space)
   */
  modelCacheMaxBytes: number | undefined;
  /** KUBERNETES_SCHEDULING_DEADLINE_MS: how long a replica may wait for a node (a cluster autoscaler adding one). @default 900000 */
  schedulingDeadlineMs: number;
  /**
   * KUBERNETES_IMAGE_PULL_DEADLINE_MS: how long the kubelet may retry pulling the image or creating a container
   * (ErrImagePull, ImagePullBackOff, CreateContainerError: a registry's 429 or outage passes) before the start fails
   * with WORKLOAD_INIT_SETTINGS_ERROR. @default 180000
   */
  imagePullDeadlineMs: number;
  /** KUBERNETES_TERMINATION_GRACE_SECONDS: how long a stopping engine may take to finish its answers. @default 300 */
  terminationGraceSeconds: number;
  /** KUBERNETES_ENGINE_CPU_ONLY: run the built-in engine without GPU offload (clusters without GPUs, tests). @default false */
  engineCpuOnly: boolean;
  /**
   * KUBERNETES_POD_USER: `UID:GID`, the user and group the engine pods' fetcher and engine run as, and own the model
   * cache as (src/runtime/kubernetes/pod-security.ts). `0:0` runs them as root, as an image built on vLLM's expects.
   * @default 1000:1000, our image's user (Dockerfile)
   */
  podUser: PodUser;
}

export interface PodUser {
  uid: number;
  gid: number;
}

/** The largest user or group id Kubernetes accepts. */
const MAX_ID = 2_147_483_647;

/** The `nvidia.com/gpu.product` label values of NVIDIA's GPU feature discovery, per kind of the catalog. */
export const DEFAULT_GPU_PRODUCTS: Record<GpuType, string> = {
  A100: 'NVIDIA-A100-SXM4-80GB',
  H100: 'NVIDIA-H100-80GB-HBM3',
  H200: 'NVIDIA-H200',
  B200: 'NVIDIA-B200',
};

const GPU_TOLERATION = { key: 'nvidia.com/gpu', operator: 'Exists' as const, effect: 'NoSchedule' };

function defaultPlacement(): Record<GpuType, GpuPlacement> {
  return Object.fromEntries(
    GPU_TYPES.map((kind) => [
      kind,
      { nodeSelector: { 'nvidia.com/gpu.product': DEFAULT_GPU_PRODUCTS[kind] }, tolerations: [GPU_TOLERATION] },
    ]),
  ) as unknown as Record<GpuType, GpuPlacement>;
}

const isStringMap = (value: unknown): value is Record<string, string> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && Object.values(value).every((v) => typeof v === 'string');

function readGpuPlacement(env: Env): Record<GpuType, GpuPlacement> {
  const raw = optional(env, 'KUBERNETES_GPU_NODE_MAP');
  const placement = defaultPlacement();
  if (!raw) return placement;
  const invalid = () =>
    new ConfigError(
      'KUBERNETES_GPU_NODE_MAP',
      `must be JSON mapping GPU kinds (${GPU_TYPES.join(', ')}) to { "nodeSelector": {label: value}, "tolerations": [...], ` +
        `"requestsPerGpu": { "cpu": quantity, "memory": quantity } } (requestsPerGpu optional; quantities such as "8", "500m", "64Gi")`,
      raw,
    );
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw invalid();
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalid();
  for (const [kind, value] of Object.entries(parsed)) {
    if (!(GPU_TYPES as readonly string[]).includes(kind)) throw invalid();
    const entry = value as { nodeSelector?: unknown; tolerations?: unknown; requestsPerGpu?: unknown };
    if (typeof entry !== 'object' || entry === null) throw invalid();
    if (entry.nodeSelector !== undefined && !isStringMap(entry.nodeSelector)) throw invalid();
    if (entry.tolerations !== undefined && !Array.isArray(entry.tolerations)) throw invalid();
    const requests = entry.requestsPerGpu;
    if (
      requests !== undefined &&
      !(isStringMap(requests) && Object.entries(requests).every(([name, q]) => (name === 'cpu' || name === 'memory') && isQuantity(q)))
    )
      throw invalid();
    placement[kind as GpuType] = {
      nodeSelector: (entry.nodeSelector as Record<string, string> | undefined) ?? {},
      tolerations: (entry.tolerations as GpuPlacement['tolerations'] | undefined) ?? [],
      ...(requests ? { requestsPerGpu: requests as GpuPlacement['requestsPerGpu'] } : {}),
    };
  }
  return placement;
}

function readModelCache(env: Env): ModelCacheVolume {
  const raw = optional(env, 'KUBERNETES_MODEL_CACHE') ?? 'hostPath:/var/cache/dedicated-models';
  if (raw === 'emptyDir') return { kind: 'emptyDir' };
  const [kind, value] = [raw.slice(0, raw.indexOf(':')), raw.slice(raw.indexOf(':') + 1)];
  if (kind === 'hostPath' && value.startsWith('/')) return { kind: 'hostPath', path: value };
  if (kind === 'pvc' && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(value)) return { kind: 'pvc', claim: value };
  throw new ConfigError('KUBERNETES_MODEL_CACHE', 'must be hostPath:/absolute/dir, pvc:CLAIM-NAME or emptyDir', raw);
}

function readPodUser(env: Env): PodUser {
  const raw = optional(env, 'KUBERNETES_POD_USER') ?? '1000:1000';
  const match = /^(\d{1,10}):(\d{1,10})$/.exec(raw);
  const [uid, gid] = match ? [Number(match[1]), Number(match[2])] : [NaN, NaN];
  if (!(uid <= MAX_ID && gid <= MAX_ID))
    throw new ConfigError('KUBERNETES_POD_USER', `must be UID:GID, two numbers from 0 to ${MAX_ID} (e.g. 1000:1000; 0:0 is root)`, raw);
  return { uid, gid };
}

/** The namespace this pod runs in, when the gateway runs in a cluster. */
function inClusterNamespace(): string | undefined {
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

export function readKubernetesSettings(env: Env): KubernetesSettings {
  const engineImage = optional(env, 'ENGINE_IMAGE');
  if (!engineImage) throw new ConfigError('ENGINE_IMAGE', 'must name the image replicas run when RUNTIME=kubernetes', '');
  const namespace = optional(env, 'KUBERNETES_NAMESPACE') ?? inClusterNamespace();
  if (namespace !== undefined && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace)) {
    throw new ConfigError('KUBERNETES_NAMESPACE', 'must be a namespace name (lowercase letters, digits and -)', namespace);
  }
  const cpuOnly = optional(env, 'KUBERNETES_ENGINE_CPU_ONLY');
  if (cpuOnly !== undefined && cpuOnly !== 'true' && cpuOnly !== 'false') {
    throw new ConfigError('KUBERNETES_ENGINE_CPU_ONLY', 'must be true or false', cpuOnly);
  }
  const mount = optional(env, 'KUBERNETES_MODEL_CACHE_MOUNT') ?? '/models';
  if (!mount.startsWith('/')) throw new ConfigError('KUBERNETES_MODEL_CACHE_MOUNT', 'must be an absolute path', mount);
  const maxBytes = readSize(env, 'KUBERNETES_MODEL_CACHE_MAX_BYTES');
  if (maxBytes === 0)
    throw new ConfigError(
      'KUBERNETES_MODEL_CACHE_MAX_BYTES',
      'must be more than 0 bytes (unset: unbounded)',
      env.KUBERNETES_MODEL_CACHE_MAX_BYTES ?? '',
    );
  return {
    namespace,
    engineImage,
    nodeCommand: (optional(env, 'KUBERNETES_NODE_COMMAND') ?? 'node --import tsx').split(/\s+/).filter(Boolean),
    appDir: optional(env, 'KUBERNETES_APP_DIR') ?? '/app',
    enginePort: readInteger(env, 'KUBERNETES_ENGINE_PORT', 8000, 1, 65535),
    gpuPlacement: readGpuPlacement(env),
    modelCache: readModelCache(env),
    modelCacheMount: mount,
    modelCacheMaxBytes: maxBytes,
    schedulingDeadlineMs: readInteger(env, 'KUBERNETES_SCHEDULING_DEADLINE_MS', 900_000, 0, 7 * 86_400_000),
    imagePullDeadlineMs: readInteger(env, 'KUBERNETES_IMAGE_PULL_DEADLINE_MS', 180_000, 0, 86_400_000),
    terminationGraceSeconds: readInteger(env, 'KUBERNETES_TERMINATION_GRACE_SECONDS', 300, 0, 86_400),
    engineCpuOnly: cpuOnly === 'true',
    podUser: readPodUser(env),
  };
}
