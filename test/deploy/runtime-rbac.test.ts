/**
 * deploy/base/rbac.yaml against the requests the Kubernetes runtime makes: a runtime (two, as two gateways with
 * different hub tokens) goes through every API call it has, against the stand-in API server behind a proxy that
 * records each request: the informers' lists and watches, a replica started (its endpoint's Secret read, created, then
 * rewritten by a gateway with another token), a pod create that meets its pod already there (read back), the engine's
 * log read and followed, a stop, an orphan reaped, the endpoint forgotten. Every request must be allowed by the Role
 * (in the runtime's namespace) or the ClusterRole the example overlay renders, and together they must need exactly
 * what manifests.test.ts derives from the sources (test/deploy/rbac.ts): the two derivations check each other, and
 * the Role grants nothing else.
 */
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { KubernetesRuntime } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { startApiProxy, startKubeStandIn, writeKubeconfig, type KubeStandIn } from '../support/kube/index.js';
import { waitFor } from '../support/app.js';
import { simLaunch, startReplica } from '../support/start-replica.js';
import { kustomize } from './kustomize.js';
import { allows, grantTable, requestGrant, ruleTable, runtimeGrants, type Grant } from './rbac.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NS = 'default';
const ENDPOINT = 'ep_rbac';

let kube: KubeStandIn;
let kubeConfig: KubeConfig;
/** Every request the runtimes sent, as the proxy saw it. */
const requests: { method: string; url: string }[] = [];
const runtimes: KubernetesRuntime[] = [];

beforeAll(async () => {
  kube = await startKubeStandIn({
    processes: false,
    nodes: [{ name: 'gpu-0', gpus: 8, labels: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' } }],
  });
  const proxy = await startApiProxy(kube.url, (req) => {
    requests.push({ method: req.method ?? 'GET', url: req.url ?? '/' });
    return false;
  });
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(writeKubeconfig({ server: proxy.url, token: kube.token, namespace: NS }));
});

afterAll(async () => {
  await Promise.all(runtimes.map((runtime) => runtime.close()));
});

/** A gateway's runtime through the recording proxy, with `hubToken` as its HF_TOKEN. */
async function gateway(hubToken: string): Promise<KubernetesRuntime> {
  const runtime = new KubernetesRuntime({
    settings: readKubernetesSettings({ ENGINE_IMAGE: 'sim:1', KUBERNETES_NAMESPACE: NS }),
    kubeConfig,
    hubEndpoint: 'http://hub.invalid',
    hubToken,
    log: () => {},
  });
  runtimes.push(runtime);
  await runtime.open();
  expect(runtime.synced).toBe(true);
  return runtime;
}

test('every request the runtime makes is granted by deploy/, and together they need exactly what the sources call', async () => {
  const first = await gateway('hf_first');
  const ref = await startReplica(first, simLaunch('rep_rbac1', ENDPOINT), { pollMs: 5 });
  // The same replica placed again (a pass that did not see its create's answer): the create meets the pod, read back.
  expect((await first.ensure(simLaunch('rep_rbac1', ENDPOINT))).locator).toBe(ref.locator);

  // A gateway with another HF_TOKEN rewrites the endpoint's Secret as it places a replica.
  const second = await gateway('hf_second');
  const other = await second.ensure(simLaunch('rep_rbac2', ENDPOINT));
  await waitFor('the second pod in its gateway’s cache', async () => second.liveness(other).kind === 'alive');

  // The engine's log, read and followed (the simulated kubelet has none to give: the requests are made all the same).
  await first.logTail(ref);
  await first.readLog(ref, { tailLines: 10 }).catch(() => {});
  const stop = new AbortController();
  await first
    .followLog(ref, stop.signal)
    .then(async (lines) => {
      stop.abort();
      for await (const _ of lines) break;
    })
    .catch(() => {});

  await first.stop(ref, 1000);
  expect(await second.reapOrphans(async () => new Set([ref.replicaId]))).toEqual(['rep_rbac2']);
  await second.forgetEndpoint(ENDPOINT);

  const rendered = kustomize(path.join(ROOT, 'deploy/overlays/example'));
  const role = ruleTable(rendered.find((o) => o.kind === 'Role')!.rules);
  const clusterRole = ruleTable(rendered.find((o) => o.kind === 'ClusterRole')!.rules);
  const used: Grant[] = [];
  const refused: string[] = [];
  for (const { method, url } of requests) {
    const grant = requestGrant(method, url);
    used.push(grant);
    const granted = grant.scope === 'cluster' ? allows(clusterRole, grant) : grant.namespace === NS && allows(role, grant);
    if (!granted) refused.push(`${method} ${url}: ${grant.verb} ${grant.resource}`);
  }
  expect(refused).toEqual([]);

  const fromSources = await runtimeGrants(path.join(ROOT, 'src/runtime/kubernetes'));
  expect(grantTable(used, 'namespace')).toEqual(grantTable(fromSources, 'namespace'));
  expect(grantTable(used, 'cluster')).toEqual(grantTable(fromSources, 'cluster'));
  // And deploy/ grants no more than that.
  expect(role).toEqual(grantTable(used, 'namespace'));
  expect(clusterRole).toEqual(grantTable(used, 'cluster'));
});
