/**
 * Which endpoint a request's `model` names: one of the caller's, by id or by
 * a name only one of theirs has. Cached records serve the hot path (see
 * serving-view.ts); the access check (ChatAccess.usableBy) applies to each.
 */
import type { EndpointRecord } from '../domain/endpoint.js';
import { failureOfDomainError, type Failure } from '../domain/errors.js';
import { fail, type Result } from '../domain/result.js';
import type { ChatAccess } from '../services/chat-access.js';
import { currentPrincipal, type Principal } from '../services/principal.js';
import { ambiguousModel, modelNotFound, modelRequired } from './route-errors.js';
import type { ServingView } from './serving-view.js';

export class EndpointLookup {
  constructor(
    private readonly access: ChatAccess,
    private readonly view: ServingView,
  ) {}

  /** The caller's endpoint `model` names (by id, or by a name only one of theirs has), or why there is none. */
  async named(principal: Principal, model: unknown): Promise<Result<EndpointRecord, Failure>> {
    if (typeof model !== 'string' || model === '') return fail(modelRequired());
    const named = await this.modelNamed(principal, model);
    if (named && typeof named !== 'string') return fail(named);
    const found = await this.usable(principal, named ?? model, false);
    return found ? { type: 'ok', value: found } : fail(modelNotFound(model));
  }

  /**
   * The caller as of now, when it may still use the endpoint; otherwise why not (a key revoked: unauthenticated; a
   * membership removed: not found, as for any endpoint outside the caller's teams). Asked by work that waited.
   */
  async stillUsable(principal: Principal, endpoint: EndpointRecord): Promise<Result<Principal, Failure>> {
    const now = await currentPrincipal(principal);
    if (now.type === 'error') return fail(failureOfDomainError(now.error));
    return this.access.usableBy(now.value, endpoint) ? now : fail(modelNotFound(endpoint.id));
  }

  /** The endpoint, if the caller may use it (read afresh with `fresh`). */
  async usable(principal: Principal, id: string, fresh: boolean): Promise<EndpointRecord | undefined> {
    return this.access.usableBy(principal, await this.view.endpoint(id, fresh));
  }

  /**
   * A `model` that is not an endpoint id may name one of the caller's
   * endpoints: its id when the name is unique, an error listing the ids when
   * it is not, undefined otherwise (the id path answers model_not_found).
   */
  private async modelNamed(principal: Principal, model: string): Promise<string | Failure | undefined> {
    if (/^ep_[0-9a-z]+$/.test(model)) return undefined;
    const ids = await this.access.endpointIdsNamed(principal, model);
    if (ids.length <= 1) return ids[0];
    return ambiguousModel(model, ids);
  }
}
