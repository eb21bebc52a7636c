/**
 * The informer keeper (src/runtime/kubernetes/watched.ts) with client-node's own informer against the stand-in API
 * server, through a proxy that can refuse reads of pods (503, as an overloaded API server answers). client-node's
 * `informer.start()` resolves even when its list failed (the failure comes as an 'error' event): the cache must not
 * count as synced then, or the runtime would answer liveness from what it held before.
 */
import { CoreV1Api, KubeConfig, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { beforeAll, expect, test } from 'vitest';
import { Watched, watchPath } from '../../src/runtime/kubernetes/watched.js';
import { waitFor } from '../support/app.js';
import { isPodRead, startApiProxy, startKubeStandIn, writeKubeconfig, type KubeStandIn } from '../support/kube/index.js';

const NS = 'default';
let standIn: KubeStandIn;
let podReadsDown = false;
let refused = 0;
let kc: KubeConfig;

beforeAll(async () => {
  standIn = await startKubeStandIn({ processes: false, nodes: [] });
  const proxy = await startApiProxy(standIn.url, (req) => {
    if (podReadsDown && isPodRead(req)) refused++;
    return podReadsDown && isPodRead(req);
  });
  const server = proxy.url;
  kc = new KubeConfig();
  kc.loadFromFile(writeKubeconfig({ server, token: standIn.token, namespace: NS }));
});

test('a start whose list failed is not a synced cache; the retry after the back-off is', async () => {
  const core = kc.makeApiClient(CoreV1Api);
  const informer = () => makeInformer<V1Pod>(kc, `/api/v1/namespaces/${NS}/pods`, () => core.listNamespacedPod({ namespace: NS }));
  const logged: string[] = [];
  const watched = new Watched(
    informer,
    'pod',
    (message) => logged.push(message),
    () => {},
  );
  try {
    podReadsDown = true;
    await watched.run();
    expect(refused).toBeGreaterThan(0);
    expect(watched.synced).toBe(false);
    expect(logged.join('\n')).toMatch(/the pod watch failed; restarting in 500 ms/);
    podReadsDown = false;
    await waitFor('the retry to sync the cache', async () => watched.synced, 10_000);
  } finally {
    await watched.stop();
  }
});

test('a watch that goes silent with its connection open is taken as dead once it has heard nothing for stuckMs: a new informer lists again and sees what changed', async () => {
  const core = kc.makeApiClient(CoreV1Api);
  const pod = (name: string): V1Pod => ({
    metadata: { name },
    spec: { containers: [{ name: 'c', image: 'i', command: ['sleep', '60'] }] },
  });
  await core.createNamespacedPod({ namespace: NS, body: pod('silent-1') });
  // Watches the server ends every second (a healthy informer starts a new one each time); dead after 3 s of nothing.
  const informer = () =>
    makeInformer<V1Pod>(kc, watchPath(`/api/v1/namespaces/${NS}/pods`, 1), () => core.listNamespacedPod({ namespace: NS }));
  const logged: string[] = [];
  const seen: string[] = [];
  const watched = new Watched(
    informer,
    'pod',
    (message) => logged.push(message),
    (object, verb) => seen.push(`${verb} ${object.metadata?.name}`),
    3000,
  );
  try {
    await watched.run();
    expect(watched.synced).toBe(true);
    // Quiet but alive: the server's ends of its watches are heard, so it is not taken as dead.
    await new Promise((resolve) => setTimeout(resolve, 4000));
    expect(logged.filter((m) => /heard nothing/.test(m))).toEqual([]);
    const first = watched.informer;
    // Now the connection dies without a word, and a pod is created and another deleted meanwhile: the silent watch
    // shows neither.
    await core.createNamespacedPod({ namespace: NS, body: pod('silent-0') });
    await waitFor('silent-0 seen', async () => watched.informer.get('silent-0', NS) !== undefined, 10_000);
    // Every watch until resumed: the informer may be between two watches (the server ends each after a second).
    standIn.stallWatches({ untilResumed: true });
    await core.createNamespacedPod({ namespace: NS, body: pod('silent-2') });
    await core.deleteNamespacedPod({ namespace: NS, name: 'silent-0', gracePeriodSeconds: 0 });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // Asked of the silent informer itself: on a loaded machine, the new informer may already have listed by now.
    expect(first.get('silent-2', NS)).toBeUndefined();
    standIn.resumeWatches();
    await waitFor('a new informer to list again', async () => watched.synced && watched.informer !== first, 10_000);
    expect(logged.join('\n')).toMatch(/the pod watch heard nothing for 3 s \(its connection is taken as dead\): listing again/);
    expect(watched.informer.get('silent-2', NS)).toBeDefined();
    expect(seen).toContain('add silent-2');
    // The pod deleted while the watch was silent is told as deleted, once the new informer has listed.
    expect(watched.informer.get('silent-0', NS)).toBeUndefined();
    expect(seen.filter((s) => s === 'delete silent-0')).toHaveLength(1);
    // And the new informer's watch follows what changes next.
    await core.deleteNamespacedPod({ namespace: NS, name: 'silent-1', gracePeriodSeconds: 0 });
    await waitFor('the delete seen', async () => watched.informer.get('silent-1', NS) === undefined, 10_000);
  } finally {
    await watched.stop();
  }
});

test("a quiet informer's watches resume from the server's bookmarks: the rest of the cluster's changes do not expire them (no list after the first)", async () => {
  // A server that keeps 50 changes for watches to resume from, and marks a watch's place every 200 ms.
  const busy = await startKubeStandIn({ processes: false, nodes: [], historySize: 50, bookmarkIntervalMs: 200 });
  let lists = 0;
  const proxy = await startApiProxy(busy.url, (req) => {
    if (isPodRead(req) && !/[?&]watch=(true|1)/.test(req.url ?? '')) lists++;
    return false;
  });
  const config = new KubeConfig();
  config.loadFromFile(writeKubeconfig({ server: proxy.url, token: busy.token, namespace: NS }));
  const core = config.makeApiClient(CoreV1Api);
  const pod = (name: string, labels: Record<string, string>): V1Pod => ({
    metadata: { name, labels },
    spec: { containers: [{ name: 'c', image: 'i', command: ['sleep', '60'] }] },
  });
  await core.createNamespacedPod({ namespace: NS, body: pod('ours-1', { app: 'ours' }) });
  // Our pods only; the server ends each watch after a second, and the informer starts the next from where it was.
  const informer = () =>
    makeInformer<V1Pod>(
      config,
      watchPath(`/api/v1/namespaces/${NS}/pods`, 1),
      () => core.listNamespacedPod({ namespace: NS, labelSelector: 'app=ours' }),
      'app=ours',
    );
  const watched = new Watched(
    informer,
    'pod',
    () => {},
    () => {},
  );
  try {
    await watched.run();
    expect(lists).toBe(1);
    // 100 changes elsewhere in the cluster over 3 s (twice the history), none of them ours: without bookmarks, the
    // next watch would start from a place the server no longer keeps (410 Expired), and the informer list again.
    for (let i = 0; i < 100; i++) {
      await core.createNamespacedPod({ namespace: NS, body: pod(`theirs-${i}`, { app: 'theirs' }) });
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(watched.synced).toBe(true);
    expect(lists).toBe(1);
    expect(watched.informer.list().map((p) => p.metadata?.name)).toEqual(['ours-1']);
  } finally {
    await watched.stop();
    await busy.close();
  }
});

test('stopped while its list is in flight, it leaves no watch open (client-node opens the watch once the list answers, and its stop found nothing to abort)', async () => {
  const core = kc.makeApiClient(CoreV1Api);
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let listed = false;
  const informer = () =>
    makeInformer<V1Pod>(kc, watchPath(`/api/v1/namespaces/${NS}/pods`), async () => {
      await gate;
      listed = true;
      return core.listNamespacedPod({ namespace: NS });
    });
  const before = standIn.openWatches();
  const watched = new Watched(
    informer,
    'pod',
    () => {},
    () => {},
  );
  const running = watched.run();
  await watched.stop();
  release();
  await running;
  expect(listed).toBe(true);
  await waitFor('the watch opened after the list to be closed', async () => standIn.openWatches() === before, 5000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(standIn.openWatches()).toBe(before);
});
