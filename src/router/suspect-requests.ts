/**
 * Requests whose replica broke while it had them (its connection closed before the answer's head): the request may
 * be what broke it, a prompt that crashes the engine. A request that broke one replica is tried on the next (the
 * replica may have been killed by something else: a killed engine loses nothing); one that broke two is not sent
 * again, and the same request (same endpoint, same body) is refused for a while after, so that a client's retries
 * cannot take the endpoint's replicas one by one (the crash policy would then fail the endpoint for everyone).
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/** Replicas a request may break before it is no longer sent. */
export const SUSPECT_LIMIT = 2;
/** How long a request that broke replicas is remembered. */
export const SUSPECT_TTL_MS = 10 * 60_000;

export class SuspectRequests {
  /** The replicas each request broke (identical requests in flight on one dead replica broke one replica). */
  private readonly broken = new LRUCache<string, Set<string>>({ max: 10_000, ttl: SUSPECT_TTL_MS });
  /** Endpoints with a request remembered, until when: others' requests are not hashed. */
  private readonly endpoints = new Map<string, number>();

  /** Whether the request broke SUSPECT_LIMIT replicas of the endpoint lately (so it is not sent). */
  refused(endpointId: string, body: Record<string, unknown>): boolean {
    const until = this.endpoints.get(endpointId);
    if (until === undefined) return false;
    if (until < Date.now()) {
      this.endpoints.delete(endpointId);
      return false;
    }
    return (this.broken.get(keyOf(endpointId, body))?.size ?? 0) >= SUSPECT_LIMIT;
  }

  /** The request broke `replicaId`: how many replicas it broke lately, this one included. */
  broke(endpointId: string, body: Record<string, unknown>, replicaId: string): number {
    const key = keyOf(endpointId, body);
    const replicas = this.broken.get(key) ?? new Set<string>();
    replicas.add(replicaId);
    this.broken.set(key, replicas);
    this.endpoints.set(endpointId, Date.now() + SUSPECT_TTL_MS);
    return replicas.size;
  }
}

function keyOf(endpointId: string, body: Record<string, unknown>): string {
  return `${endpointId}:${createHash('sha256').update(JSON.stringify(body)).digest('base64url')}`;
}
