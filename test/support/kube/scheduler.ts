/**
 * The stand-in's default-scheduler: binds each pending pod to a Ready node that passes the real scheduler's filters
 * in their order (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit), or marks it
 * PodScheduled=False/Unschedulable with the scheduler's message and a FailedScheduling event.
 *
 * New pods are tried once; unschedulable ones are tried again on the cluster events that can make room (a pod ends
 * or is removed, a node is added or changes), as the scheduler's unschedulable queue does. What the nodes' pods
 * already request comes from the scheduler's cache (scheduler-cache.ts), which follows the pod changes: a pass costs
 * its pending pods times the nodes, not every pod in the cluster.
 */
import type { EventRecorder } from './events.js';
import { parseQuantity, timestamp, type KubeObject } from './objects.js';
import { matchesNode, tolerates, type Taint } from './pod-spec.js';
import { SchedulerCache, type NodeEntry, type NodeTable } from './scheduler-cache.js';
import type { ObjectStore } from './store.js';

const NOT_HELPFUL = 'Preemption is not helpful for scheduling';
const NO_VICTIMS = 'No preemption victims found for incoming pod';
const GPU = 'nvidia.com/gpu';

export class Scheduler {
  private readonly active = new Set<string>();
  private readonly unschedulable = new Set<string>();
  private scheduled = false;
  private closed = false;
  private readonly cache: SchedulerCache;
  private nodes: KubeObject[] | undefined;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: ObjectStore,
    private readonly events: EventRecorder,
    private readonly bound: (pod: KubeObject) => void,
  ) {
    this.cache = new SchedulerCache(store);
    this.unsubscribe = store.subscribe('nodes', () => (this.nodes = undefined));
  }

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
    this.cache.close();
    this.unsubscribe();
  }

  private kick(): void {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.closed) this.pass();
    });
  }

  /** The nodes in the store's order, listed again only after a node changed. */
  private listNodes(): readonly KubeObject[] {
    return (this.nodes ??= this.store.list('nodes'));
  }

  private pass(): void {
    const nodes = this.listNodes();
    const table = this.cache.table(nodes);
    const keys = [...this.active];
    this.active.clear();
    for (const key of keys) {
      const [namespace, name] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
      const pod = this.store.get('pods', namespace, name);
      if (!pod || pod.spec.nodeName || pod.metadata.deletionTimestamp) continue;
      const requests = this.cache.requests(pod);
      // Every node is filtered; the reasons are put into words only when none takes the pod (for its message).
      const best = this.choose(
        table,
        pod,
        [...requests].filter(([, amount]) => amount > 0),
      );
      // Binding updates the pod, and with it the cache: the next pod of this pass sees the node's new usage.
      if (best) this.bind(pod, best);
      else {
        this.unschedulable.add(key);
        const failures = new Map(nodes.map((node) => [node.metadata.name as string, this.filter(pod, node, requests)]));
        this.reject(pod, nodes.length, failures);
      }
    }
  }

  /** The node with the most free GPUs among those that pass every filter (NodeResourcesFit: room for one more pod and its requests). */
  private choose(table: NodeTable, pod: KubeObject, requests: [string, number][]): KubeObject | undefined {
    const passing = table.passing(this.cache.placementKey(pod), pod, placementFilters);
    let best: NodeEntry | undefined;
    let bestFree = 0;
    nodes: for (let i = 0; i < table.entries.length; i++) {
      if (passing[i] === 0) continue;
      const entry = table.entries[i]!;
      const { allocatable, used } = entry;
      if (used.get('pods')! + 1 > (allocatable.get('pods') ?? 0)) continue;
      for (const [resource, amount] of requests) if (amount > (allocatable.get(resource) ?? 0) - (used.get(resource) ?? 0)) continue nodes;
      const free = (allocatable.get(GPU) ?? 0) - (used.get(GPU) ?? 0);
      if (!best || free > bestFree) [best, bestFree] = [entry, free];
    }
    return best?.node;
  }

  /** The reasons a node is rejected by the first filter that rejects it (none: it fits). */
  private filter(pod: KubeObject, node: KubeObject, requests: ReadonlyMap<string, number>): string[] {
    const placement = placementFilters(pod, node);
    if (placement.length > 0) return placement;
    const used = this.cache.usage(node.metadata.name);
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

/** NodeUnschedulable, TaintToleration and NodeAffinity, in that order: the first that rejects the node gives the reason. */
function placementFilters(pod: KubeObject, node: KubeObject): string[] {
  const tolerations = pod.spec.tolerations;
  if (node.spec?.unschedulable && !tolerates(tolerations, { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }))
    return ['node(s) were unschedulable'];
  const taint = ((node.spec?.taints ?? []) as Taint[]).find(
    (t) => (t.effect === 'NoSchedule' || t.effect === 'NoExecute') && !tolerates(tolerations, t),
  );
  if (taint) return [`node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`];
  if (!matchesNode(pod, node)) return ["node(s) didn't match Pod's node affinity/selector"];
  return [];
}

function allocatable(node: KubeObject, resource: string): number {
  return parseQuantity(node.status?.allocatable?.[resource]) ?? 0;
}
