/**
 * The router's view of which endpoints serve and on which replicas: the
 * endpoint records and their ready replicas, cached so that a request on the
 * hot path costs no statement. A cached read is used as it is for
 * `cacheMs`; then, while one background read refreshes it (no request waits
 * on it), for up to ten times as long, or for up to a minute while every
 * endpoint event is announced to this process (`announced`); past that, a
 * request waits for a read. Each announced event of an endpoint reads it and
 * its ready replicas again at once, cached or not: the view follows every
 * change as it happens, and the first requests to an endpoint that just
 * started serving find it already read (a burst does not wait on the
 * database). Concurrent reads of one thing share one statement. Both caches
 * are bounded (least recently used entries go first). The records are read
 * unchecked, for every caller: the router applies the access check
 * (ChatAccess.usableBy) to each request.
 */
import { LRUCache } from 'lru-cache';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { ChatAccess } from '../services/chat-access.js';

/** Endpoints (and their replica lists) remembered at most. */
const MAX_CACHED_ENDPOINTS = 10_000;
/** How long a cached read may serve (refreshed in the background) while announcements keep the view current. */
const ANNOUNCED_STALE_MS = 60_000;

interface ReplicaEntry {
  at: number;
  replicas: ReplicaRecord[];
  maxBatchSize: number;
}

export class ServingView {
  private readonly endpoints = new LRUCache<string, { at: number; endpoint: EndpointRecord }>({ max: MAX_CACHED_ENDPOINTS });
  private readonly replicas = new LRUCache<string, ReplicaEntry>({ max: MAX_CACHED_ENDPOINTS });
  /** When this process last changed each endpoint: a read of it begun before is not kept (it may predate the change). */
  private readonly forgotten = new LRUCache<string, number>({ max: MAX_CACHED_ENDPOINTS });
  /** Reads in flight, by what they read: concurrent requests share them. */
  private readonly refreshing = new Map<string, Promise<unknown>>();
  /** Whether every endpoint event is announced to this process (see `announced`). */
  private following = false;
  /** Endpoints announced since the last re-read (read together, once per tick). */
  private readonly announcedIds = new Set<string>();

  /**
   * `onReplicas` is called with an endpoint's id whenever its replica list
   * was read afresh, `onEndpoint` with each endpoint record kept.
   */
  constructor(
    private readonly access: ChatAccess,
    private readonly cacheMs: number,
    private readonly onReplicas: (endpointId: string) => void,
    private readonly onEndpoint: (endpoint: EndpointRecord) => void = () => {},
  ) {}

  /** The endpoint as last read, or undefined (read afresh with `fresh`, or when not cached). */
  async endpoint(id: string, fresh: boolean): Promise<EndpointRecord | undefined> {
    const cached = this.endpoints.get(id);
    const age = fresh ? 'expired' : this.ageOf(cached?.at);
    if (age === 'stale') this.loadEndpoint(id).catch(() => {});
    return age === 'expired' ? this.loadEndpoint(id, !fresh) : cached!.endpoint;
  }

  /** The endpoint's cached record without any read (for the slot counts). */
  cachedEndpoint(id: string): EndpointRecord | undefined {
    return this.endpoints.peek(id)?.endpoint;
  }

  async readyReplicas(endpoint: EndpointRecord, fresh: boolean): Promise<ReplicaRecord[]> {
    const cached = this.replicas.get(endpoint.id);
    const age = fresh ? 'expired' : this.ageOf(cached?.at);
    if (age === 'stale') this.loadReplicas(endpoint).catch(() => {});
    return age === 'expired' ? this.loadReplicas(endpoint, !fresh) : cached!.replicas;
  }

  /** The cached ready replicas and their batch size, without any read. */
  cachedReplicas(endpointId: string): ReplicaEntry | undefined {
    return this.replicas.peek(endpointId);
  }

  /** Re-reads the ready replicas of the given endpoints in one statement (for requests waiting for a slot). */
  async refreshReplicas(endpointIds: string[]): Promise<void> {
    const at = performance.now();
    const replicas = await this.access.readyReplicas(endpointIds).catch(() => undefined);
    if (!replicas) return;
    for (const id of endpointIds) {
      const entry = this.replicas.peek(id);
      if (entry) this.storeReplicas(id, at, replicas, entry.maxBatchSize);
      else this.onReplicas(id);
    }
  }

  /**
   * An event of the endpoint was announced: it and its ready replicas are
   * read again (with the others announced in the same tick, two statements
   * in all). Undefined: the announcements were (re)connected and some may
   * have been missed; nothing cached is trusted.
   */
  announced(endpointId: string | undefined): void {
    if (endpointId === undefined) {
      this.following = true;
      this.endpoints.clear();
      this.replicas.clear();
      return;
    }
    if (this.announcedIds.size === 0) setImmediate(() => void this.reread().catch(() => {}));
    this.announcedIds.add(endpointId);
  }

  private async reread(): Promise<void> {
    const ids = [...this.announcedIds];
    this.announcedIds.clear();
    const at = performance.now();
    const endpoints = await this.access.readEndpoints(ids);
    const found = new Set(endpoints.map((e) => e.id));
    for (const id of ids) if (!found.has(id)) this.forget(id);
    for (const endpoint of endpoints) this.storeEndpoint(endpoint.id, at, endpoint);
    const replicas = endpoints.length > 0 ? await this.access.readyReplicas(endpoints.map((e) => e.id)) : [];
    for (const endpoint of endpoints) this.storeReplicas(endpoint.id, at, replicas, endpoint.current.spec.advanced.maxBatchSize);
  }

  /**
   * The endpoint was changed by this process: the next request reads it
   * afresh (the change's announcement may not have arrived yet), and it is
   * read again now, as when announced.
   */
  changedHere(endpointId: string): void {
    this.forgotten.set(endpointId, performance.now());
    // A read in flight may predate the change: later requests share a new one.
    this.refreshing.delete(`endpoint:${endpointId}`);
    this.endpoints.delete(endpointId);
    this.announced(endpointId);
  }

  /** Forgets what is cached of an endpoint (a replica refused a connection: look again). */
  forget(endpointId: string): void {
    this.replicas.delete(endpointId);
    this.endpoints.delete(endpointId);
  }

  private loadEndpoint(id: string, shared = true): Promise<EndpointRecord | undefined> {
    const load = async () => {
      const at = performance.now();
      const endpoint = await this.access.readEndpoint(id);
      this.storeEndpoint(id, at, endpoint);
      return endpoint;
    };
    // A fresh read is shared with the fresh reads already under way (those of many requests waiting for one endpoint
    // to serve, after one of its events): one statement for them all, not one each.
    return this.singleFlight(shared ? `endpoint:${id}` : `endpoint-fresh:${id}`, load);
  }

  private loadReplicas(endpoint: EndpointRecord, shared = true): Promise<ReplicaRecord[]> {
    const load = async () => {
      const at = performance.now();
      const replicas = await this.access.readyReplicas([endpoint.id]);
      this.storeReplicas(endpoint.id, at, replicas, endpoint.current.spec.advanced.maxBatchSize);
      return replicas;
    };
    return this.singleFlight(shared ? `replicas:${endpoint.id}` : `replicas-fresh:${endpoint.id}`, load);
  }

  /**
   * Keeps a read of the endpoint begun at `at` (undefined: it does not exist),
   * unless a read begun later (an announcement's) is already kept.
   */
  private storeEndpoint(id: string, at: number, endpoint: EndpointRecord | undefined): void {
    if (at < (this.endpoints.peek(id)?.at ?? this.forgotten.peek(id) ?? -Infinity)) return;
    if (endpoint) {
      this.endpoints.set(id, { at, endpoint });
      this.onEndpoint(endpoint);
    } else this.endpoints.delete(id);
  }

  /** The same for ready replicas (`read` may hold other endpoints' too), and tells `onReplicas`. */
  private storeReplicas(id: string, at: number, read: readonly ReplicaRecord[], maxBatchSize: number): void {
    if (at < (this.replicas.peek(id)?.at ?? -Infinity)) return;
    this.replicas.set(id, { at, replicas: read.filter((r) => r.endpointId === id), maxBatchSize });
    this.onReplicas(id);
  }

  /** `fresh` for cacheMs, then `stale` (see the top of the file), then (or with nothing cached) `expired`. */
  private ageOf(at: number | undefined): 'fresh' | 'stale' | 'expired' {
    if (at === undefined) return 'expired';
    const age = performance.now() - at;
    const servesFor = this.following ? Math.max(ANNOUNCED_STALE_MS, this.cacheMs * 10) : this.cacheMs * 10;
    return age < this.cacheMs ? 'fresh' : age < servesFor ? 'stale' : 'expired';
  }

  private singleFlight<T>(key: string, load: () => Promise<T>): Promise<T> {
    let running = this.refreshing.get(key) as Promise<T> | undefined;
    if (!running) {
      const started = load().finally(() => {
        if (this.refreshing.get(key) === started) this.refreshing.delete(key);
      });
      running = started;
      this.refreshing.set(key, running);
    }
    return running;
  }
}
