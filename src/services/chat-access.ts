/**
 * What the chat path reads, and its access check: the router finds the
 * endpoint a chat request names, checks that the caller may use it, reads its
 * ready replicas, wakes it when it sleeps, and publishes its queue depths,
 * all through here.
 *
 * The router caches endpoint records across callers (a request on the hot
 * path costs no statement), so the read and the check are separate steps:
 * `readEndpoint` reads for that cache, unchecked; `usableBy` is the check,
 * applied to every request's record, cached or not. `endpointFor` does both
 * for a caller without a cache.
 */
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { Result } from '../domain/result.js';
import type { Queryable } from '../storage/database.js';
import { findEndpoints } from '../storage/endpoints-repository.js';
import { forgetQueueDepths, publishQueueDepths } from '../storage/queue-depth-repository.js';
import { readyReplicas } from '../storage/replicas-repository.js';
import type { EndpointService } from './endpoint-service.js';
import { visibleTo, type Principal } from './principal.js';

export class ChatAccess {
  constructor(
    private readonly db: Queryable,
    private readonly endpoints: EndpointService,
  ) {}

  /**
   * The live endpoint as stored, whoever asks: for a cache shared between
   * callers. Pass what it returns through `usableBy` before serving anyone.
   */
  async readEndpoint(id: string): Promise<EndpointRecord | undefined> {
    const [endpoint] = await findEndpoints(this.db, [id]);
    return endpoint;
  }

  /**
   * The chat path's access check: the endpoint when the caller may send it
   * chat requests (a member of its team); otherwise undefined, which the
   * router answers as an unknown model.
   */
  usableBy(principal: Principal, endpoint: EndpointRecord | undefined): EndpointRecord | undefined {
    return visibleTo(principal, endpoint);
  }

  /** Read and check in one: the endpoint the caller may use, or undefined. */
  async endpointFor(principal: Principal, id: string): Promise<EndpointRecord | undefined> {
    return this.usableBy(principal, await this.readEndpoint(id));
  }

  /** The ready replicas of endpoints (ids the caller got through `usableBy`). */
  readyReplicas(endpointIds: readonly string[]): Promise<ReplicaRecord[]> {
    return readyReplicas(this.db, endpointIds);
  }

  /** Wakes a sleeping endpoint for the caller: the API's wake, with its rules and its event. */
  wake(principal: Principal, endpointId: string): Promise<Result<EndpointRecord>> {
    return this.endpoints.act(principal, endpointId, 'wake');
  }

  /** Publishes this process's queued counts per endpoint (see queue-depth-repository.ts). */
  publishQueueDepths(processId: string, depths: ReadonlyMap<string, number>, staleMs: number): Promise<void> {
    return publishQueueDepths(this.db, processId, depths, staleMs);
  }

  /** Removes this process's queued counts (it stops serving). */
  forgetQueueDepths(processId: string): Promise<void> {
    return forgetQueueDepths(this.db, processId);
  }
}
