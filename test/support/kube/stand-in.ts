/**
 * A Kubernetes stand-in for tests: a real HTTP server speaking the core/v1 API wire format (JSON) for pods, nodes,
 * secrets, configmaps, events and namespaces, with watches and pod logs, plus a simulated scheduler and kubelet that
 * run each pod's containers as local processes. Clients connect through a kubeconfig (`writeKubeconfig()`), e.g.
 * `@kubernetes/client-node`'s `KubeConfig.loadFromFile`.
 *
 * Tests drive the cluster side: nodes (`addNode`, `updateNode`, `setNodeReady`, `removeNode`), faults (`oomKill`,
 * `crash`, `setImagePullFailure`), watch trouble (`cutWatches`, `expireHistory`), and read what the runtime did
 * (`requests()`, `pod()`, `events()`). `close()` kills every process. Tests start it through index.ts, which also
 * closes it when the test file ends, in this process (`startKubeStandIn`) or in a child process of its own
 * (`startKubeStandInProcess`, process.ts).
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { ResourceApi } from './api.js';
import { EventRecorder } from './events.js';
import { Kubelet } from './kubelet.js';
import { writeKubeconfig } from './kubeconfig.js';
import { nodeObject, nodeSpecOf, type NodeSpec } from './nodes.js';
import { timestamp, type KubeObject } from './objects.js';
import { Scheduler } from './scheduler.js';
import { ApiHttpServer } from './server.js';
import { ObjectStore } from './store.js';
import { WatchHub, type ExpiredAnswer } from './watch.js';

export interface KubeStandInOptions {
  /** bearer token every request must carry (default: random) */
  token?: string;
  /** namespaces that exist (default: default, kube-system, kube-public, kube-node-lease) */
  namespaces?: string[];
  /** nodes registered at start */
  nodes?: NodeSpec[];
  /** run containers as processes (default true); false: containers are running and ready at once, nothing runs */
  processes?: boolean;
  /** working directory of container processes (default: process.cwd(), the repository root under vitest) */
  cwd?: string;
  /** environment every container starts from (default: { PATH }) */
  env?: Record<string, string>;
  /** readiness probe period, overriding periodSeconds (default 200 ms) */
  probePeriodMs?: number;
  /** BOOKMARK interval of watches that allow them (default 1000 ms) */
  bookmarkIntervalMs?: number;
  /** changes kept for watches to resume from (default 10,000) */
  historySize?: number;
  /** images whose pull fails (ErrImagePull, then ImagePullBackOff) */
  imagePullFails?: ((image: string) => boolean) | Iterable<string>;
  /** first image pull back-off (default 300 ms, doubling up to 16x) */
  imagePullBackoffMs?: number;
  /** how often the kubelet retries a container waiting on a missing Secret/ConfigMap or a hostPath (default 500 ms) */
  retryMs?: number;
  /** the image's ENTRYPOINT, for containers without `command` (default: none, such a container fails with StartError) */
  entrypoint?: (image: string) => string[] | undefined;
  /**
   * Scripts a container's command runs (by absolute path) and the builds of them to run instead with plain Node.js:
   * `node --import tsx /repo/src/engine/main.ts --port 8000` runs `node /repo/.tmp/…/main.mjs --port 8000`, the same
   * code started in about half the time (the suite's bundles, test/support/global-setup.ts). Default: none.
   */
  programs?: Record<string, string>;
}

export interface KubeStandIn {
  /** http://127.0.0.1:PORT */
  readonly url: string;
  readonly token: string;
  /** Writes a kubeconfig (cluster, token user, context with `namespace`, default "default"); returns its path. */
  writeKubeconfig(namespace?: string): string;
  addNode(spec: NodeSpec): KubeObject;
  /** Changes a node: the given fields replace the registered ones (labels and taints as a whole). */
  updateNode(name: string, changes: Partial<Omit<NodeSpec, 'name'>>): KubeObject;
  setNodeReady(name: string, ready: boolean): KubeObject;
  /** Deletes a node; its pods are killed and removed as the pod garbage collector does. */
  removeNode(name: string): void;
  addNamespace(name: string): void;
  /** Direct reads of the store (not counted as requests). */
  pod(namespace: string, name: string): KubeObject | undefined;
  pods(namespace?: string): KubeObject[];
  events(namespace?: string): KubeObject[];
  /** Resolves with the pod once `predicate` holds for it (undefined: the pod is gone); rejects after `timeoutMs` (default 15 s). */
  waitForPod(
    namespace: string,
    name: string,
    predicate: (pod: KubeObject | undefined) => boolean,
    timeoutMs?: number,
  ): Promise<KubeObject | undefined>;
  /** The pid (= process group) of a running container's process. */
  pid(namespace: string, pod: string, container?: string): number | undefined;
  /** SIGKILLs the container (default: the first container) and reports it terminated, reason OOMKilled, exit 137. */
  oomKill(namespace: string, pod: string, container?: string): void;
  /** SIGKILLs the container and reports it terminated with `exitCode` (reason Error, or Completed for 0). */
  crash(namespace: string, pod: string, exitCode: number, container?: string): void;
  setImagePullFailure(image: string, fails?: boolean): void;
  /** The next pull of `image` (one container's) takes `ms` before it succeeds or fails, as a large image's first pull does. */
  setImagePullDelay(image: string, ms: number): void;
  /** The kubelet's status sync that changes nothing a client acts on: the Ready condition's lastProbeTime is renewed. */
  touchPod(namespace: string, pod: string): KubeObject | undefined;
  /**
   * The kubelet evicts the pod under its node's pressure, as a real one does: its containers killed, the pod Failed
   * with reason Evicted and the DisruptionTarget condition (TerminationByKubelet); the object stays until deleted.
   */
  evictByNode(namespace: string, pod: string): KubeObject | undefined;
  /** The DisruptionTarget condition alone, as a node's graceful shutdown writes it before it deletes the pod. */
  markDisruption(namespace: string, pod: string, reason: string): KubeObject | undefined;
  /** Destroys every open watch connection. */
  cutWatches(): void;
  /** Every open watch goes silent with its connection kept open (a connection that died without a word); with
   *  `untilResumed`, so does every watch opened before `resumeWatches()`. */
  stallWatches(options?: { untilResumed?: boolean }): void;
  /** Watches opened from now on are served again (after `stallWatches({ untilResumed: true })`). */
  resumeWatches(): void;
  /** Forgets the change history: a watch from an earlier resourceVersion gets 410 Expired, as an in-stream ERROR
   *  event (default) or, with `answer: 'http'`, as the HTTP answer itself (kept for later watches until changed). */
  expireHistory(options?: { answer?: ExpiredAnswer }): void;
  openWatches(): number;
  /** Requests so far by `METHOD /path/template` (`WATCH <resource>` for watches). */
  requests(): Record<string, number>;
  resetCounts(): void;
  close(): Promise<void>;
}

/** Starts the stand-in in this process; the caller closes it (index.ts's `startKubeStandIn` does at the test file's end). */
export async function createKubeStandIn(options: KubeStandInOptions = {}): Promise<KubeStandIn> {
  const token = options.token ?? randomBytes(16).toString('hex');
  const store = new ObjectStore(options.historySize ?? 10_000);
  const recorder = new EventRecorder(store);
  const pullFailures = new Set<string>();
  const pullDelays = new Map<string, number>();
  const pullRule = options.imagePullFails;
  if (pullRule && typeof pullRule !== 'function') for (const image of pullRule) pullFailures.add(image);
  let port = 0;
  const scheduler: Scheduler = new Scheduler(store, recorder, (pod) => kubelet.start(pod));
  const kubelet: Kubelet = new Kubelet(
    store,
    recorder,
    {
      processes: options.processes ?? true,
      cwd: options.cwd ?? process.cwd(),
      env: options.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      probePeriodMs: options.probePeriodMs ?? 200,
      imagePullBackoffMs: options.imagePullBackoffMs ?? 300,
      retryMs: options.retryMs ?? 500,
      imagePullFails: (image) => pullFailures.has(image) || (typeof pullRule === 'function' && pullRule(image)),
      imagePullMs: (image) => {
        const ms = pullDelays.get(image) ?? 0;
        pullDelays.delete(image);
        return ms;
      },
      entrypoint: options.entrypoint ?? (() => undefined),
      programs: options.programs ?? {},
      apiServer: () => ({ host: '127.0.0.1', port }),
    },
    () => scheduler.retry(),
  );
  const api = new ResourceApi(store, {
    podCreated: (pod) => scheduler.add(pod),
    podTerminating: (pod, grace) => {
      scheduler.forget(pod.metadata.namespace, pod.metadata.name);
      kubelet.terminate(pod, grace);
    },
    podRemoved: (pod) => {
      scheduler.forget(pod.metadata.namespace, pod.metadata.name);
      kubelet.kill(pod.metadata.uid);
      scheduler.retry();
    },
    configChanged: () => kubelet.wake(),
  });
  const watches = new WatchHub(store, options.bookmarkIntervalMs ?? 1000);
  const http = new ApiHttpServer({ token, api, watches, container: (uid, name) => kubelet.container(uid, name) });
  for (const ns of options.namespaces ?? ['default', 'kube-system', 'kube-public', 'kube-node-lease']) addNamespace(ns);
  for (const node of options.nodes ?? []) store.create('nodes', nodeObject(node));
  port = await http.listen();
  const url = `http://127.0.0.1:${port}`;
  const kubeconfigs: string[] = [];

  function addNamespace(name: string): void {
    if (store.get('namespaces', undefined, name)) return;
    store.create('namespaces', {
      kind: 'Namespace',
      apiVersion: 'v1',
      metadata: {
        name,
        uid: randomBytes(16).toString('hex'),
        creationTimestamp: timestamp(),
        labels: { 'kubernetes.io/metadata.name': name },
      },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    });
  }

  function node(name: string): KubeObject {
    const found = store.get('nodes', undefined, name);
    if (!found) throw new Error(`no node ${name}`);
    return found;
  }

  function updateNode(name: string, changes: Partial<Omit<NodeSpec, 'name'>>): KubeObject {
    const next = nodeObject({ ...nodeSpecOf(node(name)), ...changes, name });
    const updated = store.update('nodes', undefined, name, (draft) => {
      draft.metadata.labels = next.metadata.labels;
      draft.spec = next.spec;
      draft.status = next.status;
    })!;
    scheduler.retry();
    return updated;
  }

  function running(namespace: string, podName: string, container?: string): { uid: string; name: string } {
    const pod = store.get('pods', namespace, podName);
    if (!pod) throw new Error(`no pod ${namespace}/${podName}`);
    return { uid: pod.metadata.uid, name: container ?? pod.spec.containers[0].name };
  }

  let closed = false;
  const standIn: KubeStandIn = {
    url,
    token,
    writeKubeconfig(namespace = 'default') {
      const path = writeKubeconfig({ server: url, token, namespace });
      kubeconfigs.push(path);
      return path;
    },
    addNode(spec) {
      const created = store.create('nodes', nodeObject(spec));
      scheduler.retry();
      return created;
    },
    updateNode,
    setNodeReady: (name, ready) => updateNode(name, { ready }),
    removeNode(name) {
      node(name);
      for (const pod of [...store.all('pods')].filter((p) => p.spec.nodeName === name)) {
        const { namespace, name: podName, uid } = pod.metadata;
        kubelet.kill(uid);
        store.update('pods', namespace, podName, (draft) => {
          if (draft.status.phase !== 'Succeeded') draft.status.phase = 'Failed';
          draft.status.conditions = [
            ...(draft.status.conditions ?? []),
            {
              type: 'DisruptionTarget',
              status: 'True',
              reason: 'DeletionByPodGC',
              message: 'PodGC: node no longer exists',
              lastProbeTime: null,
              lastTransitionTime: timestamp(),
            },
          ];
        });
        store.remove('pods', namespace, podName);
      }
      store.remove('nodes', undefined, name);
      scheduler.retry();
    },
    addNamespace,
    pod: (namespace, name) => store.get('pods', namespace, name),
    pods: (namespace) => store.list('pods', namespace),
    events: (namespace) => store.list('events', namespace),
    waitForPod(namespace, name, predicate, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const pod = store.get('pods', namespace, name);
          if (!predicate(pod)) return false;
          clearTimeout(timer);
          unsubscribe();
          resolve(pod);
          return true;
        };
        const unsubscribe = store.subscribe('pods', (change) => {
          if (change.object.metadata.namespace === namespace && change.object.metadata.name === name) check();
        });
        const timer = setTimeout(() => {
          unsubscribe();
          reject(
            new Error(
              `pod ${namespace}/${name} did not reach the expected state in ${timeoutMs} ms: ${JSON.stringify(store.get('pods', namespace, name)?.status)}`,
            ),
          );
        }, timeoutMs);
        check();
      });
    },
    pid(namespace, podName, container) {
      const { uid, name } = running(namespace, podName, container);
      return kubelet.container(uid, name)?.process?.pid;
    },
    oomKill(namespace, podName, container) {
      const { uid, name } = running(namespace, podName, container);
      kubelet.fault(uid, name, { reason: 'OOMKilled', exitCode: 137 });
    },
    crash(namespace, podName, exitCode, container) {
      const { uid, name } = running(namespace, podName, container);
      kubelet.fault(uid, name, { exitCode });
    },
    evictByNode(namespace, podName) {
      const pod = store.get('pods', namespace, podName);
      if (!pod) return undefined;
      kubelet.kill(pod.metadata.uid);
      const at = new Date().toISOString();
      const message = 'The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi.';
      return store.update('pods', namespace, podName, (draft) => {
        const killed = (c: any) => ({ ...c, ready: false, state: { terminated: { exitCode: 137, reason: 'Error', finishedAt: at } } });
        draft.status = {
          ...draft.status,
          phase: 'Failed',
          reason: 'Evicted',
          message,
          conditions: [
            ...(draft.status?.conditions ?? []).map((c: any) =>
              c.type === 'Ready' || c.type === 'ContainersReady' ? { ...c, status: 'False' } : c,
            ),
            { type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet', message, lastTransitionTime: at },
          ],
          containerStatuses: (draft.status?.containerStatuses ?? []).map(killed),
        };
      });
    },
    markDisruption(namespace, podName, reason) {
      return store.update('pods', namespace, podName, (draft) => {
        const condition = { type: 'DisruptionTarget', status: 'True', reason, lastTransitionTime: new Date().toISOString() };
        draft.status.conditions = [...(draft.status.conditions ?? []).filter((c: any) => c.type !== 'DisruptionTarget'), condition];
      });
    },
    touchPod(namespace, podName) {
      return store.update('pods', namespace, podName, (draft) => {
        for (const condition of draft.status?.conditions ?? [])
          if (condition.type === 'Ready') condition.lastProbeTime = new Date().toISOString();
      });
    },
    setImagePullFailure(image, fails = true) {
      if (fails) pullFailures.add(image);
      else pullFailures.delete(image);
      kubelet.wake();
    },
    setImagePullDelay(image, ms) {
      pullDelays.set(image, ms);
    },
    cutWatches: () => watches.cut(),
    stallWatches: (stallOptions) => watches.stall(stallOptions),
    resumeWatches: () => watches.resume(),
    expireHistory(expireOptions = {}) {
      if (expireOptions.answer) watches.expiredAnswer = expireOptions.answer;
      store.expireHistory();
    },
    openWatches: () => watches.count,
    requests: () => http.requests(),
    resetCounts: () => http.resetCounts(),
    async close() {
      if (closed) return;
      closed = true;
      scheduler.close();
      kubelet.close();
      watches.close();
      await http.close();
      for (const path of kubeconfigs) rmSync(dirname(path), { recursive: true, force: true });
    },
  };
  return standIn;
}
