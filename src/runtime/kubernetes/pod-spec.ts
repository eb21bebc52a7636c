/**
 * The objects the Kubernetes runtime creates, built from a replica's launch:
 * one Pod per replica (as KubeRay does, not a Deployment: the controller owns
 * the replica count, versions, rollouts and the crash policy), and one Secret
 * per endpoint that holds its engines' token and the hub token, and owns the
 * endpoint's pods (deleting it garbage-collects them).
 *
 * The pod: the instance option's GPUs as an `nvidia.com/gpu` limit, placed by
 * the GPU kind's node selector and tolerations; /dev/shm as a memory volume;
 * the model fetched by an init container into the cache volume (so that
 * DOWNLOADING_MODEL is observed, and a second replica on the node finds it
 * cached); the engine listening on the pod's IP at a declared port, ready
 * when its unauthenticated /ready answers; `restartPolicy: Never` (our crash
 * policy decides restarts); a termination grace that lets answers finish;
 * `FallbackToLogsOnError` so that a failure's last words reach the status.
 */
import type { V1Container, V1EnvVar, V1Pod, V1Secret, V1Volume } from '@kubernetes/client-node';
import path from 'node:path';
import { engineCommand } from '../engine-command.js';
import type { ReplicaLaunch } from '../runtime.js';
import type { KubernetesSettings } from './settings.js';

export const MANAGED_BY = 'dedicated-endpoints';
export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  endpoint: 'dedicated-endpoints.io/endpoint',
  version: 'dedicated-endpoints.io/version',
  replica: 'dedicated-endpoints.io/replica',
} as const;
/** The label selector of every pod this runtime manages. */
export const MANAGED_SELECTOR = `${LABELS.managedBy}=${MANAGED_BY}`;

export const ENGINE_CONTAINER = 'engine';
export const FETCH_CONTAINER = 'fetch-model';
export const SECRET_KEYS = { engineToken: 'engine-token', hubToken: 'hub-token' } as const;

/** Kubernetes names: lowercase, '-' for our ids' '_'. */
const kubeName = (id: string) => id.toLowerCase().replace(/_/g, '-');
export const podName = (replicaId: string) => kubeName(replicaId);
export const endpointSecretName = (endpointId: string) => `${kubeName(endpointId)}-engine`;

/** The per-endpoint Secret: its engines' token, and the hub token when the gateway has one. */
export function endpointSecret(endpointId: string, engineToken: string, hubToken: string | undefined): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: endpointSecretName(endpointId), labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.endpoint]: endpointId } },
    type: 'Opaque',
    stringData: { [SECRET_KEYS.engineToken]: engineToken, ...(hubToken ? { [SECRET_KEYS.hubToken]: hubToken } : {}) },
  };
}

export interface PodContext {
  settings: KubernetesSettings;
  namespace: string;
  /** The endpoint's Secret, the pod's owner. */
  owner: { name: string; uid: string };
  /** HF_ENDPOINT, for the model fetcher. */
  hubEndpoint: string;
  hasHubToken: boolean;
  /** ENGINE_COMMAND, when an external engine runs in the image. */
  engineTemplate?: string;
  threads?: number;
}

/** Where the fetcher links a version's model file, and the engine finds it. */
export function modelLinkPath(mount: string, launch: ReplicaLaunch): string | null {
  if (!launch.modelFile || !launch.modelRevision) return null;
  return path.posix.join(mount, 'links', launch.modelRevision, launch.modelFile.path);
}

const fromSecret = (name: string, secret: string, key: string, optional = false): V1EnvVar => ({
  name,
  valueFrom: { secretKeyRef: { name: secret, key, ...(optional ? { optional: true } : {}) } },
});

function modelVolume(settings: KubernetesSettings): V1Volume {
  const cache = settings.modelCache;
  if (cache.kind === 'hostPath') return { name: 'models', hostPath: { path: cache.path, type: 'DirectoryOrCreate' } };
  if (cache.kind === 'pvc') return { name: 'models', persistentVolumeClaim: { claimName: cache.claim } };
  return { name: 'models', emptyDir: {} };
}

function fetchContainer(launch: ReplicaLaunch, context: PodContext, link: string): V1Container {
  const { settings } = context;
  const file = launch.modelFile!;
  return {
    name: FETCH_CONTAINER,
    image: settings.engineImage,
    command: [...settings.nodeCommand, path.posix.join(settings.appDir, 'src/models/fetch-main.ts')],
    args: [
      '--repo',
      launch.modelRepo,
      '--commit',
      launch.modelRevision!,
      '--file',
      file.path,
      '--size',
      String(file.size),
      ...(file.sha256 ? ['--sha256', file.sha256] : []),
      '--cache-dir',
      settings.modelCacheMount,
      '--link',
      link,
    ],
    env: [
      { name: 'HF_ENDPOINT', value: context.hubEndpoint },
      ...(context.hasHubToken ? [fromSecret('HF_TOKEN', context.owner.name, SECRET_KEYS.hubToken)] : []),
    ],
    volumeMounts: [{ name: 'models', mountPath: settings.modelCacheMount }],
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
}

export function replicaPod(launch: ReplicaLaunch, context: PodContext): V1Pod {
  const { settings } = context;
  const placement = settings.gpuPlacement[launch.gpuType];
  const link = modelLinkPath(settings.modelCacheMount, launch);
  const command = engineCommand({ ...launch, modelPath: link ?? launch.modelPath }, settings.enginePort, {
    ...(context.engineTemplate ? { template: context.engineTemplate } : {}),
    ...(context.threads ? { threads: context.threads } : {}),
    cpuOnly: settings.engineCpuOnly,
    // Kubernetes expands $(POD_IP) from the container's environment.
    host: '$(POD_IP)',
    entry: [...settings.nodeCommand, path.posix.join(settings.appDir, 'src/engine/main.ts')],
  });
  const labels = {
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.endpoint]: launch.endpointId,
    [LABELS.replica]: launch.replicaId,
    ...(launch.versionIndex !== undefined ? { [LABELS.version]: String(launch.versionIndex) } : {}),
  };
  const engine: V1Container = {
    name: ENGINE_CONTAINER,
    image: settings.engineImage,
    command: [command.file],
    args: command.args,
    ports: [{ name: 'http', containerPort: settings.enginePort, protocol: 'TCP' }],
    env: [
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      { name: 'REPLICA_ID', value: launch.replicaId },
      fromSecret('ENGINE_TOKEN', context.owner.name, SECRET_KEYS.engineToken),
      { name: 'HF_ENDPOINT', value: context.hubEndpoint },
      ...(context.hasHubToken ? [fromSecret('HF_TOKEN', context.owner.name, SECRET_KEYS.hubToken)] : []),
    ],
    resources: launch.numGpu > 0 ? { limits: { 'nvidia.com/gpu': String(launch.numGpu) } } : {},
    readinessProbe: { httpGet: { path: '/ready', port: 'http' }, periodSeconds: 2, failureThreshold: 3 },
    volumeMounts: [
      { name: 'dshm', mountPath: '/dev/shm' },
      { name: 'models', mountPath: settings.modelCacheMount },
    ],
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: podName(launch.replicaId),
      namespace: context.namespace,
      labels,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Secret', name: context.owner.name, uid: context.owner.uid, blockOwnerDeletion: false }],
    },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: settings.terminationGraceSeconds,
      ...(Object.keys(placement.nodeSelector).length > 0 ? { nodeSelector: placement.nodeSelector } : {}),
      ...(placement.tolerations.length > 0 ? { tolerations: placement.tolerations } : {}),
      volumes: [{ name: 'dshm', emptyDir: { medium: 'Memory' } }, modelVolume(settings)],
      ...(link ? { initContainers: [fetchContainer(launch, context, link)] } : {}),
      containers: [engine],
    },
  };
}
