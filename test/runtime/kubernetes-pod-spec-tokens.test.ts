/**
 * Which container of an engine Pod holds the hub token (src/runtime/kubernetes/pod-spec.ts): the model fetcher, which
 * downloads the model; the engine only where it downloads from the hub itself (an external engine handed a repository
 * id, no fetcher) or where ENGINE_COMMAND names HF_TOKEN. An engine runs code the gateway does not control (the
 * operator's server, a model's own code), which should not read the organisation's hub token.
 */
import { Pod as PodModel } from 'kubernetes-models/v1/Pod';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { ENGINE_CONTAINER, FETCH_CONTAINER, replicaPod, SECRET_KEYS } from '../../src/runtime/kubernetes/pod-spec.js';
import { podContext, podLaunch } from '../support/kube-env.js';

const engineOf = (pod: V1Pod): V1Container => pod.spec!.containers.find((c) => c.name === ENGINE_CONTAINER)!;
const fetcherOf = (pod: V1Pod): V1Container | undefined => pod.spec!.initContainers?.find((c) => c.name === FETCH_CONTAINER);
const names = (container: V1Container | undefined) => (container?.env ?? []).map((e) => e.name);
const hubToken = { secretKeyRef: { name: 'ep-xyz-engine', key: SECRET_KEYS.hubToken, optional: true } };

describe('the hub token in an engine Pod', () => {
  test('a hub file with the built-in engine: the fetcher has the token, the engine does not', () => {
    const pod = replicaPod(podLaunch(), podContext());
    expect(() => new PodModel(pod as never).validate()).not.toThrow();
    expect(fetcherOf(pod)!.env).toContainEqual({ name: 'HF_TOKEN', valueFrom: hubToken });
    expect(names(engineOf(pod))).toEqual(['POD_IP', 'REPLICA_ID', 'ENGINE_TOKEN', 'HF_ENDPOINT']);
    // Nothing else in the engine's container names the Secret's hub or W&B keys.
    const engineText = JSON.stringify(engineOf(pod));
    expect(engineText).not.toContain(SECRET_KEYS.hubToken);
    expect(engineText).not.toContain(SECRET_KEYS.wandbApiKey);
  });

  test('an ENGINE_COMMAND that does not name HF_TOKEN, on a fetched file: the engine does not get it', () => {
    const pod = replicaPod(podLaunch(), { ...podContext(), engineTemplate: 'llama-server -m {model} --port {port}' });
    expect(fetcherOf(pod)).toBeDefined();
    expect(names(engineOf(pod))).not.toContain('HF_TOKEN');
  });

  test('an ENGINE_COMMAND that names $(HF_TOKEN): the engine gets it, and the fetcher still has it', () => {
    const template = 'env HF_TOKEN=$(HF_TOKEN) vllm serve {model} --tokenizer {modelRepo} --port {port}';
    const pod = replicaPod(podLaunch(), { ...podContext(), engineTemplate: template });
    expect(engineOf(pod).env).toContainEqual({ name: 'HF_TOKEN', valueFrom: hubToken });
    expect(engineOf(pod).command).toEqual(['env']);
    expect(engineOf(pod).args![0]).toBe('HF_TOKEN=$(HF_TOKEN)');
    expect(fetcherOf(pod)!.env).toContainEqual({ name: 'HF_TOKEN', valueFrom: hubToken });
  });

  test('an external engine handed a repository id (no GGUF, no fetcher) downloads it itself: it gets the token', () => {
    const launch = podLaunch({ modelRepo: 'acme/llama-safetensors', modelFile: undefined });
    const pod = replicaPod(launch, { ...podContext(), engineTemplate: 'vllm serve {model} --port {port}' });
    expect(pod.spec!.initContainers).toBeUndefined();
    expect(engineOf(pod).args![1]).toBe('acme/llama-safetensors');
    expect(engineOf(pod).env).toContainEqual({ name: 'HF_TOKEN', valueFrom: hubToken });
  });

  test('a gateway without HF_TOKEN: no container references it', () => {
    const template = 'env HF_TOKEN=$(HF_TOKEN) vllm serve {model} --port {port}';
    for (const engineTemplate of [undefined, template]) {
      const pod = replicaPod(podLaunch(), { ...podContext(), hasHubToken: false, ...(engineTemplate ? { engineTemplate } : {}) });
      expect(JSON.stringify(pod.spec!.initContainers)).not.toContain(SECRET_KEYS.hubToken);
      expect(names(engineOf(pod))).not.toContain('HF_TOKEN');
    }
  });
});
