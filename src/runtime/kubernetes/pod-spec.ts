/**
 * The objects the Kubernetes runtime creates, built from a replica's launch:
 * one Pod per replica (as KubeRay does, not a Deployment: the controller owns
 * the replica count, versions, rollouts and the crash policy), and one Secret
 * per endpoint that holds its engines' token and the hub token, and owns the
 * endpoint's pods (deleting it garbage-collects them). The hub token goes to the
 * model fetcher, not to the engine, unless the engine downloads itself
 * (`engineTakesHubToken`).
 *
 * The pod: the instance option's GPUs as an `nvidia.com/gpu` limit, placed by
 * the GPU kind's node selector and tolerations; /dev/shm as a memory volume;
 * the model (a hub file or a W&B registry artifact's file) fetched by an init
 * container into the cache volume (so that DOWNLOADING_MODEL is observed, and
 * a second replica on the node finds it cached), within the cache's bound,
 * and leased to the pod while it runs (src/models/cache-bound.ts); the engine listening on the pod's IP at a declared port, ready
 * when its unauthenticated /ready answers; `restartPolicy: Never` (our crash
 * policy decides restarts); a termination grace that lets answers finish;
 * `FallbackToLogsOnError` so that a failure's last words reach the status; the containers run as
 * KUBERNETES_POD_USER with no privileges, and a hostPath cache is given to that user first (pod-security.ts).
 */
import type { V1Container, V1EnvVar, V1Pod, V1Probe, V1ResourceRequirements, V1Secret, V1Volume } from '@kubernetes/client-node';
import path from 'node:path';
import { formatArtifactName, parseArtifactName, type ArtifactName } from '../../domain/artifact-name.js';
import { shardOf } from '../../domain/shards.js';
import { LEASE_REFRESH_SECONDS } from '../../models/cache-bound.js';
import { engineCommand } from '../engine-command.js';
import type { ReplicaLaunch } from '../runtime.js';
import type { SourceTokens } from './endpoint-secrets.js';
import { containerSecurityContext, podSecurityContext, prepareCacheContainer } from './pod-security.js';
import { scaleQuantity } from './quantity.js';
import type { GpuPlacement, KubernetesSettings } from './settings.js';

export const MANAGED_BY = 'dedicated-endpoints';
export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  endpoint: 'dedicated-endpoints.io/endpoint',
  version: 'dedicated-endpoints.io/version',
  replica: 'dedicated-endpoints.io/replica',
  /** The endpoint's shard (src/domain/shards.ts): a gateway watches the pods of the shards it holds. */
  shard: 'dedicated-endpoints.io/shard',
} as const;
/** The label selector of every pod this runtime manages. */
export const MANAGED_SELECTOR = `${LABELS.managedBy}=${MANAGED_BY}`;
/** The pods of one shard. */
export const shardSelector = (shard: number) => `${MANAGED_SELECTOR},${LABELS.shard}=${shard}`;
/** The pods created before pods were labelled with their shard: every gateway watches them (there are none once they are replaced). */
export const UNSHARDED_SELECTOR = `${MANAGED_SELECTOR},!${LABELS.shard}`;

export const ENGINE_CONTAINER = 'engine';
export const FETCH_CONTAINER = 'fetch-model';
export const SECRET_KEYS = { engineToken: 'engine-token', hubToken: 'hub-token', wandbApiKey: 'wandb-api-key' } as const;
/** Room an emptyDir cache gets beyond KUBERNETES_MODEL_CACHE_MAX_BYTES, for what is not model bytes (links, index, leases, locks). */
export const EMPTY_DIR_HEADROOM_BYTES = 16 * 2 ** 20;

/** Kubernetes names: lowercase, '-' for our ids' '_'. */
const kubeName = (id: string) => id.toLowerCase().replace(/_/g, '-');
export const podName = (replicaId: string) => kubeName(replicaId);
export const endpointSecretName = (endpointId: string) => `${kubeName(endpointId)}-engine`;

/** The per-endpoint Secret: its engines' token, and the hub token and W&B API key when the gateway has them. */
export function endpointSecret(endpointId: string, engineToken: string, tokens: SourceTokens): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: endpointSecretName(endpointId), labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.endpoint]: endpointId } },
    type: 'Opaque',
    stringData: {
      [SECRET_KEYS.engineToken]: engineToken,
      ...(tokens.hubToken ? { [SECRET_KEYS.hubToken]: tokens.hubToken } : {}),
      ...(tokens.wandbApiKey ? { [SECRET_KEYS.wandbApiKey]: tokens.wandbApiKey } : {}),
    },
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
  /** WANDB_BASE_URL, for the model fetcher of a W&B registry artifact. */
  wandbBaseUrl?: string;
  hasWandbKey?: boolean;
  /** ENGINE_COMMAND, when an external engine runs in the image. */
  engineTemplate?: string;
  threads?: number;
}

/**
 * The W&B registry artifact a launch serves, pinned to its resolved version; null for a hub repository (whose ids
 * have no `:` and at most one `/`, so the two never look alike).
 */
export function launchArtifact(launch: ReplicaLaunch): ArtifactName | null {
  const parsed = parseArtifactName(launch.modelRepo);
  if (parsed.type === 'error') return null;
  return { ...parsed.value, version: launch.modelRevision ?? parsed.value.version };
}

/** Where the fetcher links a version's model file, and the engine finds it: by commit, or by artifact version. */
export function modelLinkPath(mount: string, launch: ReplicaLaunch): string | null {
  if (!launch.modelFile || !launch.modelRevision) return null;
  const artifact = launchArtifact(launch);
  if (artifact) {
    const { org, registry, name, version } = artifact;
    return path.posix.join(mount, 'links', 'wandb', org, registry, name, version, launch.modelFile.path);
  }
  return path.posix.join(mount, 'links', launch.modelRevision, launch.modelFile.path);
}

/** The name of the pod's lease on the model it uses, in the cache volume's leases/ (src/models/cache-bound.ts). */
export const leaseName = (namespace: string, replicaId: string) => `${namespace}.${podName(replicaId)}`;

/**
 * A value written into a container's command or arguments as it is: Kubernetes expands `$(NAME)` there from the
 * container's environment, which holds the Secret's tokens, so a model file named `$(WANDB_API_KEY).gguf` would
 * otherwise hand the key to the fetcher's error message. `$$` is Kubernetes' escape for a literal `$`.
 */
export const literal = (value: string): string => value.replace(/\$/g, () => '$$');

/**
 * An environment variable from the endpoint's Secret. The source tokens' are optional: a gateway that read the
 * Secret before another rewrote it without a token (HF_TOKEN unset on the gateways, in a rolling update) would
 * otherwise make pods that cannot start (CreateContainerConfigError); without it the fetcher asks the hub as
 * anonymous, and a repository that needs a token says so with its own error.
 */
const fromSecret = (name: string, secret: string, key: string, optional = false): V1EnvVar => ({
  name,
  valueFrom: { secretKeyRef: { name: secret, key, ...(optional ? { optional: true } : {}) } },
});

function modelVolume(settings: KubernetesSettings): V1Volume {
  const cache = settings.modelCache;
  if (cache.kind === 'hostPath') return { name: 'models', hostPath: { path: cache.path, type: 'DirectoryOrCreate' } };
  if (cache.kind === 'pvc') return { name: 'models', persistentVolumeClaim: { claimName: cache.claim } };
  // The kubelet evicts a pod whose emptyDir outgrows its sizeLimit; the fetcher keeps the models within the bound.
  const bound = settings.modelCacheMaxBytes;
  return { name: 'models', emptyDir: bound === undefined ? {} : { sizeLimit: String(bound + EMPTY_DIR_HEADROOM_BYTES) } };
}

/**
 * The lease's heartbeat: the engine container's liveness probe refreshes the mtime of the pod's lease every
 * LEASE_REFRESH_SECONDS, for as long as the container runs, so that other pods' fetchers do not evict the model it
 * serves. It never fails for the lease's sake (`|| true`): a cache volume that cannot be written to does not stop an
 * engine that has its model loaded; only a volume that hangs for half an hour does.
 */
function leaseHeartbeat(mount: string, lease: string): V1Probe {
  return {
    exec: { command: ['sh', '-c', 'touch -c "$0" || true', path.posix.join(mount, 'leases', lease)] },
    periodSeconds: LEASE_REFRESH_SECONDS,
    timeoutSeconds: 10,
    failureThreshold: 30,
  };
}

function fetchContainer(launch: ReplicaLaunch, context: PodContext, link: string): V1Container {
  const { settings } = context;
  const file = launch.modelFile!;
  const artifact = launchArtifact(launch);
  return {
    name: FETCH_CONTAINER,
    image: settings.engineImage,
    command: [...settings.nodeCommand, path.posix.join(settings.appDir, 'src/models/fetch-main.ts')],
    // Every argument is a value the gateway or a model source chose, none an expansion.
    args: [
      ...(artifact ? ['--artifact', formatArtifactName(artifact)] : ['--repo', launch.modelRepo, '--commit', launch.modelRevision!]),
      '--file',
      file.path,
      '--size',
      String(file.size),
      ...(file.sha256 ? ['--sha256', file.sha256] : []),
      '--cache-dir',
      settings.modelCacheMount,
      '--link',
      link,
      '--lease',
      leaseName(context.namespace, launch.replicaId),
      ...(settings.modelCacheMaxBytes !== undefined ? ['--max-bytes', String(settings.modelCacheMaxBytes)] : []),
    ].map(literal),
    env: artifact
      ? [
          ...(context.wandbBaseUrl ? [{ name: 'WANDB_BASE_URL', value: context.wandbBaseUrl }] : []),
          ...(context.hasWandbKey ? [fromSecret('WANDB_API_KEY', context.owner.name, SECRET_KEYS.wandbApiKey, true)] : []),
        ]
      : [
          { name: 'HF_ENDPOINT', value: context.hubEndpoint },
          ...(context.hasHubToken ? [fromSecret('HF_TOKEN', context.owner.name, SECRET_KEYS.hubToken, true)] : []),
        ],
    volumeMounts: [{ name: 'models', mountPath: settings.modelCacheMount }],
    securityContext: containerSecurityContext(settings),
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
}

/** The engine's GPUs (a limit, which is also its request) and, per GPU, the CPU and memory the GPU map asks for. */
function engineResources(numGpu: number, perGpu: GpuPlacement['requestsPerGpu']): V1ResourceRequirements {
  if (numGpu === 0) return {};
  const requests = Object.fromEntries(Object.entries(perGpu ?? {}).map(([name, quantity]) => [name, scaleQuantity(quantity, numGpu)]));
  return { limits: { 'nvidia.com/gpu': String(numGpu) }, ...(Object.keys(requests).length > 0 ? { requests } : {}) };
}

/**
 * Whether the engine container gets the hub token. The model fetcher downloads the model, so an engine that has one
 * does not need the token, and an engine runs code the gateway does not control (ENGINE_COMMAND's server, a model's
 * own code): it should not hold the organisation's token. It gets it only where it downloads from the hub itself (no
 * fetcher: an external engine handed a repository id) or where ENGINE_COMMAND names `HF_TOKEN` (`$(HF_TOKEN)` in
 * its words, e.g. `env HF_TOKEN=$(HF_TOKEN) vllm serve … --tokenizer {modelRepo}`).
 */
export function engineTakesHubToken(context: Pick<PodContext, 'engineTemplate'>, link: string | null): boolean {
  return link === null || /\bHF_TOKEN\b/.test(context.engineTemplate ?? '');
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
    literal,
  });
  const labels = {
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.endpoint]: launch.endpointId,
    [LABELS.replica]: launch.replicaId,
    [LABELS.shard]: String(shardOf(launch.endpointId)),
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
      ...(context.hasHubToken && engineTakesHubToken(context, link)
        ? [fromSecret('HF_TOKEN', context.owner.name, SECRET_KEYS.hubToken, true)]
        : []),
    ],
    resources: engineResources(launch.numGpu, placement.requestsPerGpu),
    readinessProbe: { httpGet: { path: '/ready', port: 'http' }, periodSeconds: 2, failureThreshold: 3 },
    ...(link ? { livenessProbe: leaseHeartbeat(settings.modelCacheMount, leaseName(context.namespace, launch.replicaId)) } : {}),
    volumeMounts: [
      { name: 'dshm', mountPath: '/dev/shm' },
      { name: 'models', mountPath: settings.modelCacheMount },
    ],
    securityContext: containerSecurityContext(settings),
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
  // The cache's directory is made the fetcher's before it runs (none when the pod fetches nothing).
  const prepare = link ? prepareCacheContainer(settings) : undefined;
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
      // The engine and the fetcher never call the API server: the namespace's service account token stays out.
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: settings.terminationGraceSeconds,
      securityContext: podSecurityContext(settings),
      ...(Object.keys(placement.nodeSelector).length > 0 ? { nodeSelector: placement.nodeSelector } : {}),
      ...(placement.tolerations.length > 0 ? { tolerations: placement.tolerations } : {}),
      volumes: [{ name: 'dshm', emptyDir: { medium: 'Memory' } }, modelVolume(settings)],
      ...(link ? { initContainers: [...(prepare ? [prepare] : []), fetchContainer(launch, context, link)] } : {}),
      containers: [engine],
    },
  };
}
