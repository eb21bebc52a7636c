/**
 * The OpenAI-compatible routes' errors: the one table from the error model
 * (src/domain/errors.ts) to the OpenAI shape (src/domain/openai-errors.ts),
 * `{ error: { message, type, param, code } }`, with the statuses OpenAI
 * clients turn into their usual exceptions, and Retry-After for 429 and 503.
 * `param` is the field a failure names (an `invalid` one's field path); `code`
 * is the failure's own (`codeOf`), or its kind's. GraphQL's chat errors,
 * defined as this route's, read them here too (src/http/graphql/errors.ts).
 */
import type { ServerResponse } from 'node:http';
import { codeOf, httpStatusOf, type Failure, type FailureKind } from '../../domain/errors.js';
import { errorBody, type OpenAIError } from '../../domain/openai-errors.js';
import { UPSTREAM_CUT } from '../../router/relay.js';
import { sendJson } from '../body.js';
import { failureOf } from '../failures.js';

type Row<K extends FailureKind> = {
  type: OpenAIError['type'];
  /** The code of a failure that carries none of its own. */
  code: (failure: Extract<Failure, { kind: K }>) => string;
};

const OPENAI: { [K in FailureKind]: Row<K> } = {
  invalid: { type: 'invalid_request_error', code: (f) => (f.reason === 'too_large' ? 'request_too_large' : f.reason) },
  unauthenticated: { type: 'authentication_error', code: () => 'invalid_api_key' },
  forbidden: { type: 'permission_error', code: () => 'forbidden' },
  'not-found': { type: 'not_found_error', code: () => 'not_found' },
  conflict: { type: 'invalid_request_error', code: () => 'conflict' },
  'invalid-transition': { type: 'invalid_request_error', code: () => 'invalid_transition' },
  overloaded: { type: 'rate_limit_error', code: () => 'rate_limit_exceeded' },
  unavailable: { type: 'server_error', code: () => 'unavailable' },
  upstream: { type: 'server_error', code: (f) => f.code },
  cancelled: { type: 'invalid_request_error', code: () => 'client_closed' },
  internal: { type: 'server_error', code: () => 'internal_error' },
};

/** The field a failure names: an invalid request's (its first field), or the one that named what was not found or conflicts. */
function paramOf(failure: Failure): string | null {
  if (failure.kind === 'invalid') return failure.fields[0]?.field ?? null;
  return (failure.kind === 'not-found' || failure.kind === 'conflict' ? failure.field : undefined) ?? null;
}

/** The OpenAI error of a failure. */
export function openAIErrorOfFailure(failure: Failure): OpenAIError {
  const row = OPENAI[failure.kind] as Row<FailureKind>;
  const error: OpenAIError = {
    status: httpStatusOf(failure),
    type: row.type,
    message: failure.message,
    param: paramOf(failure),
    code: codeOf(failure) ?? row.code(failure),
  };
  if (failure.kind === 'overloaded' || failure.kind === 'unavailable') error.retryAfter = failure.retryAfter;
  return error;
}

/** The OpenAI error of a thrown error. */
export function openAIErrorOf(error: unknown): OpenAIError {
  return openAIErrorOfFailure(failureOf(error));
}

/**
 * What a streamed answer cut short ends with (`UpstreamCutError`): an error
 * event in OpenAI's streaming error shape, then `[DONE]`, so that a client
 * can tell it from a finished answer (OpenAI's own clients raise it as an
 * APIError).
 */
export const CUT_EVENTS = `data: ${JSON.stringify(errorBody(openAIErrorOfFailure({ kind: 'upstream', ...UPSTREAM_CUT })))}\n\ndata: [DONE]\n\n`;

/**
 * When to retry: `Retry-After` in whole seconds, and `retry-after-ms` (which
 * OpenAI's SDKs prefer) a random point between half and all of it, so that
 * the clients of one refused burst do not all come back at the same instant.
 */
export function retryHeaders(retryAfterS: number): Record<string, string> {
  const ms = Math.round(retryAfterS * 1000 * (0.5 + Math.random() * 0.5));
  return { 'retry-after': String(retryAfterS), 'retry-after-ms': String(ms) };
}

/** Answers with an OpenAI error, unless the answer has begun (or the client is gone). */
function sendOpenAIError(res: ServerResponse, error: OpenAIError, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  sendJson(res, error.status, errorBody(error), { ...(error.retryAfter !== undefined ? retryHeaders(error.retryAfter) : {}), ...headers });
}

/** Answers a failure in the OpenAI shape. */
export function sendFailure(res: ServerResponse, failure: Failure): void {
  sendOpenAIError(res, openAIErrorOfFailure(failure));
}

/** A route that does not take the request's method: 405, with the methods it takes (no failure of the model: the router's own answer). */
export function sendMethodNotAllowed(res: ServerResponse, path: string, method: 'POST' | 'GET'): void {
  const message = `${path} accepts ${method} only`;
  const error: OpenAIError = { status: 405, type: 'invalid_request_error', message, param: null, code: 'method_not_allowed' };
  sendOpenAIError(res, error, { allow: method === 'GET' ? 'GET, HEAD' : 'POST' });
}
