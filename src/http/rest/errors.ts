/**
 * The REST surface's errors: one table from the error model (src/domain/errors.ts)
 * to the documented body `{ error: { code, message, details? } }`, its status
 * and headers. A bug's answer names no detail; the `x-request-id` header ties
 * it to its log line.
 *
 * The codes are the contract's closed list (and METHOD_NOT_ALLOWED, which the
 * router answers), so that a client written against the contract knows every
 * one: a failure the list has no code of is answered with the listed code
 * that tells a client what to do about it.
 */
import type { ServerResponse } from 'node:http';
import { httpStatusOf, type Failure, type FailureKind } from '../../domain/errors.js';
import { sendJson } from '../body.js';
import { failureOf } from '../failures.js';

export type ErrorCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  /** 405 with `Allow`: a known path, a method it does not take (the router answers it; no failure kind). */
  | 'METHOD_NOT_ALLOWED'
  | 'INVALID_ARGUMENT'
  | 'INVALID_TRANSITION'
  | 'CONFLICT'
  /** 429 or 503, with Retry-After: too many requests, or a dependency (the database, an upstream) that failed; retry after it. */
  | 'RESOURCE_EXHAUSTED'
  | 'INTERNAL';

export interface RestError {
  status: number;
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
  headers?: Record<string, string>;
}

type Row<K extends FailureKind> = {
  code: ErrorCode;
  /** The status, where the contract's pairing of code and status differs from the kind's (httpStatusOf). */
  status?: (failure: Extract<Failure, { kind: K }>) => number;
  details?: (failure: Extract<Failure, { kind: K }>) => Record<string, unknown> | undefined;
  headers?: (failure: Extract<Failure, { kind: K }>) => Record<string, string>;
};

const retryAfter = (failure: { retryAfter: number }) => ({ 'retry-after': String(failure.retryAfter) });

/**
 * Seconds a client is asked to wait after an upstream failed (a replica, the
 * hub or the registry): such a failure is most often brief (a replica being
 * replaced, a 5xx of the hub), as for a chat request no replica answered.
 */
export const UPSTREAM_RETRY_AFTER_S = 2;

const REST: { [K in FailureKind]: Row<K> } = {
  invalid: {
    code: 'INVALID_ARGUMENT',
    details: (f) => (f.rule !== undefined ? { rule: f.rule } : f.reason === 'too_large' ? undefined : { fields: f.fields }),
  },
  unauthenticated: { code: 'UNAUTHENTICATED', headers: () => ({ 'www-authenticate': 'Bearer' }) },
  forbidden: { code: 'FORBIDDEN' },
  'not-found': { code: 'NOT_FOUND' },
  conflict: { code: 'CONFLICT' },
  'invalid-transition': { code: 'INVALID_TRANSITION', details: (f) => ({ status: f.status, action: f.action }) },
  overloaded: { code: 'RESOURCE_EXHAUSTED', headers: retryAfter },
  // The database unreachable: 503 with Retry-After, which the contract calls RESOURCE_EXHAUSTED; nothing was written.
  unavailable: { code: 'RESOURCE_EXHAUSTED', headers: retryAfter },
  // An upstream that failed or cut its answer is not our bug (INTERNAL, not retried by most clients) but a
  // dependency out of service for a moment: 503 with Retry-After, so that a client retries after it. (A replica's
  // own 4xx refusal of a request is the chat route's, answered in the OpenAI shape, never here.)
  upstream: { code: 'RESOURCE_EXHAUSTED', status: () => 503, headers: () => ({ 'retry-after': String(UPSTREAM_RETRY_AFTER_S) }) },
  // The client left before the answer: nothing is sent. The row exists for the status recorded (499, httpStatusOf)
  // and for a proxy that held the connection: no listed code fits a request nobody waits for, and INTERNAL says
  // nothing more than that it did not complete.
  cancelled: { code: 'INTERNAL' },
  internal: { code: 'INTERNAL' },
};

/** The REST error of a failure. */
export function restErrorOfFailure(failure: Failure): RestError {
  const row = REST[failure.kind] as Row<FailureKind>;
  const details = row.details?.(failure as never);
  const headers = row.headers?.(failure as never);
  return {
    status: row.status?.(failure as never) ?? httpStatusOf(failure),
    code: row.code,
    message: failure.message,
    ...(details ? { details } : {}),
    ...(headers ? { headers } : {}),
  };
}

/** The REST error of a thrown error. */
export function restErrorOf(error: unknown): RestError {
  return restErrorOfFailure(failureOf(error));
}

export function sendRestError(res: ServerResponse, error: RestError): void {
  const body = { error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) } };
  sendJson(res, error.status, body, error.headers);
}
