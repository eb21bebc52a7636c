/**
 * The Kubernetes stand-in (test/support/kube), exercised through the official client, @kubernetes/client-node, as the
 * runtime uses it: objects and their error bodies, selectors, watches (bookmarks, 410 both ways, cut connections,
 * an informer), owner garbage collection, scheduling, and pods whose containers run as real processes.
 */
import { ApiException, CoreV1Api, KubeConfig, Watch, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRunning } from '../support/processes.js';
import { startKubeStandIn, type KubeStandIn } from '../support/kube/index.js';

function connect(standIn: KubeStandIn, namespace = 'default'): { kc: KubeConfig; core: CoreV1Api } {
  const kc = new KubeConfig();
  kc.loadFromFile(standIn.writeKubeconfig(namespace));
  return { kc, core: kc.makeApiClient(CoreV1Api) };
}

/** The ApiException a call fails with: its code and its body (the server's Status). */
async function failure(call: Promise<unknown>): Promise<{ code: number; body: any }> {
  try {
    await call;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiException);
    const { code, body } = error as ApiException<unknown>;
    return { code, body: typeof body === 'string' ? JSON.parse(body) : body };
  }
  throw new Error('the call succeeded');
}

const sleepPod = (name: string, extra: Partial<V1Pod['spec']> = {}, labels?: Record<string, string>): V1Pod => ({
  metadata: { name, labels },
  spec: { restartPolicy: 'Never', containers: [{ name: 'engine', image: 'engine:1', command: ['sleep', '30'] }], ...extra },
});

const H100 = { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' };

describe('objects', () => {
  let standIn: KubeStandIn;
  let core: CoreV1Api;
  beforeAll(async () => {
    standIn = await startKubeStandIn({ processes: false, nodes: [{ name: 'gpu-1', gpus: 8, labels: H100 }] });
    ({ core } = connect(standIn));
  });
  afterAll(() => standIn.close());

  it('creates, reads, lists by label and field selectors, and deletes pods', async () => {
    const created = await core.createNamespacedPod({ namespace: 'default', body: sleepPod('a-1', {}, { app: 'a', tier: 'x' }) });
    expect(created.metadata).toMatchObject({ name: 'a-1', namespace: 'default' });
    expect(created.metadata!.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.metadata!.creationTimestamp).toBeInstanceOf(Date);
    expect(created.status!.phase).toBe('Pending');
    expect(created.spec!.terminationGracePeriodSeconds).toBe(30);
    await core.createNamespacedPod({ namespace: 'default', body: sleepPod('a-2', {}, { app: 'a', tier: 'y' }) });
    const third = await core.createNamespacedPod({ namespace: 'default', body: sleepPod('b-1', {}, { app: 'b' }) });
    expect(Number(third.metadata!.resourceVersion)).toBeGreaterThan(Number(created.metadata!.resourceVersion));

    const names = async (labelSelector?: string, fieldSelector?: string) =>
      (await core.listNamespacedPod({ namespace: 'default', labelSelector, fieldSelector })).items.map((p) => p.metadata!.name);
    expect(await names('app=a')).toEqual(['a-1', 'a-2']);
    expect(await names('app==b')).toEqual(['b-1']);
    expect(await names('app!=a')).toEqual(['b-1']);
    expect(await names('tier in (x,z)')).toEqual(['a-1']);
    expect(await names('tier notin (x)')).toEqual(['a-2', 'b-1']);
    expect(await names('tier')).toEqual(['a-1', 'a-2']);
    expect(await names('!tier')).toEqual(['b-1']);
    expect(await names('app=a,tier!=x')).toEqual(['a-2']);
    await standIn.waitForPod('default', 'b-1', (p) => p?.status.phase === 'Running');
    expect(await names(undefined, 'spec.nodeName=gpu-1')).toEqual(['a-1', 'a-2', 'b-1']);
    expect(await names(undefined, 'spec.nodeName=other')).toEqual([]);
    expect((await core.listPodForAllNamespaces({ labelSelector: 'app=b' })).items.map((p) => p.metadata!.name)).toEqual(['b-1']);
    expect((await failure(core.listNamespacedPod({ namespace: 'default', fieldSelector: 'spec.image=x' }))).code).toBe(400);

    const read = await core.readNamespacedPod({ name: 'a-1', namespace: 'default' });
    expect(read.status).toMatchObject({ phase: 'Running', podIP: expect.stringMatching(/^127\.\d+\.\d+\.\d+$/), hostIP: '127.0.0.1' });
    expect(read.status!.containerStatuses![0]).toMatchObject({ name: 'engine', ready: true, restartCount: 0, state: { running: {} } });
    expect(read.status!.conditions!.find((c) => c.type === 'Ready')!.status).toBe('True');

    const deleted = await core.deleteNamespacedPod({ name: 'a-1', namespace: 'default', gracePeriodSeconds: 7 });
    expect(deleted.metadata!.name).toBe('a-1');
    await standIn.waitForPod('default', 'a-1', (p) => p === undefined);
    expect(await names()).toEqual(['a-2', 'b-1']);
  });

  it('answers 401, 404, 409 and 422 with the API server Status bodies', async () => {
    const notFound = await failure(core.readNamespacedPod({ name: 'nope', namespace: 'default' }));
    expect(notFound).toEqual({
      code: 404,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'pods "nope" not found',
        reason: 'NotFound',
        details: { name: 'nope', kind: 'pods' },
        code: 404,
      },
    });
    expect((await failure(core.deleteNamespacedPod({ name: 'nope', namespace: 'default' }))).body.reason).toBe('NotFound');

    await core.createNamespacedPod({ namespace: 'default', body: sleepPod('dup') });
    const conflict = await failure(core.createNamespacedPod({ namespace: 'default', body: sleepPod('dup') }));
    expect(conflict.code).toBe(409);
    expect(conflict.body).toMatchObject({
      reason: 'AlreadyExists',
      message: 'pods "dup" already exists',
      details: { name: 'dup', kind: 'pods' },
    });

    const bad = await failure(
      core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: 'Bad_Name', labels: { 'ok/key': 'bad value!' } },
          spec: {
            restartPolicy: 'Never',
            containers: [
              { name: 'Engine', image: 'x' },
              { name: 'side', image: 'x' },
              { name: 'side', image: 'x' },
            ],
          },
        },
      }),
    );
    expect(bad.code).toBe(422);
    expect(bad.body.reason).toBe('Invalid');
    expect(bad.body.message).toMatch(
      /^Pod "Bad_Name" is invalid: \[metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/,
    );
    expect(bad.body.details.causes.map((c: any) => `${c.reason} ${c.field}`)).toEqual([
      'FieldValueInvalid metadata.name',
      'FieldValueInvalid metadata.labels',
      'FieldValueInvalid spec.containers[0].name',
      'FieldValueDuplicate spec.containers[2].name',
    ]);
    const empty = await failure(
      core.createNamespacedPod({ namespace: 'default', body: { metadata: { name: 'empty' }, spec: { containers: [] } } }),
    );
    expect(empty.body.details.causes).toEqual([{ reason: 'FieldValueRequired', message: 'Required value', field: 'spec.containers' }]);
    expect((await failure(core.createNamespacedPod({ namespace: 'elsewhere', body: sleepPod('x') }))).body.message).toBe(
      'namespaces "elsewhere" not found',
    );

    const res = await fetch(`${standIn.url}/api/v1/namespaces/default/pods`, { headers: { Authorization: 'Bearer wrong' } });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ kind: 'Status', reason: 'Unauthorized', code: 401 });
  });

  it('stores secrets, configmaps and events, and collects the objects a deleted owner owned', async () => {
    const secret = await core.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 'creds' }, stringData: { token: 's3cret' } },
    });
    expect(secret.data).toEqual({ token: Buffer.from('s3cret').toString('base64') });
    expect(secret.type).toBe('Opaque');
    expect((await failure(core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'creds' } } }))).body.message).toBe(
      'secrets "creds" already exists',
    );
    const owner = [{ apiVersion: 'v1', kind: 'Secret', name: 'creds', uid: secret.metadata!.uid! }];
    await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'owned', ownerReferences: owner }, data: { a: '1' } },
    });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'free' }, data: { a: '1' } } });
    await core.createNamespacedPod({
      namespace: 'default',
      body: { ...sleepPod('owned-pod'), metadata: { name: 'owned-pod', ownerReferences: owner } },
    });
    expect((await core.readNamespacedConfigMap({ name: 'owned', namespace: 'default' })).data).toEqual({ a: '1' });

    const status: any = await core.deleteNamespacedSecret({ name: 'creds', namespace: 'default' });
    expect(status).toMatchObject({ kind: 'Status', status: 'Success', details: { name: 'creds', kind: 'secrets' } });
    await standIn.waitForPod('default', 'owned-pod', (p) => p === undefined);
    expect((await core.listNamespacedConfigMap({ namespace: 'default' })).items.map((c) => c.metadata!.name)).toEqual(['free']);
    expect((await failure(core.readNamespacedSecret({ name: 'creds', namespace: 'default' }))).code).toBe(404);

    await core.createNamespacedEvent({
      namespace: 'default',
      body: {
        metadata: { name: 'runtime.1' },
        involvedObject: { kind: 'Pod', name: 'a-2', namespace: 'default' },
        reason: 'Hello',
        message: 'hi',
        type: 'Normal',
      },
    });
    const events = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: 'reason=Hello' });
    expect(events.items.map((e) => e.message)).toEqual(['hi']);
  });

  it('evicts a pod as a drain does: the DisruptionTarget condition, then a graceful delete; refuses a malformed eviction', async () => {
    await core.createNamespacedPod({ namespace: 'default', body: sleepPod('ev-1') });
    await standIn.waitForPod('default', 'ev-1', (p) => p?.status.phase === 'Running');
    const eviction = (name: string) => ({ apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace: 'default' } });
    expect((await failure(core.createNamespacedPodEviction({ name: 'ev-1', namespace: 'default', body: eviction('other') }))).code).toBe(
      400,
    );
    expect((await failure(core.createNamespacedPodEviction({ name: 'gone', namespace: 'default', body: eviction('gone') }))).code).toBe(
      404,
    );
    expect(standIn.pod('default', 'ev-1')!.metadata.deletionTimestamp).toBeUndefined();
    // Marked first (every change is seen here as the store makes it), then gone once its processes (none here) ended.
    const marked = standIn.waitForPod('default', 'ev-1', (p) => p?.metadata.deletionTimestamp !== undefined);
    await core.createNamespacedPodEviction({ name: 'ev-1', namespace: 'default', body: eviction('ev-1') });
    const seen = await marked;
    expect(seen!.metadata.deletionGracePeriodSeconds).toBe(30);
    expect(seen!.status.conditions).toContainEqual(
      expect.objectContaining({ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI' }),
    );
    expect(await standIn.waitForPod('default', 'ev-1', (p) => p === undefined)).toBeUndefined();
  });

  it('counts requests by method and path template', async () => {
    standIn.resetCounts();
    await core.listNamespacedPod({ namespace: 'default' });
    await core.listNamespacedPod({ namespace: 'default' });
    await core.readNamespacedPod({ name: 'a-2', namespace: 'default' });
    await failure(core.readNamespacedPod({ name: 'gone', namespace: 'default' }));
    await core.listNode();
    expect(standIn.requests()).toEqual({
      'GET /api/v1/namespaces/{ns}/pods': 2,
      'GET /api/v1/namespaces/{ns}/pods/{name}': 2,
      'GET /api/v1/nodes': 1,
    });
  });
});

describe('watches', () => {
  let standIn: KubeStandIn;
  let kc: KubeConfig;
  let core: CoreV1Api;
  beforeAll(async () => {
    standIn = await startKubeStandIn({ processes: false, bookmarkIntervalMs: 100, nodes: [{ name: 'gpu-1', gpus: 8 }] });
    ({ kc, core } = connect(standIn));
  });
  afterAll(() => standIn.close());

  /** Collects the events of a watch until `until` holds for them. */
  function collect(path: string, query: Record<string, string | number | boolean | undefined>, until: (events: any[]) => boolean) {
    const events: { type: string; object: any }[] = [];
    let resolveDone!: (err: any) => void;
    const done = new Promise<any>((resolve) => (resolveDone = resolve));
    let resolveSeen!: () => void;
    const seen = new Promise<void>((resolve) => (resolveSeen = resolve));
    const controller = new Watch(kc).watch(
      path,
      query,
      (type, object) => {
        events.push({ type, object });
        if (until(events)) resolveSeen();
      },
      (err) => resolveDone(err),
    );
    return { events, seen, done, controller };
  }

  it('streams ADDED, MODIFIED, DELETED after a resourceVersion, then BOOKMARKs', async () => {
    const list = await core.listNamespacedPod({ namespace: 'default' });
    const w = collect(
      '/api/v1/namespaces/default/pods',
      { resourceVersion: list.metadata!.resourceVersion, allowWatchBookmarks: true, labelSelector: 'app=w' },
      (events) => events.some((e) => e.type === 'DELETED') && events.some((e) => e.type === 'BOOKMARK'),
    );
    await core.createNamespacedPod({ namespace: 'default', body: sleepPod('w-1', {}, { app: 'w' }) });
    await core.createNamespacedPod({ namespace: 'default', body: sleepPod('other', {}, { app: 'other' }) });
    await standIn.waitForPod('default', 'w-1', (p) => p?.status.phase === 'Running');
    await core.deleteNamespacedPod({ name: 'w-1', namespace: 'default' });
    await w.seen;
    (await w.controller).abort();
    const types = w.events.filter((e) => e.type !== 'BOOKMARK').map((e) => e.type);
    expect(types[0]).toBe('ADDED');
    expect(types).toContain('MODIFIED');
    expect(types[types.length - 1]).toBe('DELETED');
    expect(w.events.every((e) => e.type === 'BOOKMARK' || e.object.metadata.name === 'w-1')).toBe(true);
    expect(w.events[0]!.object).toMatchObject({ kind: 'Pod', apiVersion: 'v1' });
    const bookmark = w.events.find((e) => e.type === 'BOOKMARK')!;
    expect(bookmark.object).toEqual({ kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: expect.stringMatching(/^\d+$/) } });
    const rvs = w.events.filter((e) => e.type !== 'BOOKMARK').map((e) => Number(e.object.metadata.resourceVersion));
    expect(rvs).toEqual([...rvs].sort((a, b) => a - b));
  });

  it('answers a resourceVersion older than its history with 410 Expired, in the stream or as the answer', async () => {
    const old = (await core.listNode()).metadata!.resourceVersion!;
    standIn.addNode({ name: 'gpu-2', gpus: 8 });
    standIn.expireHistory();
    const w = collect('/api/v1/nodes', { resourceVersion: old }, (events) => events.length > 0);
    await w.seen;
    expect(await w.done).toBeNull();
    expect(w.events).toEqual([
      {
        type: 'ERROR',
        object: expect.objectContaining({
          kind: 'Status',
          status: 'Failure',
          reason: 'Expired',
          code: 410,
          message: expect.stringMatching(/^too old resource version: \d+ \(\d+\)$/),
        }),
      },
    ]);

    standIn.expireHistory({ answer: 'http' });
    const http = collect('/api/v1/nodes', { resourceVersion: old }, () => true);
    expect(await http.done).toMatchObject({ statusCode: 410 });
    // A plain list still works, and an informer recovers from the 410 by listing again.
    expect((await core.listNode()).items.map((n) => n.metadata!.name)).toEqual(['gpu-1', 'gpu-2']);
    standIn.expireHistory({ answer: 'event' });
  });

  it('keeps an informer in step, and cut connections end the watch', async () => {
    standIn.resetCounts();
    const informer = makeInformer(
      kc,
      '/api/v1/namespaces/default/pods',
      () => core.listNamespacedPod({ namespace: 'default', labelSelector: 'app=inf' }),
      'app=inf',
    );
    const errors: unknown[] = [];
    informer.on('error', (err) => errors.push(err));
    await informer.start();
    await core.createNamespacedPod({ namespace: 'default', body: sleepPod('inf-1', {}, { app: 'inf' }) });
    await expect.poll(() => informer.get('inf-1', 'default')?.status?.phase, { timeout: 5000 }).toBe('Running');
    expect(standIn.openWatches()).toBe(1);
    standIn.cutWatches();
    await expect.poll(() => errors.length, { timeout: 5000 }).toBeGreaterThan(0);
    expect(standIn.openWatches()).toBe(0);
    await informer.stop();
    expect(standIn.requests()).toMatchObject({ 'GET /api/v1/namespaces/{ns}/pods': 1, 'WATCH pods': 1 });
  });
});

describe('scheduler', () => {
  let standIn: KubeStandIn;
  let core: CoreV1Api;
  beforeAll(async () => {
    standIn = await startKubeStandIn({
      processes: false,
      nodes: [
        { name: 'h100', gpus: 8, labels: H100 },
        { name: 'a100', gpus: 8, labels: { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB' } },
        { name: 'tainted', gpus: 8, labels: H100, taints: [{ key: 'dedicated', value: 'infer', effect: 'NoSchedule' }] },
      ],
    });
    ({ core } = connect(standIn));
  });
  afterAll(() => standIn.close());

  const gpuPod = (name: string, gpus: number): V1Pod =>
    sleepPod(name, {
      nodeSelector: H100,
      containers: [
        { name: 'engine', image: 'engine:1', command: ['sleep', '30'], resources: { limits: { 'nvidia.com/gpu': String(gpus) } } },
      ],
    });

  it('binds to a fitting node, explains an unschedulable pod, and retries when room appears', async () => {
    await core.createNamespacedPod({ namespace: 'default', body: gpuPod('first', 8) });
    expect((await standIn.waitForPod('default', 'first', (p) => p?.status.phase === 'Running'))!.spec.nodeName).toBe('h100');
    await core.createNamespacedPod({ namespace: 'default', body: gpuPod('second', 4) });
    const pending = await standIn.waitForPod('default', 'second', (p) => p?.status.conditions?.some((c: any) => c.type === 'PodScheduled'));
    expect(pending!.status.conditions.find((c: any) => c.type === 'PodScheduled')).toMatchObject({
      status: 'False',
      reason: 'Unschedulable',
      message:
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {dedicated: infer}. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
    });
    const events = await core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: 'involvedObject.name=second,reason=FailedScheduling',
    });
    expect(events.items[0]).toMatchObject({ type: 'Warning', source: { component: 'default-scheduler' } });

    await core.deleteNamespacedPod({ name: 'first', namespace: 'default' });
    const placed = await standIn.waitForPod('default', 'second', (p) => p?.status.phase === 'Running');
    expect(placed!.spec.nodeName).toBe('h100');

    standIn.setNodeReady('h100', false);
    await core.createNamespacedPod({ namespace: 'default', body: gpuPod('third', 1) });
    const stuck = await standIn.waitForPod('default', 'third', (p) => p?.status.conditions?.some((c: any) => c.type === 'PodScheduled'));
    expect(stuck!.status.conditions[0].message).toContain('1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }');
    standIn.setNodeReady('h100', true);
    expect((await standIn.waitForPod('default', 'third', (p) => p?.status.phase === 'Running'))!.spec.nodeName).toBe('h100');
  });

  it('simulates hundreds of pods quickly (a node holds 110 pods unless told otherwise)', async () => {
    standIn.updateNode('a100', { gpus: 2000, labels: H100, pods: 2000 });
    const started = Date.now();
    for (let i = 0; i < 600; i += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, j) => core.createNamespacedPod({ namespace: 'default', body: gpuPod(`many-${i + j}`, 1) })),
      );
    }
    await expect
      .poll(() => standIn.pods('default').filter((p) => p.status.phase === 'Running').length, { timeout: 20_000, interval: 100 })
      .toBe(602);
    const list = await core.listNamespacedPod({ namespace: 'default', labelSelector: '!app' });
    expect(list.items.length).toBe(602);
    expect(new Set(list.items.map((p) => p.status!.podIP)).size).toBe(602);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 45_000);
});

describe('kubelet with real processes', () => {
  let standIn: KubeStandIn;
  let core: CoreV1Api;
  beforeAll(async () => {
    standIn = await startKubeStandIn({
      probePeriodMs: 100,
      imagePullBackoffMs: 100,
      retryMs: 100,
      nodes: [{ name: 'gpu-1', gpus: 8, labels: H100 }],
    });
    ({ core } = connect(standIn));
  });
  afterAll(() => standIn.close());

  const node = (name: string, script: string, extra: Record<string, unknown> = {}) => ({
    name,
    image: 'engine:1',
    command: ['node', '-e', script],
    ...extra,
  });
  const SERVER = `const ip = process.argv[1]; require('http').createServer((q, s) => { s.statusCode = q.url === '/health' ? 200 : 404; s.end(process.env.TOKEN + ' ' + process.env.LITERAL); }).listen(8000, ip, () => console.log('listening on ' + ip));`;

  it('runs init containers then the engine on its own pod IP, probes readiness, and serves its logs', async () => {
    await core.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 'engine-token' }, stringData: { token: 'tok-1' } },
    });
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'engine-1' },
        spec: {
          restartPolicy: 'Never',
          initContainers: [node('fetch', "setTimeout(() => console.log('weights ready'), 400)")],
          containers: [
            node('engine', SERVER, {
              args: ['$(POD_IP)'],
              ports: [{ name: 'http', containerPort: 8000 }],
              env: [
                { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
                { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'engine-token', key: 'token' } } },
                { name: 'LITERAL', value: '$$(POD_IP)-$(POD_IP)' },
              ],
              readinessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 10 },
            }),
          ],
        },
      },
    });
    const initializing = await standIn.waitForPod('default', 'engine-1', (p) => p?.status.initContainerStatuses?.[0]?.state.running);
    expect(initializing!.status.containerStatuses[0].state).toEqual({ waiting: { reason: 'PodInitializing' } });
    expect(initializing!.status.phase).toBe('Pending');
    const early = await failure(core.readNamespacedPodLog({ name: 'engine-1', namespace: 'default', container: 'engine' }));
    expect(early.code).toBe(400);
    expect(early.body.message).toBe('container "engine" in pod "engine-1" is waiting to start: PodInitializing');

    const ready = (await standIn.waitForPod('default', 'engine-1', (p) =>
      p?.status.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'),
    ))!;
    const ip: string = ready.status.podIP;
    expect(ready.status.phase).toBe('Running');
    expect(ready.status.initContainerStatuses[0].state.terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
    expect(ready.status.containerStatuses[0]).toMatchObject({
      ready: true,
      started: true,
      state: { running: { startedAt: expect.any(String) } },
    });
    const answer = await fetch(`http://${ip}:8000/health`);
    expect(await answer.text()).toBe(`tok-1 $(POD_IP)-${ip}`);

    expect(await core.readNamespacedPodLog({ name: 'engine-1', namespace: 'default', container: 'fetch' })).toBe('weights ready\n');
    expect(await core.readNamespacedPodLog({ name: 'engine-1', namespace: 'default', container: 'engine', tailLines: 1 })).toBe(
      `listening on ${ip}\n`,
    );
    const noName = await failure(core.readNamespacedPodLog({ name: 'engine-1', namespace: 'default', container: 'nope' }));
    expect(noName.body.message).toBe('container nope is not valid for pod engine-1');

    // follow=true streams until the container ends; an OOM kill ends it.
    const follow = await fetch(`${standIn.url}/api/v1/namespaces/default/pods/engine-1/log?container=engine&follow=true`, {
      headers: { Authorization: `Bearer ${standIn.token}` },
    });
    const body = follow.text();
    const pid = standIn.pid('default', 'engine-1')!;
    standIn.oomKill('default', 'engine-1');
    expect(await body).toBe(`listening on ${ip}\n`);
    const killed = (await standIn.waitForPod('default', 'engine-1', (p) => p?.status.phase === 'Failed'))!;
    expect(killed.status.containerStatuses[0]).toMatchObject({
      ready: false,
      state: { terminated: { exitCode: 137, reason: 'OOMKilled' } },
    });
    expect(await isRunning(pid)).toBe(false);
  });

  it('keeps the failed output as the termination message with FallbackToLogsOnError', async () => {
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'crasher' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            node('engine', "console.log('loading'); console.error('CUDA out of memory'); process.exit(3)", {
              terminationMessagePolicy: 'FallbackToLogsOnError',
            }),
          ],
        },
      },
    });
    const failed = (await standIn.waitForPod('default', 'crasher', (p) => p?.status.phase === 'Failed'))!;
    expect(failed.status.containerStatuses[0].state.terminated).toMatchObject({
      exitCode: 3,
      reason: 'Error',
      message: 'loading\nCUDA out of memory\n',
    });
    await core.deleteNamespacedPod({ name: 'crasher', namespace: 'default' });
    expect((await failure(core.readNamespacedPod({ name: 'crasher', namespace: 'default' }))).code).toBe(404);
  });

  it('waits with CreateContainerConfigError for a missing secret and starts once it exists', async () => {
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'needs-secret' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            node('engine', 'setInterval(() => {}, 1000)', {
              env: [{ name: 'T', valueFrom: { secretKeyRef: { name: 'later', key: 'k' } } }],
            }),
          ],
        },
      },
    });
    const waiting = (await standIn.waitForPod(
      'default',
      'needs-secret',
      (p) => p?.status.containerStatuses?.[0]?.state.waiting?.reason === 'CreateContainerConfigError',
    ))!;
    expect(waiting.status.containerStatuses[0].state.waiting.message).toBe('secret "later" not found');
    expect(waiting.status.phase).toBe('Pending');
    await core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'later' }, stringData: { k: 'v' } } });
    await standIn.waitForPod('default', 'needs-secret', (p) => p?.status.phase === 'Running');
    standIn.crash('default', 'needs-secret', 2);
    const crashed = (await standIn.waitForPod('default', 'needs-secret', (p) => p?.status.phase === 'Failed'))!;
    expect(crashed.status.containerStatuses[0].state.terminated).toMatchObject({ exitCode: 2, reason: 'Error' });
  });

  it('reports ErrImagePull then ImagePullBackOff for an image that cannot be pulled', async () => {
    standIn.setImagePullFailure('registry.example/missing:1');
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'no-image' },
        spec: { restartPolicy: 'Never', containers: [{ name: 'engine', image: 'registry.example/missing:1', command: ['sleep', '30'] }] },
      },
    });
    const pulling = (await standIn.waitForPod(
      'default',
      'no-image',
      (p) => p?.status.containerStatuses?.[0]?.state.waiting?.reason === 'ErrImagePull',
    ))!;
    expect(pulling.status.containerStatuses[0].state.waiting.message).toContain(
      'failed to pull and unpack image "registry.example/missing:1"',
    );
    const backOff = (await standIn.waitForPod(
      'default',
      'no-image',
      (p) => p?.status.containerStatuses?.[0]?.state.waiting?.reason === 'ImagePullBackOff',
    ))!;
    expect(backOff.status.containerStatuses[0].state.waiting.message).toBe('Back-off pulling image "registry.example/missing:1"');
    const logs = await failure(core.readNamespacedPodLog({ name: 'no-image', namespace: 'default' }));
    expect(logs.body.message).toMatch(
      /^container "engine" in pod "no-image" is waiting to start: (trying and failing to pull image|image can't be pulled)$/,
    );
    await core.deleteNamespacedPod({ name: 'no-image', namespace: 'default' });
    await standIn.waitForPod('default', 'no-image', (p) => p === undefined, 3000);
  });

  it('deletes gracefully: SIGTERM, SIGKILL after the grace period, removal once the processes are gone', async () => {
    const polite =
      "process.on('SIGTERM', () => { console.log('draining'); setTimeout(() => process.exit(0), 200); }); console.log('up'); setInterval(() => {}, 1000)";
    const stubborn = "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('up'); setInterval(() => {}, 1000)";
    for (const [name, script] of [
      ['polite', polite],
      ['stubborn', stubborn],
    ] as const) {
      await core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name },
          spec: { restartPolicy: 'Never', terminationGracePeriodSeconds: 1, containers: [node('engine', script)] },
        },
      });
      await standIn.waitForPod('default', name, (p) => p?.status.phase === 'Running');
    }
    await expect.poll(() => core.readNamespacedPodLog({ name: 'stubborn', namespace: 'default' })).toBe('up\n');
    await expect.poll(() => core.readNamespacedPodLog({ name: 'polite', namespace: 'default' })).toBe('up\n');
    const pids = [standIn.pid('default', 'polite')!, standIn.pid('default', 'stubborn')!];

    const started = Date.now();
    const deleted = await core.deleteNamespacedPod({ name: 'polite', namespace: 'default', gracePeriodSeconds: 20 });
    expect(deleted.metadata!.deletionGracePeriodSeconds).toBe(20);
    expect(deleted.metadata!.deletionTimestamp).toBeInstanceOf(Date);
    // A second DELETE answers the terminating pod; a longer grace does not extend it (a shorter one would shorten it).
    const again = await core.deleteNamespacedPod({ name: 'polite', namespace: 'default', gracePeriodSeconds: 30 });
    expect(again.metadata!.deletionTimestamp).toEqual(deleted.metadata!.deletionTimestamp);
    const last = (await standIn.waitForPod('default', 'polite', (p) => p?.status.containerStatuses[0].state.terminated))!;
    expect(last.status.containerStatuses[0].state.terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
    await standIn.waitForPod('default', 'polite', (p) => p === undefined, 5000);
    expect(Date.now() - started).toBeLessThan(5000);

    await core.deleteNamespacedPod({ name: 'stubborn', namespace: 'default' }); // the pod's own 1 s grace
    const killed = (await standIn.waitForPod('default', 'stubborn', (p) => p?.status.containerStatuses[0].state.terminated, 5000))!;
    expect(killed.status.containerStatuses[0].state.terminated).toMatchObject({ exitCode: 137, reason: 'Error' });
    await standIn.waitForPod('default', 'stubborn', (p) => p === undefined, 5000);
    for (const pid of pids) expect(await isRunning(pid)).toBe(false);

    // A pod no node ever ran is removed at once.
    standIn.updateNode('gpu-1', { unschedulable: true });
    await core.createNamespacedPod({ namespace: 'default', body: sleepPod('never-ran') });
    await standIn.waitForPod('default', 'never-ran', (p) => p?.status.conditions?.[0]?.reason === 'Unschedulable');
    await core.deleteNamespacedPod({ name: 'never-ran', namespace: 'default' });
    expect((await failure(core.readNamespacedPod({ name: 'never-ran', namespace: 'default' }))).code).toBe(404);
  });
});
