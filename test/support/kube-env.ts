/**
 * The settings a gateway under test needs to run RUNTIME=kubernetes against the stand-in API server
 * (test/support/kube): its kubelet runs each container as a local process of this checkout, the model cache is a
 * host path both the tests and the pods' fetcher see, and the engine runs on the CPU.
 */
import type { PodContext } from '../../src/runtime/kubernetes/pod-spec.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import type { ReplicaLaunch } from '../../src/runtime/runtime.js';
import type { KubeObject, KubeStandIn } from './kube/index.js';

/** A replica to build a pod for (replicaPod), with `changes`: one H100, a hub model's 4 GB file. */
export function podLaunch(changes: Partial<ReplicaLaunch> = {}): ReplicaLaunch {
  return {
    replicaId: 'rep_abc',
    endpointId: 'ep_xyz',
    versionIndex: 0,
    modelPath: null,
    modelRepo: 'acme/llama-GGUF',
    modelRevision: 'c'.repeat(40),
    modelFile: { path: 'llama-Q4_K_M.gguf', sha256: null, size: 4_000_000_000 },
    gpuType: 'H100',
    numGpu: 1,
    maxBatchSize: 4,
    contextSize: 2048,
    maxInputLength: 1024,
    addSpecialTokens: true,
    skipSpecialTokens: true,
    ...changes,
  };
}

/** What replicaPod needs of the gateway, in namespace `ml`, with the runtime's settings read from `env`; both sources' tokens set. */
export function podContext(env: Record<string, string> = {}): PodContext {
  return {
    settings: readKubernetesSettings({ ENGINE_IMAGE: 'img:1', ...env }),
    namespace: 'ml',
    owner: { name: 'ep-xyz-engine', uid: 'u-1' },
    hubEndpoint: 'https://huggingface.co',
    hasHubToken: true,
    wandbBaseUrl: 'https://api.wandb.ai',
    hasWandbKey: true,
  };
}

export function kubernetesTestEnv(namespace: string, cacheDir: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    RUNTIME: 'kubernetes',
    ENGINE_IMAGE: 'dedicated-endpoints:test',
    KUBERNETES_NAMESPACE: namespace,
    KUBERNETES_NODE_COMMAND: `${process.execPath} --import tsx`,
    KUBERNETES_APP_DIR: process.cwd(),
    KUBERNETES_MODEL_CACHE: `hostPath:${cacheDir}`,
    KUBERNETES_MODEL_CACHE_MOUNT: cacheDir,
    KUBERNETES_ENGINE_CPU_ONLY: 'true',
    KUBERNETES_TERMINATION_GRACE_SECONDS: '5',
    // The kubelet's retries of a failing image pull end a start after this long (production: 3 minutes).
    KUBERNETES_IMAGE_PULL_DEADLINE_MS: '8000',
    ...env,
  };
}

/** The stand-in's pods of an endpoint (by our label); `live`: not being deleted. */
export function endpointPods(kube: Pick<KubeStandIn, 'pods'>, namespace: string, endpointId: string, live = false): KubeObject[] {
  return kube
    .pods(namespace)
    .filter(
      (p) =>
        (p.metadata as { labels?: Record<string, string> }).labels?.['dedicated-endpoints.io/endpoint'] === endpointId &&
        (!live || !(p.metadata as { deletionTimestamp?: string }).deletionTimestamp),
    );
}
