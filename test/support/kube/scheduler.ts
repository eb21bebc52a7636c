/**
 * The stand-in's default-scheduler: binds each pending pod to a Ready node that passes the real scheduler's filters
 * in their order (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit), or marks it
 * PodScheduled=False/Unschedulable with the scheduler's message and a FailedScheduling event.
 *
 * New pods are tried once; unschedulable ones are tried again on the cluster events that can make room (a pod ends
 * or is removed, a node is added or changes), as the scheduler's unschedulable queue does.
 */
import type { EventRecorder } from './events.js';
import { timestamp, parseQuantity, type KubeObject } from './objects.js';
import { isTerminal, matchesNode, podRequests, tolerates, type Taint } from './pod-spec.js';
import type { ObjectStore } from './store.js';

const NOT_HELPFUL = 'Preemption is not helpful for scheduling';
const NO_VICTIMS = 'No preemption victims found for incoming pod';

export class Scheduler {
  private readonly active = new Set<string>();
  private readonly unschedulable = new Set<string>();
  private scheduled = false;
  private closed = false;

  constructor(
    private readonly store: ObjectStore,
    private readonly events: EventRecorder,
    private readonly bound: (pod: KubeObject) => void,
  ) {}

  /** A new pod to place. */
  add(pod: KubeObject): void {
    if (pod.spec.nodeName) return;
    this.active.add(`${pod.metadata.namespace}/${pod.metadata.name}`);
    this.kick();
  }

  /** Something that may make room happened: unschedulable pods are tried again. */
  retry(): void {
    for (const key of this.unschedulable) this.active.add(key);
    this.unschedulable.clear();
    this.kick();
  }

  forget(namespace: string, name: string): void {
    this.active.delete(`${namespace}/${name}`);
    this.unschedulable.delete(`${namespace}/${name}`);
  }

  close(): void {
    this.closed = true;
  }

  private kick(): void {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.closed) this.pass();
    });
  }

  private pass(): void {
    const nodes = this.store.list('nodes');
    const used = new Map<string, Map<string, number>>(nodes.map((n) => [n.metadata.name, new Map([['pods', 0]])]));
    for (const pod of this.store.all('pods')) {
      const usage = pod.spec.nodeName ? used.get(pod.spec.nodeName) : undefined;
      if (!usage || isTerminal(pod)) continue;
      for (const [name, amount] of podRequests(pod)) usage.set(name, (usage.get(name) ?? 0) + amount);
      usage.set('pods', usage.get('pods')! + 1);
    }
    const keys = [...this.active];
    this.active.clear();
    for (const key of keys) {
      const [namespace, name] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
      const pod = this.store.get('pods', namespace, name);
      if (!pod || pod.spec.nodeName || pod.metadata.deletionTimestamp) continue;
      const requests = podRequests(pod);
      const failures = new Map<string, string[]>();
      let best: { node: KubeObject; free: number } | undefined;
      for (const node of nodes) {
        const reasons = this.filter(pod, node, requests, used.get(node.metadata.name)!);
        if (reasons.length > 0) failures.set(node.metadata.name, reasons);
        else {
          const free = allocatable(node, 'nvidia.com/gpu') - (used.get(node.metadata.name)!.get('nvidia.com/gpu') ?? 0);
          if (!best || free > best.free) best = { node, free };
        }
      }
      if (best) {
        const usage = used.get(best.node.metadata.name)!;
        for (const [resource, amount] of requests) usage.set(resource, (usage.get(resource) ?? 0) + amount);
        usage.set('pods', usage.get('pods')! + 1);
        this.bind(pod, best.node);
      } else {
        this.unschedulable.add(key);
        this.reject(pod, nodes.length, failures);
      }
    }
  }

  /** The reasons a node is rejected by the first filter that rejects it (none: it fits). */
  private filter(pod: KubeObject, node: KubeObject, requests: Map<string, number>, used: Map<string, number>): string[] {
    const tolerations = pod.spec.tolerations;
    if (node.spec?.unschedulable && !tolerates(tolerations, { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }))
      return ['node(s) were unschedulable'];
    const taint = ((node.spec?.taints ?? []) as Taint[]).find(
      (t) => (t.effect === 'NoSchedule' || t.effect === 'NoExecute') && !tolerates(tolerations, t),
    );
    if (taint) return [`node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`];
    if (!matchesNode(pod, node)) return ["node(s) didn't match Pod's node affinity/selector"];
    const reasons: string[] = [];
    if (used.get('pods')! + 1 > allocatable(node, 'pods')) reasons.push('Too many pods');
    for (const [resource, amount] of requests) {
      if (amount > 0 && amount > allocatable(node, resource) - (used.get(resource) ?? 0)) reasons.push(`Insufficient ${resource}`);
    }
    return reasons;
  }

  private bind(pod: KubeObject, node: KubeObject): void {
    const updated = this.store.update('pods', pod.metadata.namespace, pod.metadata.name, (draft) => {
      draft.spec.nodeName = node.metadata.name;
      const conditions: any[] = (draft.status.conditions ?? []).filter((c: any) => c.type !== 'PodScheduled');
      conditions.push({ type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: timestamp() });
      draft.status.conditions = conditions;
    });
    if (!updated) return;
    this.events.record(
      updated,
      'Normal',
      'Scheduled',
      `Successfully assigned ${pod.metadata.namespace}/${pod.metadata.name} to ${node.metadata.name}`,
      'default-scheduler',
    );
    this.bound(updated);
  }

  private reject(pod: KubeObject, total: number, failures: Map<string, string[]>): void {
    let message = 'no nodes available to schedule pods';
    if (total > 0) {
      const counts = new Map<string, number>();
      const preemption = new Map<string, number>();
      for (const reasons of failures.values()) {
        for (const reason of reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1);
        const verdict = reasons.every((r) => r.startsWith('Insufficient ') || r === 'Too many pods') ? NO_VICTIMS : NOT_HELPFUL;
        preemption.set(verdict, (preemption.get(verdict) ?? 0) + 1);
      }
      const text = (map: Map<string, number>) =>
        [...map]
          .map(([reason, count]) => `${count} ${reason}`)
          .sort()
          .join(', ');
      message = `0/${total} nodes are available: ${text(counts)}. preemption: 0/${total} nodes are available: ${text(preemption)}.`;
    }
    const previous = (pod.status.conditions ?? []).find((c: any) => c.type === 'PodScheduled');
    if (previous?.message === message) {
      this.events.record(pod, 'Warning', 'FailedScheduling', message, 'default-scheduler');
      return;
    }
    const updated = this.store.update('pods', pod.metadata.namespace, pod.metadata.name, (draft) => {
      draft.status.conditions = [
        ...(draft.status.conditions ?? []).filter((c: any) => c.type !== 'PodScheduled'),
        { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message, lastProbeTime: null, lastTransitionTime: timestamp() },
      ];
    });
    if (updated) this.events.record(updated, 'Warning', 'FailedScheduling', message, 'default-scheduler');
  }
}

export function allocatable(node: KubeObject, resource: string): number {
  return parseQuantity(node.status?.allocatable?.[resource]) ?? 0;
}
