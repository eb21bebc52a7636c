/**
 * Who an engine pod runs as, and a model cache it can write (src/runtime/kubernetes/pod-security.ts): the pod spec
 * for each cache volume, checked against Kubernetes' schemas and the Pod Security `restricted` level; the stand-in's
 * validation of security contexts and its kubelet's non-root check; and the real model fetcher, as the image's user
 * (1000), against a cache directory that is root's (mode 0755, as a real kubelet creates a hostPath), before and after
 * the pod's preparation of it, run as the init container runs it (root with CAP_CHOWN only). That part needs root and
 * setpriv (util-linux), and is skipped without them.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readlink, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { Pod as PodModel } from 'kubernetes-models/v1/Pod';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ConfigError } from '../../src/config-env.js';
import { PREPARE_CACHE_CONTAINER } from '../../src/runtime/kubernetes/pod-security.js';
import { FETCH_CONTAINER, replicaPod } from '../../src/runtime/kubernetes/pod-spec.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { schemaProblems } from '../deploy/k8s-schema.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { podContext, podLaunch } from '../support/kube-env.js';
import { expand } from '../support/kube/containers.js';
import { startKubeStandIn, type KubeStandIn } from '../support/kube/index.js';
import { restrictedViolations } from '../support/kube/pod-security-standards.js';
import { validatePod } from '../support/kube/validation.js';

const run = promisify(execFile);

/** The pod's spec as a Deployment's template: its schema check refuses fields Kubernetes does not define. */
function specProblems(pod: V1Pod): string[] {
  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'check' },
    spec: { selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b' } }, spec: pod.spec } },
  };
  return schemaProblems(deployment);
}

const podFor = (env: Record<string, string>) => replicaPod(podLaunch(), podContext(env));
const initNames = (pod: V1Pod) => pod.spec!.initContainers!.map((c) => c.name);
const named = (pod: V1Pod, name: string) => [...pod.spec!.initContainers!, ...pod.spec!.containers].find((c) => c.name === name)!;
const UNPRIVILEGED = { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };

describe('the engine pod, for each model cache', () => {
  test('a hostPath: runs as 1000:1000, unprivileged, after an init container that gives the directory to that user as root with CAP_CHOWN only', () => {
    const pod = podFor({});
    expect(new PodModel(pod as never).validate()).toBeUndefined();
    expect(specProblems(pod)).toEqual([]);
    expect(() => validatePod(pod as never)).not.toThrow();
    // The client's serializer knows every field: the pod goes out as written.
    expect(JSON.parse(JSON.stringify(pod))).toEqual(ObjectSerializer.serialize(pod, 'V1Pod', ''));
    expect(pod.spec!.securityContext).toEqual({
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      fsGroupChangePolicy: 'OnRootMismatch',
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(initNames(pod)).toEqual([PREPARE_CACHE_CONTAINER, FETCH_CONTAINER]);
    expect(named(pod, PREPARE_CACHE_CONTAINER)).toMatchObject({
      image: 'img:1',
      command: ['chown', '1000:1000', '/models'],
      securityContext: {
        runAsUser: 0,
        runAsGroup: 0,
        runAsNonRoot: false,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'], add: ['CHOWN'] },
      },
      volumeMounts: [{ name: 'models', mountPath: '/models' }],
    });
    expect(named(pod, FETCH_CONTAINER).securityContext).toEqual(UNPRIVILEGED);
    expect(named(pod, 'engine').securityContext).toEqual(UNPRIVILEGED);
    // Pod Security admission refuses a hostPath at every level but privileged, and the preparation runs as root.
    expect(restrictedViolations(pod)).toEqual([
      'hostPath volumes: models',
      'runAsNonRoot != true: container prepare-cache',
      'runAsUser=0: container prepare-cache',
      'capabilities beyond NET_BIND_SERVICE: container prepare-cache adds CHOWN',
    ]);
  });

  test.each([['pvc:models'], ['emptyDir']])(
    '%s: the fsGroup makes the volume writable; nothing runs as root, and the restricted level admits the pod',
    (cache) => {
      const pod = podFor({ KUBERNETES_MODEL_CACHE: cache });
      expect(specProblems(pod)).toEqual([]);
      expect(() => validatePod(pod as never)).not.toThrow();
      expect(pod.spec!.securityContext).toMatchObject({ runAsUser: 1000, fsGroup: 1000, fsGroupChangePolicy: 'OnRootMismatch' });
      expect(initNames(pod)).toEqual([FETCH_CONTAINER]);
      expect(restrictedViolations(pod)).toEqual([]);
    },
  );

  test('KUBERNETES_POD_USER: another user is the one the cache is given to; 0:0 (an image that runs as root) needs no preparation', () => {
    const other = podFor({ KUBERNETES_POD_USER: '2000:3000', KUBERNETES_MODEL_CACHE_MOUNT: '/cache' });
    expect(other.spec!.securityContext).toMatchObject({ runAsUser: 2000, runAsGroup: 3000, fsGroup: 3000 });
    expect(named(other, PREPARE_CACHE_CONTAINER).command).toEqual(['chown', '2000:3000', '/cache']);

    const root = podFor({ KUBERNETES_POD_USER: '0:0' });
    expect(specProblems(root)).toEqual([]);
    expect(root.spec!.securityContext).toEqual({ runAsUser: 0, runAsGroup: 0, seccompProfile: { type: 'RuntimeDefault' } });
    expect(initNames(root)).toEqual([FETCH_CONTAINER]);
    expect(named(root, 'engine').securityContext).toEqual({ allowPrivilegeEscalation: false });

    const read = (value: string) => readKubernetesSettings({ ENGINE_IMAGE: 'img:1', KUBERNETES_POD_USER: value }).podUser;
    expect(read('')).toEqual({ uid: 1000, gid: 1000 });
    for (const bad of ['1000', 'node:node', '-1:0', '1000:2147483648', '1000:1000:1']) {
      expect(() => read(bad), bad).toThrow(ConfigError);
      expect(() => read(bad), bad).toThrow(/KUBERNETES_POD_USER.*UID:GID/);
    }
  });
});

describe("the stand-in's security contexts", () => {
  test('the API server refuses malformed ones, naming each field', () => {
    const pod = podFor({}) as any;
    pod.spec.securityContext = { runAsUser: -1, fsGroupChangePolicy: 'Sometimes', seccompProfile: { type: 'Localhost' } };
    pod.spec.containers[0].securityContext = { runAsNonRoot: 'yes', allowPrivilegeEscalation: false, privileged: true };
    let error: any;
    try {
      validatePod(pod);
    } catch (thrown) {
      error = thrown;
    }
    expect(error?.status.details.causes.map((c: { field: string }) => c.field)).toEqual([
      'spec.containers[0].securityContext.runAsNonRoot',
      'spec.containers[0].securityContext',
      'spec.securityContext.runAsUser',
      'spec.securityContext.fsGroupChangePolicy',
      'spec.securityContext.seccompProfile.localhostProfile',
    ]);
  });

  describe("the kubelet's non-root check", () => {
    let kube: KubeStandIn;
    beforeAll(async () => {
      kube = await startKubeStandIn({ cwd: process.cwd(), nodes: [{ name: 'node-1', gpus: 0 }] });
    });
    afterAll(async () => {
      await kube?.close();
    });

    test('a container that must not run as root and would is not started (CreateContainerConfigError)', async () => {
      const kc = new KubeConfig();
      kc.loadFromFile(kube.writeKubeconfig('default'));
      const core = kc.makeApiClient(CoreV1Api);
      const container = { name: 'main', image: 'img:1', command: ['sleep', '30'], securityContext: { runAsNonRoot: true } };
      await core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: 'as-root' },
          spec: { restartPolicy: 'Never', securityContext: { runAsUser: 0 }, containers: [container] },
        },
      });
      await expect
        .poll(
          async () =>
            (await core.readNamespacedPod({ name: 'as-root', namespace: 'default' })).status?.containerStatuses?.[0]?.state?.waiting,
        )
        .toMatchObject({ reason: 'CreateContainerConfigError', message: expect.stringContaining('runAsUser breaks non-root policy') });
    });
  });
});

const canSwitchUsers = process.getuid?.() === 0 && existsSync('/usr/bin/setpriv');

describe.skipIf(!canSwitchUsers)('the fetcher as user 1000, on a cache directory that is root’s (mode 0755)', () => {
  const model = Buffer.from('GGUF tiny enough '.repeat(64));
  const commit = 'a'.repeat(40);
  let hub: FakeHub;
  let base: string;
  let cache: string;

  beforeAll(async () => {
    hub = await startFakeHub({ repos: [{ id: 'acme/tiny-GGUF', files: { 'tiny.gguf': model }, commits: { main: commit } }] });
    base = await mkdtemp(path.join(os.tmpdir(), 'kube-podsec-'));
    await chmod(base, 0o755);
  });
  afterAll(async () => {
    await hub?.close();
    if (base) await rm(base, { recursive: true, force: true });
  });

  /** The pod, with the cache mounted where the test's directory is, and the fetcher run from this checkout. */
  const pod = () =>
    replicaPod(
      podLaunch({ modelRepo: 'acme/tiny-GGUF', modelRevision: commit, modelFile: { path: 'tiny.gguf', sha256: null, size: model.length } }),
      {
        ...podContext({
          KUBERNETES_MODEL_CACHE: `hostPath:${cache}`,
          KUBERNETES_MODEL_CACHE_MOUNT: cache,
          KUBERNETES_NODE_COMMAND: `${process.execPath} --import tsx`,
          KUBERNETES_APP_DIR: process.cwd(),
        }),
        hubEndpoint: hub.url,
        hasHubToken: false,
      },
    );

  /** A container's command as the kubelet would run it: as its user, with its capabilities and no new privileges. */
  async function runContainer(container: NonNullable<V1Pod['spec']>['containers'][number], uid: number, gid: number) {
    const words = [...container.command!, ...(container.args ?? [])].map((word) => expand(word, new Map()));
    const added = (container.securityContext?.capabilities?.add ?? []).map((name) => `+${name.toLowerCase()}`);
    const setpriv = [
      `--reuid=${uid}`,
      `--regid=${gid}`,
      '--clear-groups',
      '--no-new-privs',
      `--bounding-set=${['-all', ...added].join(',')}`,
    ];
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: base, HF_ENDPOINT: hub.url };
    try {
      const { stdout, stderr } = await run('setpriv', [...setpriv, ...words], { env, cwd: process.cwd() });
      return { code: 0, output: stdout + stderr };
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string };
      return { code: failed.code, output: failed.stdout + failed.stderr };
    }
  }

  beforeAll(async () => {
    // As a real kubelet creates a hostPath of type DirectoryOrCreate: root's, mode 0755.
    cache = path.join(base, 'models');
    await mkdir(cache, { mode: 0o755 });
  });

  test('without the preparation it fails with EACCES; prepared as the init container does it, it downloads and links the model', async () => {
    const spec = pod();
    const fetcher = named(spec, FETCH_CONTAINER);
    const { uid, gid } = { uid: spec.spec!.securityContext!.runAsUser!, gid: spec.spec!.securityContext!.runAsGroup! };
    expect({ uid, gid }).toEqual({ uid: 1000, gid: 1000 });

    const unprepared = await runContainer(fetcher, uid, gid);
    expect(unprepared.code).toBe(1);
    expect(unprepared.output).toMatch(/ENGINE_ERROR \{"code":"WORKLOAD_INIT_DOWNLOAD_ERROR".*EACCES/);

    const prepared = await runContainer(named(spec, PREPARE_CACHE_CONTAINER), 0, 0);
    expect(prepared).toEqual({ code: 0, output: '' });
    expect(await stat(cache)).toMatchObject({ uid: 1000, gid: 1000, mode: 0o40755 });

    const fetched = await runContainer(fetcher, uid, gid);
    expect(fetched.output).toContain('downloaded: ');
    expect(fetched.code).toBe(0);
    const link = fetcher.args![fetcher.args!.indexOf('--link') + 1]!;
    expect((await stat(link)).size).toBe(model.length);
    expect(path.isAbsolute(await readlink(link))).toBe(true);
    // A second pod on the node: its preparation changes nothing, and its fetcher writes where the first one did.
    expect(await runContainer(named(spec, PREPARE_CACHE_CONTAINER), 0, 0)).toEqual({ code: 0, output: '' });
    expect((await runContainer(fetcher, uid, gid)).code).toBe(0);
  }, 60_000);
});
