/**
 * The Pod Security Standards' `restricted` level (which includes `baseline`), as Pod Security admission applies it
 * to a pod (https://kubernetes.io/docs/concepts/security/pod-security-standards/, 1.25 and later): what a namespace
 * labelled `pod-security.kubernetes.io/enforce: restricted` would refuse in the pod, one line per violation. AppArmor,
 * SELinux options and sysctls are not checked (the runtime sets none).
 */
const BASELINE_CAPABILITIES = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const RESTRICTED_VOLUMES = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'];

export function restrictedViolations(pod: any): string[] {
  const spec = pod.spec ?? {};
  const podContext = spec.securityContext ?? {};
  const problems: string[] = [];
  for (const field of ['hostNetwork', 'hostPID', 'hostIPC']) if (spec[field]) problems.push(`host namespaces: ${field}=true`);
  for (const volume of spec.volumes ?? []) {
    const type = Object.keys(volume).find((key) => key !== 'name');
    if (type === 'hostPath') problems.push(`hostPath volumes: ${volume.name}`);
    else if (!RESTRICTED_VOLUMES.includes(type ?? '')) problems.push(`restricted volume types: ${volume.name} is ${type}`);
  }
  if (podContext.runAsUser === 0) problems.push('runAsUser=0: the pod');
  if (podContext.seccompProfile?.type === 'Unconfined') problems.push('seccompProfile: the pod is Unconfined');
  for (const container of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    const context = container.securityContext ?? {};
    const name = `container ${container.name}`;
    if (context.privileged) problems.push(`privileged: ${name}`);
    if ((container.ports ?? []).some((port: any) => port.hostPort)) problems.push(`hostPort: ${name}`);
    if (context.procMount && context.procMount !== 'Default') problems.push(`procMount: ${name}`);
    if (context.allowPrivilegeEscalation !== false) problems.push(`allowPrivilegeEscalation != false: ${name}`);
    if ((context.runAsNonRoot ?? podContext.runAsNonRoot) !== true) problems.push(`runAsNonRoot != true: ${name}`);
    if (context.runAsUser === 0) problems.push(`runAsUser=0: ${name}`);
    const seccomp = context.seccompProfile?.type ?? podContext.seccompProfile?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') problems.push(`seccompProfile: ${name} has ${seccomp ?? 'none'}`);
    const capabilities = context.capabilities ?? {};
    if (!(capabilities.drop ?? []).includes('ALL')) problems.push(`capabilities must drop ALL: ${name}`);
    for (const added of capabilities.add ?? []) {
      if (!BASELINE_CAPABILITIES.has(added)) problems.push(`capabilities beyond baseline: ${name} adds ${added}`);
      else if (added !== 'NET_BIND_SERVICE') problems.push(`capabilities beyond NET_BIND_SERVICE: ${name} adds ${added}`);
    }
  }
  return problems;
}
