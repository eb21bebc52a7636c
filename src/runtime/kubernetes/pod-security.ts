/**
 * Who an engine pod's containers run as, and how the model cache becomes theirs to write.
 *
 * The fetcher and the engine run as KUBERNETES_POD_USER (our image's user, 1000:1000, by default), with nothing they
 * do not need: no privilege escalation, no capabilities, the runtime's default seccomp profile. A namespace at the
 * Pod Security `restricted` level then accepts the pod, when its cache is a claim or an emptyDir.
 *
 * The cache volume must be writable by that user, and a fresh volume is root's:
 * - a claim or an emptyDir: `fsGroup` makes the kubelet give the volume's files to the group (group-writable, setgid)
 *   as it mounts it, and `OnRootMismatch` does so only when the volume's root is not the group's yet, so a large
 *   cache is not walked again at every pod's start;
 * - a hostPath: `fsGroup` does not apply to it, and the kubelet creates the directory as root, mode 0755. So the
 *   pod's first init container, as root with the one capability to change an owner (CAP_CHOWN), gives the directory
 *   to the user. Only the directory itself: what the fetchers write in it is theirs already.
 *
 * With `0:0` (an image that runs as root, such as one built on vLLM's), root needs none of that, and keeps the
 * runtime's default capabilities: it is not denied files another user wrote into a shared cache.
 */
import type { V1Container, V1PodSecurityContext, V1SecurityContext } from '@kubernetes/client-node';
import type { KubernetesSettings } from './settings.js';

export const PREPARE_CACHE_CONTAINER = 'prepare-cache';

const runsAsRoot = (settings: KubernetesSettings) => settings.podUser.uid === 0;

/** The pod's: its user and group, the cache volume's group, and the seccomp profile for every container. */
export function podSecurityContext(settings: KubernetesSettings): V1PodSecurityContext {
  const { uid, gid } = settings.podUser;
  return {
    runAsUser: uid,
    runAsGroup: gid,
    ...(runsAsRoot(settings) ? {} : { fsGroup: gid, fsGroupChangePolicy: 'OnRootMismatch' }),
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/** The fetcher's and the engine's: no root (checked by the kubelet), no escalation, no capabilities. */
export function containerSecurityContext(settings: KubernetesSettings): V1SecurityContext {
  if (runsAsRoot(settings)) return { allowPrivilegeEscalation: false };
  return { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };
}

/**
 * The init container that gives a hostPath cache's directory to the pods' user, before the fetcher writes in it;
 * none for another volume, or for pods that run as root. `chown` of the mount point needs CAP_CHOWN only (its parents
 * are the image's, searchable by anyone); `chown` is in every Debian image (coreutils), ours included.
 */
export function prepareCacheContainer(settings: KubernetesSettings): V1Container | undefined {
  if (settings.modelCache.kind !== 'hostPath' || runsAsRoot(settings)) return undefined;
  const { uid, gid } = settings.podUser;
  return {
    name: PREPARE_CACHE_CONTAINER,
    image: settings.engineImage,
    command: ['chown', `${uid}:${gid}`, settings.modelCacheMount],
    securityContext: {
      runAsUser: 0,
      runAsGroup: 0,
      runAsNonRoot: false,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'], add: ['CHOWN'] },
    },
    volumeMounts: [{ name: 'models', mountPath: settings.modelCacheMount }],
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
}
