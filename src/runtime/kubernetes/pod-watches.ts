/**
 * The pod watches of one runtime: one per shard it is asked to watch (src/domain/shards.ts: a gateway watches the
 * pods of the endpoints it holds, not every pod of the cluster), each kept running by `Watched`, and one of the pods
 * created before pods carried their shard (every gateway keeps it; it is empty once those pods are replaced).
 *
 * Until told which (`watch`), it watches every shard: a runtime that no controller narrows (a tool that stops every
 * engine) sees every pod. A pod is looked up where its endpoint's shard is watched; whether the answer can be trusted
 * (`synced`) is that watch's, and the unsharded one's: a shard not watched here is "unknown", never "gone".
 */
import type { Informer, ObjectCache, V1Pod } from '@kubernetes/client-node';
import { SHARD_COUNT, shardOf } from '../../domain/shards.js';
import { LABELS, shardSelector, UNSHARDED_SELECTOR } from './pod-spec.js';
import { Watched } from './watched.js';

type PodInformer = Informer<V1Pod> & ObjectCache<V1Pod>;
type Verb = 'add' | 'update' | 'delete';

export interface PodWatchesOptions {
  namespace: string;
  /** Makes an informer of the pods that `selector` selects. */
  make: (selector: string) => PodInformer;
  log: (message: string, error?: unknown) => void;
  /** A pod's change, as its watch saw it. */
  onChange: (pod: V1Pod, verb: Verb) => void;
  /** A watch's view became complete and current (its list done, its watch open): the pods it holds. */
  onSynced?: (pods: readonly V1Pod[]) => void;
  /** A shard no longer watched: its pods (running still, followed elsewhere) are no longer followed here. */
  onDrop: (pods: readonly V1Pod[]) => void;
}

export class PodWatches {
  private readonly unsharded: Watched<V1Pod>;
  private readonly shards = new Map<number, Watched<V1Pod>>();
  private stopped = false;

  constructor(private readonly options: PodWatchesOptions) {
    this.unsharded = this.watchOf(UNSHARDED_SELECTOR, 'pod (unsharded)');
    for (let shard = 0; shard < SHARD_COUNT; shard++) this.shards.set(shard, this.shardWatch(shard));
  }

  private shardWatch(shard: number): Watched<V1Pod> {
    return this.watchOf(shardSelector(shard), `pod (shard ${shard})`);
  }

  /** Every watch kept now: the unsharded one and those of the shards watched. */
  private all(): Watched<V1Pod>[] {
    return [this.unsharded, ...this.shards.values()];
  }

  private watchOf(selector: string, what: string): Watched<V1Pod> {
    return new Watched(() => this.options.make(selector), what, this.options.log, this.options.onChange, undefined, this.options.onSynced);
  }

  /** Lists and starts every watch; answers once each has listed (or failed to: it retries on its own). */
  async run(): Promise<void> {
    await Promise.all(this.all().map((watch) => watch.run()));
  }

  /** Watches exactly these shards from now on: a new one lists (its pods "unknown" until then), a dropped one stops. */
  watch(shards: ReadonlySet<number>): void {
    if (this.stopped) return;
    for (const [shard, watch] of this.shards) {
      if (shards.has(shard)) continue;
      this.shards.delete(shard);
      const pods = watch.informer.list(this.options.namespace);
      void watch.stop();
      this.options.onDrop(pods);
    }
    for (const shard of shards) {
      if (this.shards.has(shard) || shard < 0 || shard >= SHARD_COUNT) continue;
      const watch = this.shardWatch(shard);
      this.shards.set(shard, watch);
      void watch.run();
    }
  }

  /** The watches an endpoint's pods are in: its shard's (when watched) and the unsharded one; every watch without an endpoint. */
  private watchesOf(endpointId: string | undefined): Watched<V1Pod>[] {
    if (endpointId === undefined) return this.all();
    const shard = this.shards.get(shardOf(endpointId));
    return shard ? [this.unsharded, shard] : [this.unsharded];
  }

  /** Whether what is watched of the endpoint's pods is complete and current (false when its shard is not watched here). */
  synced(endpointId?: string): boolean {
    if (endpointId !== undefined && !this.shards.has(shardOf(endpointId))) return false;
    return this.watchesOf(endpointId).every((watch) => watch.synced);
  }

  /** The pod of that name, as its watch last saw it. */
  get(name: string, endpointId?: string): V1Pod | undefined {
    for (const watch of this.watchesOf(endpointId)) {
      const pod = watch.informer.get(name, this.options.namespace);
      if (pod) return pod;
    }
    return undefined;
  }

  /** The replica's pod found by its label (a pod named otherwise): a scan of its endpoint's watches. */
  findReplica(replicaId: string, endpointId?: string): V1Pod | undefined {
    for (const watch of this.watchesOf(endpointId)) {
      const pod = watch.informer.list(this.options.namespace).find((p) => p.metadata?.labels?.[LABELS.replica] === replicaId);
      if (pod) return pod;
    }
    return undefined;
  }

  /** The pods of the watches that are synced now (what an unsynced one holds may be stale: left out). */
  listSynced(): V1Pod[] {
    return this.all()
      .filter((w) => w.synced)
      .flatMap((w) => w.informer.list(this.options.namespace));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.all().map((watch) => watch.stop()));
  }
}
