/**
 * Starts a replica through a runtime the way the controller's passes do,
 * for tests of a runtime alone: `ensure` places it, then `observe` is read
 * (every 20 ms unless told otherwise) until it is ready,
 * or dead (thrown as the ReplicaStartError the controller would record).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesRuntime } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { ReplicaStartError, type ReplicaLaunch, type ReplicaRef, type Runtime, type StartProgress } from '../../src/runtime/runtime.js';

export async function startReplica(
  runtime: Runtime,
  launch: ReplicaLaunch,
  options: { timeoutMs?: number; pollMs?: number; onProgress?: (progress: StartProgress) => void } = {},
): Promise<ReplicaRef> {
  const ref = await runtime.ensure(launch);
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  while (Date.now() < deadline) {
    const seen = runtime.observe(ref);
    if (seen.state === 'ready') return { ...ref, address: seen.address };
    if (seen.state === 'dead') {
      throw new ReplicaStartError(seen.code ?? 'WORKLOAD_INIT_GRPC_ERROR', seen.reason ?? 'the engine stopped before it was ready');
    }
    if (seen.state === 'starting') options.onProgress?.({ phase: seen.phase, ...(seen.reason ? { reason: seen.reason } : {}) });
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 20));
  }
  throw new Error(`${launch.replicaId} was not ready within ${options.timeoutMs ?? 120_000} ms`);
}

/** A launch of a pinned GGUF on one H100, for a runtime's tests that place replicas without a controller. */
export function simLaunch(replicaId: string, endpointId: string): ReplicaLaunch {
  return {
    replicaId,
    endpointId,
    versionIndex: 1,
    modelPath: null,
    modelRepo: 'org/model',
    modelRevision: '0123456789abcdef0123456789abcdef01234567',
    modelFile: { path: 'model-Q8_0.gguf', sha256: null, size: 1 << 20 },
    gpuType: 'H100',
    numGpu: 1,
    maxBatchSize: 8,
    contextSize: 2048,
    maxInputLength: 1024,
    addSpecialTokens: false,
    skipSpecialTokens: true,
  };
}

/** A Kubernetes runtime on a stand-in's kubeconfig: namespace `default`, engine image `sim:1`, no hub; `env`: more settings. */
export function simKubernetesRuntime(kubeConfig: KubeConfig, env: Record<string, string> = {}): KubernetesRuntime {
  return new KubernetesRuntime({
    settings: readKubernetesSettings({ ENGINE_IMAGE: 'sim:1', KUBERNETES_NAMESPACE: 'default', ...env }),
    kubeConfig,
    hubEndpoint: 'http://hub.invalid',
    log: () => {},
  });
}
