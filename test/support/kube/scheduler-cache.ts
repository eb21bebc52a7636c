/**
 * The scheduler's cache, as kube-scheduler keeps one: what each node's bound pods request (their effective requests
 * and a count of pods), kept up to date from the pod changes the store reports instead of summed over every pod on
 * every scheduling pass. A pod counts on its node from its binding until it ends (Succeeded, Failed) or is removed;
 * a terminating pod still counts, as it does for the real scheduler.
 *
 * Objects are immutable snapshots (store.ts), so what is derived from one (a pod's requests, a node's allocatable,
 * which nodes the placement filters let a pod onto) is kept per object, or per list of nodes, and never goes stale.
 */
import { parseQuantity, type KubeObject } from './objects.js';
import { isTerminal, podRequests } from './pod-spec.js';
import type { Change, ObjectStore } from './store.js';

export interface NodeEntry {
  node: KubeObject;
  name: string;
  /** status.allocatable, parsed (resource → amount) */
  allocatable: ReadonlyMap<string, number>;
  /** what the pods counted on it request (resource → amount, 'pods' → their number), kept current */
  used: ReadonlyMap<string, number>;
}

/** The nodes of one listing, with the placement filters' answers for each kind of pod placement. */
export class NodeTable {
  readonly entries: readonly NodeEntry[];
  private readonly masks = new Map<string, Uint8Array>();

  constructor(entries: NodeEntry[]) {
    this.entries = entries;
  }

  /**
   * 1 for each node the placement filters (NodeUnschedulable, TaintToleration, NodeAffinity) let the pod onto, as
   * `reject` (the reasons, none when it passes) answers: once per placement key, as they read nothing else of a pod.
   */
  passing(key: string, pod: KubeObject, reject: (pod: KubeObject, node: KubeObject) => string[]): Uint8Array {
    let mask = this.masks.get(key);
    if (!mask) {
      mask = new Uint8Array(this.entries.length);
      for (let i = 0; i < this.entries.length; i++) mask[i] = reject(pod, this.entries[i]!.node).length === 0 ? 1 : 0;
      this.masks.set(key, mask);
    }
    return mask;
  }
}

export class SchedulerCache {
  /** uid → the node it is counted on and what it requests there */
  private readonly placed = new Map<string, { node: string; requests: ReadonlyMap<string, number> }>();
  /** node name → resource → amount requested by the pods counted on it ('pods': their number) */
  private readonly used = new Map<string, Map<string, number>>();
  private readonly requestsOf = new WeakMap<object, ReadonlyMap<string, number>>();
  private readonly placementOf = new WeakMap<object, string>();
  private readonly tables = new WeakMap<readonly KubeObject[], NodeTable>();
  private readonly unsubscribe: () => void;

  constructor(store: ObjectStore) {
    for (const pod of store.all('pods')) this.observe(pod, false);
    this.unsubscribe = store.subscribe('pods', (change: Change) => this.observe(change.object, change.type === 'DELETED'));
  }

  /** The pod's effective requests (init containers included), parsed once per spec. */
  requests(pod: KubeObject): ReadonlyMap<string, number> {
    let requests = this.requestsOf.get(pod.spec);
    if (!requests) this.requestsOf.set(pod.spec, (requests = podRequests(pod)));
    return requests;
  }

  /** What the node's pods request (resource → amount, 'pods' → their number), kept current. */
  usage(node: string): ReadonlyMap<string, number> {
    return this.usageOf(node);
  }

  /** What the placement filters read of the pod (tolerations, node selector, node affinity), as one key. */
  placementKey(pod: KubeObject): string {
    let key = this.placementOf.get(pod.spec);
    if (key === undefined) {
      key = JSON.stringify([pod.spec.tolerations ?? null, pod.spec.nodeSelector ?? null, pod.spec.affinity?.nodeAffinity ?? null]);
      this.placementOf.set(pod.spec, key);
    }
    return key;
  }

  /** The table of a listing of the nodes (one per listing: a node's change makes a new listing). */
  table(nodes: readonly KubeObject[]): NodeTable {
    let table = this.tables.get(nodes);
    if (!table) {
      table = new NodeTable(
        nodes.map((node) => ({
          node,
          name: node.metadata.name as string,
          allocatable: new Map(
            Object.entries(node.status?.allocatable ?? {}).map(([resource, value]) => [resource, parseQuantity(value) ?? 0]),
          ),
          used: this.usageOf(node.metadata.name),
        })),
      );
      this.tables.set(nodes, table);
    }
    return table;
  }

  close(): void {
    this.unsubscribe();
  }

  private usageOf(node: string): Map<string, number> {
    let usage = this.used.get(node);
    if (!usage) this.used.set(node, (usage = new Map([['pods', 0]])));
    return usage;
  }

  private observe(pod: KubeObject, removed: boolean): void {
    const uid: string = pod.metadata.uid;
    const counts = !removed && Boolean(pod.spec?.nodeName) && !isTerminal(pod);
    const current = this.placed.get(uid);
    if (counts && !current) {
      const entry = { node: pod.spec.nodeName as string, requests: this.requests(pod) };
      this.placed.set(uid, entry);
      this.add(entry.node, entry.requests, 1);
    } else if (!counts && current) {
      this.placed.delete(uid);
      this.add(current.node, current.requests, -1);
    }
  }

  private add(node: string, requests: ReadonlyMap<string, number>, sign: 1 | -1): void {
    const usage = this.usageOf(node);
    for (const [resource, amount] of requests) usage.set(resource, (usage.get(resource) ?? 0) + sign * amount);
    usage.set('pods', usage.get('pods')! + sign);
    // No pod left: no rounding left over either (0.1 + 0.2 - 0.1 - 0.2 is not 0).
    if (usage.get('pods') === 0) for (const resource of usage.keys()) usage.set(resource, 0);
  }
}
