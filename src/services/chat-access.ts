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

/** An endpoint as GET /dedicated/v1/models lists it. */
export interface CallableModel {
  id: string;
  teamId: string;
  name: string;
  status: string;
  createdAt: Date;
}

/** The most endpoints one models list names. */
const MAX_MODELS = 1000;

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

  /** The same for several endpoints in one statement (those that exist). */
  async readEndpoints(ids: string[]): Promise<EndpointRecord[]> {
    return findEndpoints(this.db, ids);
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

  /**
   * The endpoints the caller may send chat requests to (its teams', not
   * deleted), oldest first, for GET /dedicated/v1/models.
   */
  async callableModels(principal: Principal): Promise<CallableModel[]> {
    const teams = [...principal.memberships.keys()];
    if (teams.length === 0) return [];
    const rows = await this.db<{ id: string; team_id: string; name: string; status: string; created_at: Date }[]>`
      SELECT e.id, e.team_id, v.name, e.status, e.created_at FROM endpoints e
      JOIN endpoint_versions v ON v.endpoint_id = e.id AND v.version_index = e.current_version
      WHERE e.team_id = ANY(${teams}) AND e.deleted_at IS NULL
      ORDER BY e.created_at, e.id LIMIT ${MAX_MODELS}`;
    return rows.map((r) => ({ id: r.id, teamId: r.team_id, name: r.name, status: r.status, createdAt: r.created_at }));
  }

  /**
   * The ids of the caller's endpoints (its teams', not deleted) whose current
   * name is `name`: a chat `model` may name an endpoint so when the name is
   * unique. At most `limit` ids.
   */
  async endpointIdsNamed(principal: Principal, name: string, limit = 10): Promise<string[]> {
    const teams = [...principal.memberships.keys()];
    if (teams.length === 0) return [];
    const rows = await this.db<{ id: string }[]>`
      SELECT e.id FROM endpoints e
      JOIN endpoint_versions v ON v.endpoint_id = e.id AND v.version_index = e.current_version
      WHERE e.team_id = ANY(${teams}) AND e.deleted_at IS NULL AND v.name = ${name}
      ORDER BY e.created_at, e.id LIMIT ${limit}`;
    return rows.map((r) => r.id);
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
