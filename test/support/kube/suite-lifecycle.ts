/**
 * The setup that test/runtime/kubernetes-lifecycle.test.ts and kubernetes-placement.test.ts share: the stand-in API
 * server with its kubelet running real engines, a real gateway (RUNTIME=kubernetes) on it, and a seeded user with a
 * project. Two files, each with a cluster of its own, so that the suite's workers run them side by side and one file's
 * cluster-wide faults (a failing image pull) never reach the other's pods.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect } from 'vitest';
import type { CrashPolicy } from '../../../src/controller/crash-policy.js';
import { startTestApp, stopAllReplicas, waitFor, type SeededUser, type TestApp } from '../app.js';
import { restClient, type SeededProject } from '../gateway.js';
import { endpointPods, kubernetesTestEnv } from '../kube-env.js';
import { startKubeStandIn, type KubeObject, type KubeStandIn } from './index.js';

export const H100 = 'NVIDIA-H100-80GB-HBM3';
export const NS = 'default';

export interface LifecycleSuite {
  kube: KubeStandIn;
  t: TestApp;
  alice: SeededUser;
  project: SeededProject;
  kubeConfig: KubeConfig;
  podsOf(endpointId: string): KubeObject[];
  livePodsOf(endpointId: string): KubeObject[];
  /** A short chat through the gateway (at its current address: it changes when the gateway restarts). */
  chat(endpointId: string): ReturnType<ReturnType<typeof restClient>>;
  /** The endpoint answers a chat; then it is deleted, and its pods go (the owner reference's garbage collection). */
  servesThenDeleted(endpointId: string): Promise<void>;
  /** Deletes the endpoint (through the gateway's current address) and waits for its pods to go. */
  deleteAndWaitGone(endpointId: string): Promise<void>;
}

/**
 * Registers the file's beforeAll and afterAll; the returned object is filled in by the beforeAll. Two H100 nodes, the
 * second tainted against our pods: counted as capacity (its labels match), but the scheduler never places one there.
 */
export function useLifecycleSuite(options: { hangMs: number; env?: Record<string, string> }): LifecycleSuite {
  let cacheDir: string | undefined;
  const suite = {
    podsOf: (endpointId: string) => endpointPods(suite.kube, NS, endpointId),
    livePodsOf: (endpointId: string) => endpointPods(suite.kube, NS, endpointId, true),
    chat: (endpointId: string) =>
      restClient(suite.t.url, suite.alice.key)('POST', '/dedicated/v1/chat/completions', {
        model: endpointId,
        messages: [{ role: 'user', content: 'Hello' }],
        max_tokens: 4,
      }),
    async servesThenDeleted(endpointId: string) {
      expect((await suite.chat(endpointId)).status).toBe(200);
      await suite.deleteAndWaitGone(endpointId);
    },
    async deleteAndWaitGone(endpointId: string) {
      const rest = restClient(suite.t.url, suite.alice.key);
      expect((await rest('DELETE', `/dedicated/beta/endpoint/${endpointId}`)).status).toBe(200);
      await waitFor('the deleted endpoint’s pods to be gone', async () => suite.podsOf(endpointId).length === 0, 60_000);
    },
  } as LifecycleSuite;

  beforeAll(async () => {
    cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kube-models-'));
    suite.kube = await startKubeStandIn({
      cwd: process.cwd(),
      probePeriodMs: 100,
      nodes: [
        { name: 'gpu-a', gpus: 1, labels: { 'nvidia.com/gpu.product': H100 } },
        {
          name: 'gpu-b',
          gpus: 1,
          labels: { 'nvidia.com/gpu.product': H100 },
          taints: [{ key: 'team', value: 'other', effect: 'NoSchedule' }],
        },
      ],
    });
    suite.kubeConfig = new KubeConfig();
    suite.kubeConfig.loadFromFile(suite.kube.writeKubeconfig(NS));
    const crashLoop: Partial<CrashPolicy> = { failures: 3, windowMs: 60_000, backoffBaseMs: 500, hangMs: options.hangMs };
    suite.t = await startTestApp({
      kubeConfig: suite.kubeConfig,
      env: kubernetesTestEnv(NS, cacheDir, options.env),
      controller: { crashLoop, orphanReapIntervalMs: 1000 },
    });
    suite.alice = await suite.t.seed.user();
    suite.project = await suite.alice.project('kube');
  }, 120_000);

  afterAll(async () => {
    await suite.t?.app.close();
    if (suite.t) await stopAllReplicas(suite.t.sql, suite.t.app);
    await suite.kube?.close();
    if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
  });

  return suite;
}

/** The PodScheduled condition the scheduler wrote on a pod (none yet: it has not looked at the pod). */
export const scheduledCondition = (pod: KubeObject) =>
  (pod.status as { conditions?: { type: string; message?: string }[] } | undefined)?.conditions?.find((c) => c.type === 'PodScheduled');
