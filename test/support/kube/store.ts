/**
 * The stand-in's etcd: every object of every resource, one global resourceVersion counter (like etcd's revision,
 * shared by all kinds and written as a string), and a bounded history of changes that watches replay from.
 *
 * Stored objects are snapshots: a write stores a new object and never mutates the old one, so a watch event or a
 * list answer taken earlier keeps what it saw. `update` hands a deep copy to its mutator. Each stored object is
 * serialized once (`serialized`, the JSON etcd would keep): the copy for its next update is parsed from that text,
 * and watches send it as it is.
 */
import { objectKey, type KubeObject } from './objects.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change {
  rv: number;
  resource: string;
  type: ChangeType;
  /** the object after the change (for DELETED: the last state, carrying the deletion's resourceVersion) */
  object: KubeObject;
  /** the object before the change (undefined for ADDED) */
  previous?: KubeObject;
}

export type ChangeListener = (change: Change) => void;

export class ObjectStore {
  private rv: number;
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private history: Change[] = [];
  /** every change with rv > oldest is still in `history` */
  private oldest: number;
  private readonly listeners = new Map<string, Set<ChangeListener>>();
  private readonly texts = new WeakMap<KubeObject, string>();

  constructor(
    private readonly historyLimit: number,
    firstResourceVersion = 1000,
  ) {
    this.rv = firstResourceVersion;
    this.oldest = firstResourceVersion;
  }

  get resourceVersion(): number {
    return this.rv;
  }

  /** The oldest resourceVersion a watch may still start from. */
  get oldestResourceVersion(): number {
    return this.oldest;
  }

  private table(resource: string): Map<string, KubeObject> {
    let table = this.objects.get(resource);
    if (!table) this.objects.set(resource, (table = new Map()));
    return table;
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.table(resource).get(objectKey(namespace, name));
  }

  /** Objects of a resource (in one namespace, or all), sorted by namespace then name as etcd's key order gives. */
  list(resource: string, namespace?: string): KubeObject[] {
    const items = [...this.table(resource).values()].filter((o) => namespace === undefined || o.metadata.namespace === namespace);
    return items.sort((a, b) =>
      objectKey(a.metadata.namespace, a.metadata.name) < objectKey(b.metadata.namespace, b.metadata.name) ? -1 : 1,
    );
  }

  /** Every object of a resource, unsorted (for controllers that scan). */
  all(resource: string): IterableIterator<KubeObject> {
    return this.table(resource).values();
  }

  /** A stored object as JSON, serialized once. */
  serialized(object: KubeObject): string {
    let text = this.texts.get(object);
    if (text === undefined) this.texts.set(object, (text = JSON.stringify(object)));
    return text;
  }

  create(resource: string, object: KubeObject): KubeObject {
    const stored = JSON.parse(JSON.stringify(object)) as KubeObject;
    stored.metadata.resourceVersion = String(++this.rv);
    this.table(resource).set(objectKey(stored.metadata.namespace, stored.metadata.name), stored);
    this.record({ rv: this.rv, resource, type: 'ADDED', object: stored });
    return stored;
  }

  /** Applies `mutate` to a copy of the object and stores it; undefined when the object is gone. */
  update(resource: string, namespace: string | undefined, name: string, mutate: (draft: KubeObject) => void): KubeObject | undefined {
    const key = objectKey(namespace, name);
    const previous = this.table(resource).get(key);
    if (!previous) return undefined;
    const draft = JSON.parse(this.serialized(previous)) as KubeObject;
    mutate(draft);
    draft.metadata.resourceVersion = String(++this.rv);
    this.table(resource).set(key, draft);
    this.record({ rv: this.rv, resource, type: 'MODIFIED', object: draft, previous });
    return draft;
  }

  remove(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const key = objectKey(namespace, name);
    const previous = this.table(resource).get(key);
    if (!previous) return undefined;
    this.table(resource).delete(key);
    const last = { ...previous, metadata: { ...previous.metadata, resourceVersion: String(++this.rv) } };
    this.record({ rv: this.rv, resource, type: 'DELETED', object: last, previous });
    return last;
  }

  private record(change: Change): void {
    this.history.push(change);
    if (this.history.length > this.historyLimit * 2) {
      const dropped = this.history.length - this.historyLimit;
      this.oldest = this.history[dropped - 1]!.rv;
      this.history = this.history.slice(dropped);
    }
    for (const listener of this.listeners.get(change.resource) ?? []) listener(change);
  }

  /** Changes of a resource after `rv`, or 'expired' when some of them are no longer kept. */
  changesSince(resource: string, rv: number): Change[] | 'expired' {
    if (rv < this.oldest) return 'expired';
    let start = this.history.length;
    while (start > 0 && this.history[start - 1]!.rv > rv) start--;
    return this.history.slice(start).filter((c) => c.resource === resource);
  }

  /** Forgets the history: a watch from any resourceVersion before now is too old. */
  expireHistory(): void {
    this.history = [];
    this.oldest = this.rv;
  }

  subscribe(resource: string, listener: ChangeListener): () => void {
    let set = this.listeners.get(resource);
    if (!set) this.listeners.set(resource, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }
}
