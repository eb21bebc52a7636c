/**
 * What kube-apiserver does to a Pod before storing it (defaulting: restart policy, grace period, termination
 * message settings, image pull policy, requests from limits, the DefaultTolerationSeconds tolerations, QoS class),
 * and the per-pod figures the scheduler and kubelet share: effective resource requests, tolerations, node affinity.
 */
import { parseQuantity, type KubeObject } from './objects.js';
import { matchesRequirement } from './selectors.js';

function defaultContainer(container: any): void {
  container.terminationMessagePath ??= '/dev/termination-log';
  container.terminationMessagePolicy ??= 'File';
  if (!container.imagePullPolicy) {
    const image: string = container.image ?? '';
    const tag = image.includes('@') ? 'digest' : /:[^/]+$/.exec(image)?.[0];
    container.imagePullPolicy = tag === undefined || tag === ':latest' ? 'Always' : 'IfNotPresent';
  }
  container.resources ??= {};
  const { limits, requests } = container.resources;
  if (limits) container.resources.requests = { ...limits, ...requests };
  for (const port of container.ports ?? []) port.protocol ??= 'TCP';
  for (const probe of [container.readinessProbe, container.livenessProbe, container.startupProbe]) {
    if (!probe) continue;
    probe.timeoutSeconds ??= 1;
    probe.periodSeconds ??= 10;
    probe.successThreshold ??= 1;
    probe.failureThreshold ??= 3;
    if (probe.httpGet) {
      probe.httpGet.path ??= '/';
      probe.httpGet.scheme ??= 'HTTP';
    }
  }
}

const DEFAULT_TOLERATIONS = ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable'];

/** Applies the API server's defaults to a Pod being created, and resets its status as the server does. */
export function defaultPod(pod: KubeObject): void {
  const spec = (pod.spec ??= {});
  spec.restartPolicy ??= 'Always';
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.schedulerName ??= 'default-scheduler';
  spec.securityContext ??= {};
  spec.serviceAccountName ??= spec.serviceAccount ?? 'default';
  spec.serviceAccount ??= spec.serviceAccountName;
  spec.enableServiceLinks ??= true;
  spec.priority ??= 0;
  spec.preemptionPolicy ??= 'PreemptLowerPriority';
  for (const container of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) if (container) defaultContainer(container);
  for (const volume of spec.volumes ?? []) if (volume?.hostPath) volume.hostPath.type ??= '';
  spec.tolerations ??= [];
  for (const key of DEFAULT_TOLERATIONS) {
    if (!spec.tolerations.some((t: any) => t?.key === key && (t.effect ?? '') === 'NoExecute'))
      spec.tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
  }
  pod.status = { phase: 'Pending', qosClass: qosClass(pod) };
}

function qosClass(pod: KubeObject): string {
  const containers: any[] = [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? [])];
  const compute = ['cpu', 'memory'];
  const any = containers.some((c) => compute.some((r) => c?.resources?.requests?.[r] != null || c?.resources?.limits?.[r] != null));
  if (!any) return 'BestEffort';
  const guaranteed = containers.every((c) =>
    compute.every(
      (r) =>
        c?.resources?.limits?.[r] != null &&
        parseQuantity(c.resources.limits[r]) === parseQuantity(c.resources.requests?.[r] ?? c.resources.limits[r]),
    ),
  );
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

/** The pod's effective requests: the larger of the containers' sum and each init container's own. */
export function podRequests(pod: KubeObject): Map<string, number> {
  const total = new Map<string, number>();
  for (const container of pod.spec.containers ?? []) {
    for (const [name, value] of Object.entries(container.resources?.requests ?? {}))
      total.set(name, (total.get(name) ?? 0) + (parseQuantity(value) ?? 0));
  }
  for (const container of pod.spec.initContainers ?? []) {
    for (const [name, value] of Object.entries(container.resources?.requests ?? {}))
      total.set(name, Math.max(total.get(name) ?? 0, parseQuantity(value) ?? 0));
  }
  return total;
}

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

export function tolerates(tolerations: any[] | undefined, taint: Taint): boolean {
  return (tolerations ?? []).some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if ((t.operator ?? 'Equal') === 'Exists') return !t.key || t.key === taint.key;
    return t.key === taint.key && (t.value ?? '') === (taint.value ?? '');
  });
}

/** spec.nodeSelector and the required node affinity terms (any term may match; all expressions of a term must). */
export function matchesNode(pod: KubeObject, node: KubeObject): boolean {
  const labels: Record<string, string> = node.metadata.labels ?? {};
  for (const [key, value] of Object.entries(pod.spec.nodeSelector ?? {})) if (labels[key] !== value) return false;
  const terms: any[] | undefined = pod.spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!terms || terms.length === 0) return true;
  const ops: Record<string, string> = { In: 'in', NotIn: 'notin', Exists: 'exists', DoesNotExist: 'notexists', Gt: 'gt', Lt: 'lt' };
  return terms.some((term) => {
    const labelTerms = (term.matchExpressions ?? []).every((e: any) =>
      matchesRequirement(labels, { key: e.key, op: ops[e.operator] as any, values: e.values ?? [] }),
    );
    const fieldTerms = (term.matchFields ?? []).every((e: any) =>
      matchesRequirement({ 'metadata.name': node.metadata.name }, { key: e.key, op: ops[e.operator] as any, values: e.values ?? [] }),
    );
    return labelTerms && fieldTerms && (term.matchExpressions?.length || term.matchFields?.length);
  });
}

export const isTerminal = (pod: KubeObject): boolean => pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
