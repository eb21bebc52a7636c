/** The chat route's own refusals, in the OpenAI error shape. */
import type { EndpointRecord } from '../domain/endpoint.js';
import { unavailableMessage } from '../domain/failure-advice.js';
import { openAIError, type OpenAIError } from '../domain/openai-errors.js';

export function clientClosed(): OpenAIError {
  return openAIError(499, 'invalid_request_error', 'the client closed the request', 'client_closed');
}

/** The endpoint serves nothing until a user restarts it (FAILED, TERMINATING, TERMINATED): 409 at once. */
export function endpointUnavailable(endpoint: EndpointRecord): OpenAIError {
  return openAIError(409, 'invalid_request_error', unavailableMessage(endpoint), 'endpoint_not_running', 'model');
}

export function noReplicaAnswered(endpointId: string): OpenAIError {
  return openAIError(503, 'server_error', `no replica of endpoint '${endpointId}' answered; try again`, 'replica_unavailable', null, 2);
}

export function modelRequired(): OpenAIError {
  return openAIError(400, 'invalid_request_error', 'model is required: pass the endpoint id', 'missing_required_parameter', 'model');
}

export function refused(endpointId: string, refusal: { message: string; code: string; retryAfterS: number }): OpenAIError {
  const { message, code, retryAfterS } = refusal;
  return openAIError(429, 'rate_limit_error', `endpoint '${endpointId}': ${message}; retry in ${retryAfterS} s`, code, null, retryAfterS);
}

export function waitedTooLong(endpointId: string, timeoutMs: number, retryAfterS: number): OpenAIError {
  return openAIError(
    429,
    'rate_limit_error',
    `endpoint '${endpointId}' is at capacity: the request waited ${Math.round(timeoutMs / 1000)} s for a free slot`,
    'queue_full',
    null,
    retryAfterS,
  );
}

export function modelNotFound(model: string): OpenAIError {
  return openAIError(
    404,
    'not_found_error',
    `The model '${model}' does not exist or you do not have access to it. model is one of your endpoints' ids or names: GET /dedicated/v1/models lists them.`,
    'model_not_found',
    'model',
  );
}

/** A chat `model` naming several of the caller's endpoints: 400, listing their ids. */
export function ambiguousModel(name: string, ids: readonly string[]): OpenAIError {
  return openAIError(
    400,
    'invalid_request_error',
    `The model name '${name}' matches ${ids.length} of your endpoints (${ids.join(', ')}); pass one of these ids as model.`,
    'model_ambiguous',
    'model',
  );
}
