/**
 * The OpenAI-compatible route's errors: one table from the error model
 * (src/domain/errors.ts) to the OpenAI shape (src/domain/openai-errors.ts),
 * `{ error: { message, type, param, code } }`, with the statuses OpenAI
 * clients turn into their usual exceptions, and Retry-After for 429 and 503.
 */
import type { ServerResponse } from 'node:http';
import { httpStatusOf, type Failure, type FailureKind } from '../../domain/errors.js';
import { errorBody, openAIError, type OpenAIError } from '../../domain/openai-errors.js';
import { sendJson } from '../body.js';
import { failureOf } from '../failures.js';

type Row<K extends FailureKind> = {
  type: OpenAIError['type'];
  code: (failure: Extract<Failure, { kind: K }>) => string;
};

const OPENAI: { [K in FailureKind]: Row<K> } = {
  invalid: { type: 'invalid_request_error', code: (f) => (f.reason === 'too_large' ? 'request_too_large' : f.reason) },
  unauthenticated: { type: 'authentication_error', code: () => 'invalid_api_key' },
  forbidden: { type: 'permission_error', code: () => 'forbidden' },
  'not-found': { type: 'not_found_error', code: () => 'not_found' },
  conflict: { type: 'invalid_request_error', code: () => 'conflict' },
  'invalid-transition': { type: 'invalid_request_error', code: () => 'invalid_transition' },
  overloaded: { type: 'rate_limit_error', code: (f) => f.code ?? 'rate_limit_exceeded' },
  unavailable: { type: 'server_error', code: (f) => f.code ?? 'unavailable' },
  upstream: { type: 'server_error', code: (f) => f.code },
  internal: { type: 'server_error', code: () => 'internal_error' },
};

/** The OpenAI error of a failure. */
export function openAIErrorOfFailure(failure: Failure): OpenAIError {
  const row = OPENAI[failure.kind] as Row<FailureKind>;
  const param = failure.kind === 'invalid' ? (failure.fields[0]?.field ?? null) : null;
  const retryAfter = failure.kind === 'overloaded' || failure.kind === 'unavailable' ? failure.retryAfter : undefined;
  return openAIError(httpStatusOf(failure), row.type, failure.message, row.code(failure), param, retryAfter);
}

/** The OpenAI error of a thrown error. */
export function openAIErrorOf(error: unknown): OpenAIError {
  return openAIErrorOfFailure(failureOf(error));
}

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
export function sendOpenAIError(res: ServerResponse, error: OpenAIError, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  sendJson(res, error.status, errorBody(error), { ...(error.retryAfter !== undefined ? retryHeaders(error.retryAfter) : {}), ...headers });
}
