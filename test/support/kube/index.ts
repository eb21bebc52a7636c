/**
 * The Kubernetes stand-in for tests (stand-in.ts): `startKubeStandIn` runs it in the test's own process, where a test
 * can reach into it (its store, its kubelet's processes); `startKubeStandInProcess` runs it in a child process of its
 * own (process.ts), as a real API server runs beside its clients, so that its work does not share their event loop.
 * Either is closed when the test file ends.
 */
import path from 'node:path';
import { inject } from 'vitest';
import { onCleanup, onEveryCleanup } from '../cleanup.js';
import { killAllContainers } from './containers.js';
import { startKubeStandInChild, type KubeStandInChildOptions, type KubeStandInProcess } from './process.js';
import { createKubeStandIn, type KubeStandIn, type KubeStandInOptions } from './stand-in.js';

export type { KubeObject } from './objects.js';
export type { NodeSpec } from './nodes.js';
export { writeKubeconfig } from './kubeconfig.js';
export { isPodCreate, isPodRead, startApiProxy, type ApiProxy } from './api-proxy.js';
export type { KubeStandIn, KubeStandInOptions } from './stand-in.js';
export type { KubeStandInChildOptions, KubeStandInProcess } from './process.js';

// Container processes left running are killed when the test file ends.
onEveryCleanup(killAllContainers);

/**
 * The engine's and the model fetcher's sources, as the pod specs of a gateway under test name them
 * (KUBERNETES_APP_DIR is the checkout: kube-env.ts), run from the suite's bundles; TEST_ENGINE=tsx runs the sources.
 */
function suitePrograms(cwd = process.cwd()): Record<string, string> {
  if (process.env.TEST_ENGINE === 'tsx') return {};
  return {
    [path.join(cwd, 'src/engine/main.ts')]: inject('engineBundle'),
    [path.join(cwd, 'src/models/fetch-main.ts')]: inject('fetchBundle'),
  };
}

export async function startKubeStandIn(options: KubeStandInOptions = {}): Promise<KubeStandIn> {
  const standIn = await createKubeStandIn({ programs: suitePrograms(options.cwd), ...options });
  onCleanup(() => standIn.close());
  return standIn;
}

export async function startKubeStandInProcess(options: KubeStandInChildOptions = {}): Promise<KubeStandInProcess> {
  const standIn = await startKubeStandInChild({ programs: suitePrograms(options.cwd), ...options });
  onCleanup(() => standIn.close());
  return standIn;
}
