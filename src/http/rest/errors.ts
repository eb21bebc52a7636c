/**
 * The REST surface's errors: one table from the error model (src/domain/errors.ts)
 * to the documented body `{ error: { code, message, details? } }`, its status
 * and headers. A bug's answer names no detail; the `x-request-id` header ties
 * it to its log line.
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
  | 'RESOURCE_EXHAUSTED'
  /** 503 with Retry-After: a dependency (the database) cannot be reached; the request did nothing. Also a failed upstream (502). */
  | 'UNAVAILABLE'
  /** 499: the client left before the answer (never sent; the request log records it). */
  | 'CANCELLED'
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
  details?: (failure: Extract<Failure, { kind: K }>) => Record<string, unknown> | undefined;
  headers?: (failure: Extract<Failure, { kind: K }>) => Record<string, string>;
};

const retryAfter = (failure: { retryAfter: number }) => ({ 'retry-after': String(failure.retryAfter) });

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
  unavailable: { code: 'UNAVAILABLE', headers: retryAfter },
  upstream: { code: 'UNAVAILABLE' },
  cancelled: { code: 'CANCELLED' },
  internal: { code: 'INTERNAL' },
};

/** The REST error of a failure. */
export function restErrorOfFailure(failure: Failure): RestError {
  const row = REST[failure.kind] as Row<FailureKind>;
  const details = row.details?.(failure as never);
  const headers = row.headers?.(failure as never);
  return {
    status: httpStatusOf(failure),
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
