/**
 * The Kubernetes stand-in for tests (stand-in.ts): `startKubeStandIn` runs it in the test's own process, where a test
 * can reach into it (its store, its kubelet's processes); `startKubeStandInProcess` runs it in a child process of its
 * own (process.ts), as a real API server runs beside its clients, so that its work does not share their event loop.
 * Either is closed when the test file ends.
 */
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

export async function startKubeStandIn(options: KubeStandInOptions = {}): Promise<KubeStandIn> {
  const standIn = await createKubeStandIn(options);
  onCleanup(() => standIn.close());
  return standIn;
}

export async function startKubeStandInProcess(options: KubeStandInChildOptions = {}): Promise<KubeStandInProcess> {
  const standIn = await startKubeStandInChild(options);
  onCleanup(() => standIn.close());
  return standIn;
}
