/**
 * The router's view of which endpoints serve and on which replicas: the
 * endpoint records and their ready replicas, cached so that a request on the
 * hot path costs no statement. A cached read is used as it is for
 * `cacheMs`; then, for up to ten times as long, while one background read
 * refreshes it (no request waits on it); past that, a request waits for a
 * read. Concurrent reads of one thing share one statement. Both caches are
 * bounded (least recently used entries go first). The records are read
 * unchecked, for every caller: the router applies the access check
 * (ChatAccess.usableBy) to each request.
 */
import { LRUCache } from 'lru-cache';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { ChatAccess } from '../services/chat-access.js';

/** Endpoints (and their replica lists) remembered at most. */
const MAX_CACHED_ENDPOINTS = 10_000;

interface ReplicaEntry {
  at: number;
  replicas: ReplicaRecord[];
  maxBatchSize: number;
}

export class ServingView {
  private readonly endpoints = new LRUCache<string, { at: number; endpoint: EndpointRecord }>({ max: MAX_CACHED_ENDPOINTS });
  private readonly replicas = new LRUCache<string, ReplicaEntry>({ max: MAX_CACHED_ENDPOINTS });
  /** Reads in flight, by what they read: concurrent requests share them. */
  private readonly refreshing = new Map<string, Promise<unknown>>();

  /** `onReplicas` is called with an endpoint's id whenever its replica list was read afresh. */
  constructor(
    private readonly access: ChatAccess,
    private readonly cacheMs: number,
    private readonly onReplicas: (endpointId: string) => void,
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
    const replicas = await this.access.readyReplicas(endpointIds).catch(() => undefined);
    if (!replicas) return;
    for (const id of endpointIds) {
      const entry = this.replicas.peek(id);
      if (entry) this.replicas.set(id, { ...entry, at: performance.now(), replicas: replicas.filter((r) => r.endpointId === id) });
      this.onReplicas(id);
    }
  }

  /** Forgets what is cached of an endpoint (a replica refused a connection: look again). */
  forget(endpointId: string): void {
    this.replicas.delete(endpointId);
    this.endpoints.delete(endpointId);
  }

  private loadEndpoint(id: string, shared = true): Promise<EndpointRecord | undefined> {
    const load = async () => {
      const endpoint = await this.access.readEndpoint(id);
      if (endpoint) this.endpoints.set(id, { at: performance.now(), endpoint });
      else this.endpoints.delete(id);
      return endpoint;
    };
    return shared ? this.singleFlight(`endpoint:${id}`, load) : load();
  }

  private loadReplicas(endpoint: EndpointRecord, shared = true): Promise<ReplicaRecord[]> {
    const load = async () => {
      const replicas = await this.access.readyReplicas([endpoint.id]);
      this.replicas.set(endpoint.id, { at: performance.now(), replicas, maxBatchSize: endpoint.current.spec.advanced.maxBatchSize });
      this.onReplicas(endpoint.id);
      return replicas;
    };
    return shared ? this.singleFlight(`replicas:${endpoint.id}`, load) : load();
  }

  /** `fresh` for cacheMs, then `stale` for up to ten times as long, then (or with nothing cached) `expired`. */
  private ageOf(at: number | undefined): 'fresh' | 'stale' | 'expired' {
    if (at === undefined) return 'expired';
    const age = performance.now() - at;
    return age < this.cacheMs ? 'fresh' : age < this.cacheMs * 10 ? 'stale' : 'expired';
  }

  private singleFlight<T>(key: string, load: () => Promise<T>): Promise<T> {
    let running = this.refreshing.get(key) as Promise<T> | undefined;
    if (!running) {
      running = load().finally(() => this.refreshing.delete(key));
      this.refreshing.set(key, running);
    }
    return running;
  }
}
