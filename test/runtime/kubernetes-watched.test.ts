/**
 * The informer keeper (src/runtime/kubernetes/watched.ts) with client-node's own informer against the stand-in API
 * server, through a proxy that can refuse reads of pods (503, as an overloaded API server answers). client-node's
 * `informer.start()` resolves even when its list failed (the failure comes as an 'error' event): the cache must not
 * count as synced then, or the runtime would answer liveness from what it held before.
 */
import { CoreV1Api, KubeConfig, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { beforeAll, expect, test } from 'vitest';
import { Watched } from '../../src/runtime/kubernetes/watched.js';
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
  const informer = makeInformer<V1Pod>(kc, `/api/v1/namespaces/${NS}/pods`, () => core.listNamespacedPod({ namespace: NS }));
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
