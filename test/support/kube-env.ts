/**
 * The settings a gateway under test needs to run RUNTIME=kubernetes against the stand-in API server
 * (test/support/kube): its kubelet runs each container as a local process of this checkout, the model cache is a
 * host path both the tests and the pods' fetcher see, and the engine runs on the CPU.
 */
import type { KubeObject, KubeStandIn } from './kube/index.js';

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
