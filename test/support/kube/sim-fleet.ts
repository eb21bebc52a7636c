/**
 * The simulations' fleet (test/runtime/kubernetes-sim-*.test.ts): N endpoints, endpoint i wanting 1 + (i mod 10)
 * replicas, created as the API creates them; and what they run against: the stand-in API server in its simulated mode
 * (its kubelet marks pods ready without processes) with enough 8-GPU nodes, the one engine server every pod IP
 * answers on, and a hub serving the tiny model.
 */
import type { Services } from '../../../src/services/index.js';
import type { Principal } from '../../../src/services/principal.js';
import { TINY_REPO } from '../app.js';
import { startFakeHub, type FakeHub } from '../fake-hub.js';
import { createBody } from '../gateway.js';
import { buildTinyGguf } from '../tiny-gguf.js';
import { startKubeStandInProcess, type KubeStandInProcess } from './index.js';
import { startSimEngine, type SimEngine } from './sim-engine.js';

export const H100 = 'NVIDIA-H100-80GB-HBM3';

/** Endpoint i wants 1 + (i mod 10) replicas. */
export const wantedOf = (i: number) => 1 + (i % 10);

/** The replicas `endpoints` endpoints want in all. */
export const replicasOf = (endpoints: number) => Array.from({ length: endpoints }, (_, i) => wantedOf(i)).reduce((a, b) => a + b, 0);

export interface SimCluster {
  kube: KubeStandInProcess;
  engine: SimEngine;
  hub: FakeHub;
}

/** The stand-in (its own process, nodes for `replicas` and two more), the engine server and the hub, together. */
export async function startSimCluster(replicas: number): Promise<SimCluster> {
  const nodes = Math.ceil(replicas / 8) + 2;
  const [kube, engine, hub] = await Promise.all([
    startKubeStandInProcess({
      processes: false,
      nodes: Array.from({ length: nodes }, (_, i) => ({ name: `gpu-${i}`, gpus: 8, labels: { 'nvidia.com/gpu.product': H100 } })),
    }),
    startSimEngine(),
    startFakeHub({ repos: [{ id: TINY_REPO, files: { 'tiny-llama-Q8_0.gguf': buildTinyGguf() } }] }),
  ]);
  return { kube, engine, hub };
}

/** Creates the fleet's `endpoints` endpoints through the services, eight at a time; `wanted` gets each one's replicas. */
export async function createSimEndpoints(
  services: Services,
  principal: Principal,
  projectId: string,
  endpoints: number,
  wanted: Map<string, number>,
): Promise<void> {
  let next = 0;
  const create = async () => {
    for (let i = next++; i < endpoints; i = next++) {
      const n = wantedOf(i);
      const body = createBody(projectId, { name: `sim-${i}`, hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: n, maxReplica: n } });
      const created = await services.endpoints.create(principal, body);
      if (created.type === 'error') throw new Error(created.error.message);
      wanted.set(created.value.id, n);
    }
  };
  await Promise.all(Array.from({ length: 8 }, create));
}
