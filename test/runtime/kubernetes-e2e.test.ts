/**
 * The Kubernetes runtime on a real cluster: runs only when KUBECONFIG_E2E
 * names a kubeconfig (and is skipped, saying so, everywhere else: no cluster
 * can run on the machines that build this project). Run it from where pod IPs
 * are reachable (a pod in the cluster, or a node), as the gateway runs:
 *
 *   KUBECONFIG_E2E=~/.kube/config ENGINE_IMAGE=registry.example/dedicated-endpoints:TAG \
 *     [KUBERNETES_NAMESPACE=…] [E2E_GPU_TYPE=H100] [E2E_MODEL_REPO=… E2E_MODEL_COMMIT=… E2E_MODEL_FILE=… E2E_MODEL_SIZE=…] \
 *     npx vitest run test/runtime/kubernetes-e2e.test.ts
 *
 * It starts one replica through the runtime (the pod, its model fetched by the
 * init container from the hub, the engine ready on its GPU), asks the engine
 * for its health and one answer at the pod's address, reads its log, stops
 * it, and checks the pod and the endpoint's Secret are gone.
 */
import { startReplica } from '../support/start-replica.js';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { GPU_TYPES, type GpuType } from '../../src/domain/instance-catalog.js';
import { KubernetesRuntime } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { engineAuthHeaders } from '../../src/engine-client/engine-client.js';

const KUBECONFIG = process.env.KUBECONFIG_E2E;

if (!KUBECONFIG) {
  console.log('kubernetes-e2e: skipped — set KUBECONFIG_E2E (and ENGINE_IMAGE) to run it against a real cluster');
}

describe.skipIf(!KUBECONFIG)('the Kubernetes runtime on a real cluster (KUBECONFIG_E2E)', () => {
  test('a replica starts in a pod, serves from its GPU, logs, and is gone once stopped', async () => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(KUBECONFIG!);
    const runtime = new KubernetesRuntime({
      settings: readKubernetesSettings(process.env),
      kubeConfig,
      hubEndpoint: process.env.HF_ENDPOINT ?? 'https://huggingface.co',
      ...(process.env.HF_TOKEN ? { hubToken: process.env.HF_TOKEN } : {}),
      log: (message, error) => console.error(`[kubernetes] ${message}`, error ?? ''),
    });
    await runtime.open();
    const gpuType = (process.env.E2E_GPU_TYPE ?? 'H100') as GpuType;
    expect(GPU_TYPES).toContain(gpuType);
    const endpointId = `ep_e2e${Date.now().toString(36)}`;
    const replicaId = `rep_e2e${Date.now().toString(36)}`;
    const phases: string[] = [];
    try {
      const ref = await startReplica(
        runtime,
        {
          replicaId,
          endpointId,
          versionIndex: 0,
          modelPath: null,
          modelRepo: process.env.E2E_MODEL_REPO ?? 'Qwen/Qwen3-0.6B-GGUF',
          modelRevision: process.env.E2E_MODEL_COMMIT ?? 'main',
          modelFile: {
            path: process.env.E2E_MODEL_FILE ?? 'Qwen3-0.6B-Q8_0.gguf',
            sha256: null,
            size: Number(process.env.E2E_MODEL_SIZE ?? 639_446_688),
          },
          gpuType,
          numGpu: 1,
          maxBatchSize: 4,
          contextSize: 4096,
          maxInputLength: 2048,
          addSpecialTokens: false,
          skipSpecialTokens: true,
        },
        { timeoutMs: 20 * 60_000, onProgress: ({ phase }) => void phases.push(phase) },
      );
      expect(phases).toContain('DOWNLOADING_MODEL');
      expect(runtime.liveness(ref).kind).toBe('alive');
      const health = await runtime.health(ref, 10_000);
      expect(health?.status).toBe('ok');
      const answer = await fetch(`${ref.address}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...engineAuthHeaders(ref.token) },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 8 }),
      });
      expect(answer.status).toBe(200);
      expect(await runtime.logTail(ref)).toContain('ENGINE_READY');
      await runtime.stop(ref, 10_000);
      expect(runtime.liveness(ref).kind).toBe('dead');
    } finally {
      await runtime.forgetEndpoint(endpointId);
      await runtime.close();
    }
  }, 1_800_000);
});
