/** The chat route's own refusals, in the error model (src/domain/errors.ts); each surface answers them in its shape. */
import type { EndpointRecord } from '../domain/endpoint.js';
import type { Failure } from '../domain/errors.js';
import { unavailableMessage } from '../domain/failure-advice.js';
import { noReplicasMessage } from '../domain/lifecycle.js';
import { SUSPECT_LIMIT, SUSPECT_TTL_MS } from './suspect-requests.js';
import { invalidRequest } from '../domain/request-checks.js';

export { clientClosed } from '../domain/errors.js';

/** The endpoint serves nothing until a user restarts it (FAILED, TERMINATING, TERMINATED): refused at once. */
export function endpointUnavailable(endpoint: EndpointRecord): Failure {
  return { kind: 'conflict', message: unavailableMessage(endpoint), code: 'endpoint_not_running', field: 'model' };
}

/** The endpoint holds no replicas (maxReplica 0) and is not serving: refused at once. */
export function endpointHoldsNoReplicas(endpointId: string): Failure {
  return { kind: 'conflict', message: noReplicasMessage(endpointId), code: 'endpoint_not_running', field: 'model' };
}

/** The wait for a starting or sleeping endpoint ran out (waiting for a machine takes minutes: retry later then). */
export function endpointNotReady(message: string, retryAfterS: number): Failure {
  return { kind: 'unavailable', message, code: 'endpoint_not_ready', retryAfter: retryAfterS };
}

export function noReplicaAnswered(endpointId: string): Failure {
  return {
    kind: 'unavailable',
    message: `no replica of endpoint '${endpointId}' answered; try again`,
    code: 'replica_unavailable',
    retryAfter: 2,
  };
}

/** Replicas failed while each had the request (not sent to another: the request may be what makes them fail). */
export function replicaFailedWhileAnswering(endpointId: string): Failure {
  return {
    kind: 'upstream',
    message: `${SUSPECT_LIMIT} replicas of endpoint '${endpointId}' failed while answering this request; it is not sent to another, as it may be what makes them fail`,
    code: 'replica_failed',
  };
}

/** The same request made replicas fail lately: refused without being sent (a 4xx, which clients do not retry). */
export function requestBrokeReplicas(endpointId: string): Failure {
  return {
    kind: 'upstream',
    status: 422,
    message: `this request made ${SUSPECT_LIMIT} replicas of endpoint '${endpointId}' fail within ${SUSPECT_TTL_MS / 60_000} minutes; it is refused for that long (change it, or look at the endpoint's logs)`,
    code: 'request_failed_replicas',
  };
}

/** As many requests wait for the endpoint to serve as its queue would hold: refused at once. */
export function tooManyWaiting(endpointId: string, max: number): Failure {
  return {
    kind: 'overloaded',
    message: `endpoint '${endpointId}' is not serving yet and ${max} requests already wait for it; retry in 5 s`,
    code: 'queue_full',
    retryAfter: 5,
  };
}

export function modelRequired(): Failure {
  return invalidRequest('model is required: pass the endpoint id', 'model', 'missing_required_parameter');
}

export function refused(endpointId: string, refusal: { message: string; code: string; retryAfterS: number }): Failure {
  const { message, code, retryAfterS } = refusal;
  return { kind: 'overloaded', message: `endpoint '${endpointId}': ${message}; retry in ${retryAfterS} s`, code, retryAfter: retryAfterS };
}

export function waitedTooLong(endpointId: string, timeoutMs: number, retryAfterS: number): Failure {
  return {
    kind: 'overloaded',
    message: `endpoint '${endpointId}' is at capacity: the request waited ${Math.round(timeoutMs / 1000)} s for a free slot`,
    code: 'queue_full',
    retryAfter: retryAfterS,
  };
}

export function modelNotFound(model: string): Failure {
  return {
    kind: 'not-found',
    message: `The model '${model}' does not exist or you do not have access to it. model is one of your endpoints' ids or names: GET /dedicated/v1/models lists them.`,
    code: 'model_not_found',
    field: 'model',
  };
}

/** A chat `model` naming several of the caller's endpoints: refused, listing their ids. */
export function ambiguousModel(name: string, ids: readonly string[]): Failure {
  return invalidRequest(
    `The model name '${name}' matches ${ids.length} of your endpoints (${ids.join(', ')}); pass one of these ids as model.`,
    'model',
    'model_ambiguous',
  );
}
