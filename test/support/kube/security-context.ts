/**
 * Pod and container security contexts, for the stand-in: kube-apiserver's validation of their fields (its rules and
 * messages), and the kubelet's check of `runAsNonRoot` before it starts a container.
 */
import type { Causes } from './validation.js';

const MAX_ID = 2_147_483_647;
const ID_MSG = `must be between 0 and ${MAX_ID}, inclusive`;
const SECCOMP_TYPES = ['Localhost', 'RuntimeDefault', 'Unconfined'];

function validateId(value: unknown, field: string, causes: Causes): void {
  if (value != null && !(Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_ID))
    causes.invalid(field, value, ID_MSG);
}

function validateBoolean(value: unknown, field: string, causes: Causes): void {
  if (value != null && typeof value !== 'boolean') causes.invalid(field, value, 'must be a boolean');
}

function validateSeccomp(profile: any, field: string, causes: Causes): void {
  if (profile == null) return;
  if (!SECCOMP_TYPES.includes(profile.type)) causes.notSupported(`${field}.type`, profile.type, SECCOMP_TYPES);
  if (profile.type === 'Localhost' && !profile.localhostProfile)
    causes.required(`${field}.localhostProfile`, 'must be set when seccomp type is Localhost');
  if (profile.type !== 'Localhost' && profile.localhostProfile != null)
    causes.invalid(`${field}.localhostProfile`, profile.localhostProfile, 'can only be set when seccomp type is Localhost');
}

/** spec.securityContext. */
export function validatePodSecurityContext(context: any, causes: Causes): void {
  if (context == null) return;
  const at = 'spec.securityContext';
  for (const field of ['runAsUser', 'runAsGroup', 'fsGroup']) validateId(context[field], `${at}.${field}`, causes);
  for (const [i, group] of (context.supplementalGroups ?? []).entries()) validateId(group, `${at}.supplementalGroups[${i}]`, causes);
  validateBoolean(context.runAsNonRoot, `${at}.runAsNonRoot`, causes);
  if (context.fsGroupChangePolicy != null && !['OnRootMismatch', 'Always'].includes(context.fsGroupChangePolicy))
    causes.notSupported(`${at}.fsGroupChangePolicy`, context.fsGroupChangePolicy, ['OnRootMismatch', 'Always']);
  validateSeccomp(context.seccompProfile, `${at}.seccompProfile`, causes);
}

/** A container's securityContext, at `path` (e.g. `spec.initContainers[0]`). */
export function validateContainerSecurityContext(context: any, path: string, causes: Causes): void {
  if (context == null) return;
  const at = `${path}.securityContext`;
  for (const field of ['runAsUser', 'runAsGroup']) validateId(context[field], `${at}.${field}`, causes);
  for (const field of ['runAsNonRoot', 'allowPrivilegeEscalation', 'privileged', 'readOnlyRootFilesystem'])
    validateBoolean(context[field], `${at}.${field}`, causes);
  for (const list of ['add', 'drop']) {
    const names = context.capabilities?.[list];
    if (names != null && !(Array.isArray(names) && names.every((name) => typeof name === 'string' && name !== '')))
      causes.invalid(`${at}.capabilities.${list}`, names, 'must be a list of capability names');
  }
  validateSeccomp(context.seccompProfile, `${at}.seccompProfile`, causes);
  if (context.allowPrivilegeEscalation === false && context.privileged === true)
    causes.invalid(at, '', 'cannot set `allowPrivilegeEscalation` to false and `privileged` to true');
  if (context.allowPrivilegeEscalation === false && (context.capabilities?.add ?? []).includes('CAP_SYS_ADMIN'))
    causes.invalid(at, '', 'cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN');
}

/** The user a container runs as, when its pod or itself names one (the container's wins); else the image's. */
export function runAsUser(pod: any, container: any): number | undefined {
  return container.securityContext?.runAsUser ?? pod.spec?.securityContext?.runAsUser;
}

/**
 * The kubelet's refusal to start a container that must not run as root and would (CreateContainerConfigError, retried
 * as the kubelet does); undefined when it may start. An image's own user is not known here: only a named one is checked.
 */
export function nonRootViolation(pod: any, container: any): string | undefined {
  const nonRoot: boolean | undefined = container.securityContext?.runAsNonRoot ?? pod.spec?.securityContext?.runAsNonRoot;
  if (nonRoot !== true || runAsUser(pod, container) !== 0) return undefined;
  return `container's runAsUser breaks non-root policy (pod: "${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})", container: ${container.name})`;
}

const TESTS_ARE_ROOT = process.getuid?.() === 0;

/**
 * The stand-in runs every process as the tests' own user. A container that must run as root (a hostPath cache's
 * preparation) runs as it is when the tests are root; otherwise the kubelet takes it as done: what it would do, make
 * the cache the other containers' user's, is so already (theirs is the tests' user too).
 */
export function rootTakenAsDone(pod: any, container: any): boolean {
  return runAsUser(pod, container) === 0 && !TESTS_ARE_ROOT;
}
