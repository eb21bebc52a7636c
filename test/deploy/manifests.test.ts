/**
 * deploy/: the Kustomize base of the gateway with RUNTIME=kubernetes and its example overlay, rendered
 * (test/deploy/kustomize.ts; and by `kubectl kustomize` too where one is on the PATH) and checked against
 * Kubernetes' schemas and against the gateway's own sources: the variables it reads, the routes it serves.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { GPU_TYPES } from '../../src/domain/instance-catalog.js';
import { ENDPOINT_ERROR_CODES, ENDPOINT_PHASES, ENDPOINT_STATUSES } from '../../src/domain/lifecycle.js';
import { schemaProblems, tolerationProblems } from './k8s-schema.js';
import { kustomize, type K8sObject } from './kustomize.js';
import { grantTable, ruleTable, runtimeGrants, runtimeSources } from './rbac.js';
import { REPLICA_STATES } from '../../src/domain/replica.js';
import { DEFAULTS } from '../../src/defaults.js';
import { replicaPod } from '../../src/runtime/kubernetes/pod-spec.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { restrictedViolations } from '../support/kube/pod-security-standards.js';
import { podLaunch } from '../support/kube-env.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const BASE = path.join(ROOT, 'deploy/base');
const OVERLAY = path.join(ROOT, 'deploy/overlays/example');
const NAMESPACE = 'dedicated-endpoints';
const LABELS = { 'app.kubernetes.io/name': 'dedicated-endpoints', 'app.kubernetes.io/component': 'gateway' };

/** Variables the Kubernetes runtime (src/runtime/kubernetes/) reads that the deployment must set or document. */
const KUBERNETES_RUNTIME_VARIABLES = new Set([
  'RUNTIME',
  'KUBERNETES_NAMESPACE',
  'ENGINE_IMAGE',
  'KUBERNETES_GPU_NODE_MAP',
  'KUBERNETES_MODEL_CACHE',
  'KUBERNETES_MODEL_CACHE_MAX_BYTES',
]);
/** The gateway's secrets: each from a Secret (secretKeyRef), none in the ConfigMap. */
const SECRET_VARIABLES = ['DATABASE_URL', 'ADMIN_API_KEY', 'METRICS_TOKEN', 'HF_TOKEN', 'WANDB_API_KEY'];
const KUBERNETES_RUNTIME_DIR = path.join(ROOT, 'src/runtime/kubernetes');

const base = kustomize(BASE);
const rendered = kustomize(OVERLAY);

function only(objects: K8sObject[], kind: string): K8sObject {
  const found = objects.filter((o) => o.kind === kind);
  if (found.length !== 1) throw new Error(`expected one ${kind}, found ${found.length}`);
  return found[0]!;
}

const deployment = only(rendered, 'Deployment');
const podSpec = deployment.spec.template.spec;
const gateway = podSpec.containers.find((c: any) => c.name === 'gateway');
const envVar = (name: string) => gateway.env.find((e: any) => e.name === name);

function read(file: string): string {
  return readFileSync(path.join(ROOT, file), 'utf8');
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => readFileSync(path.join(entry.parentPath, entry.name), 'utf8'));
}

/** `'NAME'` (or "NAME", `NAME`) or `env.NAME` in the source: how src/config.ts reads a variable. */
function readsVariable(source: string, name: string): boolean {
  return new RegExp(`(['"\`])${name}\\1|\\benv\\.${name}\\b`).test(source);
}

/** Every variable the gateway container gets: its env, and the keys of the ConfigMaps it takes whole. */
function variableNames(): string[] {
  const names: string[] = gateway.env.map((e: any) => e.name);
  for (const from of gateway.envFrom ?? []) {
    expect(from.configMapRef, 'envFrom takes ConfigMaps only').toBeDefined();
    const configMap = rendered.find((o) => o.kind === 'ConfigMap' && o.metadata.name === from.configMapRef.name);
    names.push(...Object.keys(configMap?.data ?? {}));
  }
  return names;
}

describe('deploy/ renders to valid Kubernetes objects', () => {
  it('every object of the example overlay validates against the Kubernetes schemas, with no unknown field', () => {
    expect(rendered.length).toBeGreaterThan(0);
    for (const object of rendered) expect(schemaProblems(object), `${object.kind} ${object.metadata.name}`).toEqual([]);
  });

  it('the schema check catches what a typo makes: a wrong type, a missing field, an unknown field', () => {
    const broken = structuredClone(deployment);
    broken.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    broken.spec.template.spec.containers[0].readinesProbe = broken.spec.template.spec.containers[0].readinessProbe;
    delete broken.spec.selector;
    const problems = schemaProblems(broken).join('\n');
    expect(problems).toMatch(/containerPort must be integer/);
    expect(problems).toMatch(/data\/spec must have required property selector/);
    expect(problems).toMatch(/unknown field \/spec\/template\/spec\/containers\/0\/readinesProbe/);
  });

  it('the base has no namespace: the overlay names it, on every namespaced object and the bindings', () => {
    expect(base.filter((o) => o.kind === 'Namespace')).toEqual([]);
    for (const object of base) expect(object.metadata.namespace, `${object.kind} ${object.metadata.name}`).toBeUndefined();
    for (const object of rendered) {
      if (['Namespace', 'ClusterRole', 'ClusterRoleBinding'].includes(object.kind)) expect(object.metadata.namespace).toBeUndefined();
      else expect(object.metadata.namespace, `${object.kind} ${object.metadata.name}`).toBe(NAMESPACE);
    }
    expect(only(rendered, 'Namespace').metadata.name).toBe(NAMESPACE);
  });

  it('the labels are the same everywhere, and the selectors pick the gateway Pods', () => {
    // The gateway's objects (its network policy too), and the example's for its engines (their model claim, their
    // network policy: network-policies.test.ts checks both policies).
    for (const object of rendered.filter((o) => o.kind !== 'Namespace')) {
      const engine =
        object.kind === 'PersistentVolumeClaim' || (object.kind === 'NetworkPolicy' && object.metadata.name === 'dedicated-engines');
      const labels = engine ? { ...LABELS, 'app.kubernetes.io/component': 'engine' } : LABELS;
      expect(object.metadata.labels, `${object.kind} ${object.metadata.name}`).toMatchObject(labels);
    }
    const podLabels = deployment.spec.template.metadata.labels;
    expect(podLabels).toMatchObject(LABELS);
    expect(deployment.spec.selector.matchLabels).toEqual(LABELS);
    const service = only(rendered, 'Service');
    expect(service.spec.selector).toEqual(LABELS);
    expect(service.spec.ports).toEqual([expect.objectContaining({ port: 80, targetPort: 'http' })]);
    expect(gateway.ports.map((p: any) => p.name)).toContain('http');
  });

  it.skipIf(spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status !== 0)(
    'kubectl kustomize renders the same objects as the test renderer',
    () => {
      const sorted = (objects: K8sObject[]) =>
        [...objects].sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));
      for (const dir of [BASE, OVERLAY]) {
        const result = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
        expect(result.stderr).toBe('');
        const theirs = parseAllDocuments(result.stdout).map((doc) => doc.toJSON() as K8sObject);
        expect(sorted(kustomize(dir)), dir).toEqual(sorted(theirs));
      }
    },
  );
});

describe('the gateway Deployment', () => {
  it('runs 2 replicas of the image the overlay names, with the runtime Kubernetes in its own namespace', () => {
    expect(deployment.spec.replicas).toBe(2);
    expect(gateway.image).toBe('registry.example.com/ml-platform/dedicated-endpoints:0.1.0');
    expect(gateway.command).toEqual(['node', '--import', 'tsx', 'src/main.ts']);
    expect(existsSync(path.join(ROOT, 'src/main.ts'))).toBe(true);
    expect(envVar('RUNTIME')).toEqual({ name: 'RUNTIME', value: 'kubernetes' });
    expect(envVar('KUBERNETES_NAMESPACE').valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.namespace' } });
    // The engines run the gateway's own image: the overlay's replacement follows its `images:`.
    expect(envVar('ENGINE_IMAGE')).toEqual({ name: 'ENGINE_IMAGE', value: gateway.image });
  });

  it('takes its secrets from the Secrets the docs name: the database is required, the rest optional', () => {
    const secret = (name: string) => envVar(name)?.valueFrom?.secretKeyRef;
    expect(secret('DATABASE_URL')).toEqual({ name: 'dedicated-database', key: 'url' });
    expect(secret('ADMIN_API_KEY')).toEqual({ name: 'dedicated-admin', key: 'key', optional: true });
    expect(secret('HF_TOKEN')).toEqual({ name: 'dedicated-hub', key: 'token', optional: true });
    expect(secret('METRICS_TOKEN')).toEqual({ name: 'dedicated-admin', key: 'metrics-token', optional: true });
    const configMap = rendered.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'dedicated-gateway');
    for (const name of SECRET_VARIABLES) {
      expect(secret(name), `${name} from a Secret`).toBeDefined();
      expect(Object.keys(configMap?.data ?? {}), `${name} not in the ConfigMap`).not.toContain(name);
    }
    const docs = read('docs/kubernetes.md');
    for (const env of gateway.env.filter((e: any) => e.valueFrom?.secretKeyRef)) {
      const { name, key } = env.valueFrom.secretKeyRef;
      expect(docs, `docs/kubernetes.md names Secret ${name} key ${key}`).toMatch(new RegExp(`${name}[^\\n]*${key}|${key}[^\\n]*${name}`));
    }
  });

  it('sets only variables that src/config.ts reads (a renamed variable fails here)', () => {
    const config = read('src/config.ts');
    const unread = variableNames().filter((name) => !KUBERNETES_RUNTIME_VARIABLES.has(name) && !readsVariable(config, name));
    expect(unread).toEqual([]);
  });

  it.skipIf(!existsSync(KUBERNETES_RUNTIME_DIR))('sets only Kubernetes runtime variables that the gateway reads', () => {
    const sources = [read('src/config.ts'), ...sourcesUnder(KUBERNETES_RUNTIME_DIR)];
    const names = variableNames().filter((name) => KUBERNETES_RUNTIME_VARIABLES.has(name));
    expect(names.filter((name) => !sources.some((source) => readsVariable(source, name)))).toEqual([]);
  });

  it.skipIf(!existsSync(KUBERNETES_RUNTIME_DIR))('docs/kubernetes.md documents every variable the Kubernetes runtime reads', () => {
    const docs = read('docs/kubernetes.md');
    const names = sourcesUnder(KUBERNETES_RUNTIME_DIR).flatMap((source) =>
      [...source.matchAll(/\(env, '([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]!),
    );
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((name) => !docs.includes(`\`${name}\``))).toEqual([]);
  });

  it("probes routes the gateway serves, on the probes' own port (HEALTH_PORT), which the Service leaves out", () => {
    // The probes' answers (src/http/health-listener.ts), which the main server serves too.
    const probes = read('src/http/health-listener.ts');
    const routes = [...probes.matchAll(/pathname === '(\/[^']*)'/g)].map((m) => m[1]);
    expect(read('src/http/server.ts')).toMatch(/isProbePath\(url\.pathname\)\) \{\s*await probe\(url\.pathname, res\)/);
    const api = gateway.ports.find((p: any) => p.name === 'http');
    expect(String(api.containerPort)).toBe(envVar('PORT').value);
    // Their own listener, outside HTTP_MAX_CONNECTIONS: a flood of the API's port must not fail the liveness probe.
    const health = gateway.ports.find((p: any) => p.name === 'health');
    expect(String(health.containerPort)).toBe(envVar('HEALTH_PORT').value);
    expect(health.containerPort).not.toBe(api.containerPort);
    for (const kind of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      const probe = gateway[kind];
      expect(routes, `${kind} path`).toContain(probe.httpGet.path);
      expect(probe.httpGet.port, `${kind} port`).toBe('health');
    }
    // Only the kubelet asks there: the Service does not route to it.
    const service = only(rendered, 'Service');
    expect(service.spec.ports.map((p: any) => p.targetPort)).not.toContain('health');
    expect(service.spec.ports.map((p: any) => p.targetPort)).not.toContain(health.containerPort);
    // Liveness must not depend on the database: a database outage would restart every gateway.
    expect(gateway.livenessProbe.httpGet.path).toBe('/healthz');
    expect(probes).toMatch(/pathname === '\/healthz'\) \{\s*sendJson\(res, 200/);
  });

  it('runs as a non-root user, read-only but for emptyDirs on DATA_DIR and /tmp', () => {
    expect(podSpec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(podSpec.securityContext.runAsUser).toBeGreaterThan(0);
    expect(gateway.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    const mounts = Object.fromEntries(gateway.volumeMounts.map((m: any) => [m.mountPath, m.name]));
    const emptyDirs = podSpec.volumes.filter((v: any) => v.emptyDir).map((v: any) => v.name);
    for (const writable of [envVar('DATA_DIR').value, '/tmp']) expect(emptyDirs, writable).toContain(mounts[writable]);
    expect(gateway.resources.requests).toBeDefined();
    expect(gateway.resources.limits.memory).toBeDefined();
  });
});

describe('stopping a gateway (rolling updates, node drains)', () => {
  /** A duration the gateway's sources declare in milliseconds (`const NAME = 20_000;`). */
  const sourceMs = (file: string, name: string) => {
    const match = new RegExp(`const ${name} = ([\\d_]+);`).exec(read(file));
    expect(match, `${file} declares ${name}`).not.toBeNull();
    return Number(match![1]!.replace(/_/g, ''));
  };

  it('waits in preStop for the endpoints to follow, with a sleep the image has', () => {
    expect(gateway.lifecycle.preStop).toEqual({ exec: { command: ['sleep', '5'] } });
    const stages = [...read('Dockerfile').matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]!);
    // The image runs from a Debian-based Node.js image (coreutils' sleep), not a distroless one (no sleep).
    expect(stages.at(-1)).toMatch(/^node:\d+-(bookworm|bullseye)(-slim)?$/);
  });

  it('gives the drain its time: the grace period covers preStop, DRAIN_TIMEOUT_MS, the close after it and the database', () => {
    const configMap = rendered.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'dedicated-gateway');
    const drainMs = Number(envVar('DRAIN_TIMEOUT_MS')?.value ?? configMap?.data.DRAIN_TIMEOUT_MS ?? DEFAULTS.drainTimeoutMs);
    const preStopS = Number(gateway.lifecycle.preStop.exec.command[1]);
    const worstS =
      preStopS + (drainMs + sourceMs('src/main.ts', 'CLOSE_TIMEOUT_MS') + sourceMs('src/main.ts', 'DATABASE_CLOSE_TIMEOUT_MS')) / 1000;
    expect(podSpec.terminationGracePeriodSeconds).toBeGreaterThan(worstS);
    // Readiness fails fast enough to matter while it drains (503 `draining`).
    expect(gateway.readinessProbe.httpGet.path).toBe('/readyz');
    expect(read('src/http/health-listener.ts')).toMatch(/state\.draining\(\)\) sendJson\(res, 503, \{ status: 'draining' \}/);
    expect(read('src/http/server.ts')).toMatch(/draining: \(\) => drain\.active/);
  });

  it('a PodDisruptionBudget keeps one gateway up through a drain', () => {
    const budget = only(rendered, 'PodDisruptionBudget');
    expect(budget.spec.minAvailable).toBe(1);
    expect(budget.spec.maxUnavailable).toBeUndefined();
    expect(budget.spec.selector).toEqual({ matchLabels: LABELS });
    expect(budget.metadata.namespace).toBe(NAMESPACE);
    // More replicas than the budget keeps: an eviction can go ahead, one Pod at a time.
    expect(deployment.spec.replicas).toBeGreaterThan(budget.spec.minAvailable);
    // Its schema is checked too: a wrong type there fails.
    const broken = structuredClone(budget);
    broken.spec.minAvailable = [1];
    expect(schemaProblems(broken).join('\n')).toMatch(/minAvailable/);
  });
});

describe('the gateway identity', () => {
  it('the Deployment runs as the ServiceAccount that the bindings name', () => {
    const account = only(rendered, 'ServiceAccount');
    expect(podSpec.serviceAccountName).toBe(account.metadata.name);
    for (const binding of rendered.filter((o) => o.kind.endsWith('RoleBinding'))) {
      expect(binding.subjects, binding.metadata.name).toEqual([
        { kind: 'ServiceAccount', name: account.metadata.name, namespace: NAMESPACE },
      ]);
    }
  });

  // What the runtime's sources call (test/deploy/rbac.ts reads them): a call added, or one removed, changes what the
  // Role must grant, and these fail until rbac.yaml follows. runtime-rbac.test.ts checks the same against the requests
  // a runtime makes.
  it('the Role grants exactly what the runtime calls, in its namespace', async () => {
    const role = only(rendered, 'Role');
    const needed = grantTable(await runtimeGrants(KUBERNETES_RUNTIME_DIR), 'namespace');
    expect(ruleTable(role.rules)).toEqual(needed);
    // Secrets are read by name only: a list would hand a compromised gateway every Secret of the namespace.
    expect(needed.secrets).not.toContain('list');
    expect(needed.secrets).not.toContain('watch');
    const binding = only(rendered, 'RoleBinding');
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name });
  });

  it('the derivation sees a call the runtime would add: a Secret list, an Event create, a pod eviction', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rbac-scan-'));
    try {
      for (const [name, source] of runtimeSources(KUBERNETES_RUNTIME_DIR)) writeFileSync(path.join(dir, name), source);
      writeFileSync(
        path.join(dir, 'added.ts'),
        [
          "import type { CoreV1Api } from '@kubernetes/client-node';",
          'export const added = (api: CoreV1Api) => [',
          "  api.listNamespacedSecret({ namespace: 'ns' }),",
          "  api.createNamespacedEvent({ namespace: 'ns', body: {} }),",
          "  api.createNamespacedPodEviction({ name: 'p', namespace: 'ns', body: {} }),",
          '];',
        ].join('\n'),
      );
      const needed = grantTable(await runtimeGrants(dir), 'namespace');
      expect(needed.secrets).toContain('list');
      expect(needed.events).toEqual(['create']);
      expect(needed['pods/eviction']).toEqual(['create']);
      writeFileSync(path.join(dir, 'added.ts'), "import { Exec } from '@kubernetes/client-node';\nexport const exec = Exec;\n");
      await expect(runtimeGrants(dir)).rejects.toThrow(/imports Exec from @kubernetes\/client-node/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('nothing cluster-wide but reading nodes, as the runtime does', async () => {
    const clusterWide = rendered.filter((o) => o.kind.startsWith('Cluster')).map((o) => o.kind);
    expect(clusterWide.sort()).toEqual(['ClusterRole', 'ClusterRoleBinding']);
    const clusterRole = only(rendered, 'ClusterRole');
    expect(clusterRole.aggregationRule).toBeUndefined();
    const needed = grantTable(await runtimeGrants(KUBERNETES_RUNTIME_DIR), 'cluster');
    expect(Object.keys(needed)).toEqual(['nodes']);
    expect(ruleTable(clusterRole.rules)).toEqual(needed);
    expect(only(rendered, 'ClusterRoleBinding').roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: clusterRole.metadata.name,
    });
  });
});

describe('the example configuration', () => {
  const configMap = rendered.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'dedicated-gateway');
  const nodeMap = JSON.parse(configMap?.data.KUBERNETES_GPU_NODE_MAP ?? 'null');

  it('maps each GPU kind of the instance catalog to GPU nodes, with valid tolerations', () => {
    expect(gateway.envFrom).toContainEqual({ configMapRef: { name: 'dedicated-gateway', optional: true } });
    expect(Object.keys(nodeMap).sort()).toEqual([...GPU_TYPES].sort());
    for (const [kind, placement] of Object.entries<any>(nodeMap)) {
      expect(Object.keys(placement).sort(), kind).toEqual(['nodeSelector', 'tolerations']);
      expect(placement.nodeSelector['nvidia.com/gpu.product'], kind).toMatch(new RegExp(`^NVIDIA-${kind}`));
      expect(placement.tolerations).toContainEqual({ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' });
      for (const toleration of placement.tolerations) expect(tolerationProblems(toleration), kind).toEqual([]);
    }
  });

  it('caches models in a ReadWriteMany claim of the overlay, bounded within its size', () => {
    const settings = readKubernetesSettings({ ...configMap?.data, ENGINE_IMAGE: gateway.image });
    expect(settings.modelCache).toEqual({ kind: 'pvc', claim: 'dedicated-models' });
    const claim = rendered.find((o) => o.kind === 'PersistentVolumeClaim' && o.metadata.name === 'dedicated-models');
    expect(claim?.metadata.namespace).toBe(NAMESPACE);
    expect(claim?.spec.accessModes).toEqual(['ReadWriteMany']);
    expect(claim?.spec.resources.requests.storage).toMatch(/^\d+Gi$/);
    const claimBytes = Number.parseInt(claim?.spec.resources.requests.storage, 10) * 2 ** 30;
    expect(settings.modelCacheMaxBytes).toBeGreaterThan(0);
    expect(settings.modelCacheMaxBytes).toBeLessThan(claimBytes);
  });

  // The gateway's ServiceAccount may create Pods: in a namespace that admits privileged Pods, a compromised gateway
  // could create one that is root on a node. The example's namespace refuses them, and what the gateway runs there passes.
  it('the namespace enforces Pod Security restricted, which the gateway and its engine Pods pass', () => {
    expect(only(rendered, 'Namespace').metadata.labels).toMatchObject({ 'pod-security.kubernetes.io/enforce': 'restricted' });
    expect(restrictedViolations({ spec: podSpec })).toEqual([]);
    const settings = readKubernetesSettings({ ...configMap?.data, ENGINE_IMAGE: gateway.image, KUBERNETES_NAMESPACE: NAMESPACE });
    const owner = { name: 'ep-x-engine', uid: 'u-1' };
    const context = { settings, namespace: NAMESPACE, owner, hubEndpoint: 'https://huggingface.co', hasHubToken: true };
    const engine = replicaPod(podLaunch({ gpuType: 'H100' }), context);
    expect(engine.spec?.initContainers?.length).toBeGreaterThan(0);
    expect(restrictedViolations(engine)).toEqual([]);
    // A hostPath cache would not be admitted there.
    const onHost = readKubernetesSettings({
      ...configMap?.data,
      ENGINE_IMAGE: gateway.image,
      KUBERNETES_MODEL_CACHE: 'hostPath:/var/cache/m',
    });
    expect(restrictedViolations(replicaPod(podLaunch(), { ...context, settings: onHost }))).toContain('hostPath volumes: models');
  });

  it('docs/kubernetes.md names only statuses, phases, replica states and failure codes that exist', () => {
    const known = new Set<string>([...ENDPOINT_STATUSES, ...ENDPOINT_PHASES, ...ENDPOINT_ERROR_CODES, ...REPLICA_STATES]);
    const section = read('docs/kubernetes.md').split('## Statuses and phases on Kubernetes')[1]!.split('\n## ')[0]!;
    const named = [...section.matchAll(/`([A-Z][A-Z_]+[A-Z])`/g)].map((m) => m[1]!);
    expect(named).toEqual(expect.arrayContaining(['REQUESTING_VIRTUAL_MACHINE', 'DOWNLOADING_MODEL', 'ENGINE_INITIALIZING']));
    const runtimeSources = sourcesUnder(KUBERNETES_RUNTIME_DIR).join('\n');
    const variables = new Set([...variableNames(), ...named.filter((name) => readsVariable(runtimeSources, name))]);
    expect(named.filter((name) => !known.has(name) && !variables.has(name))).toEqual([]);
  });

  it('docs/kubernetes.md shows the same GPU map', () => {
    const blocks = [...read('docs/kubernetes.md').matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]!));
    expect(blocks).toContainEqual(nodeMap);
  });
});
