/**
 * The one error model: every way a request can fail, whatever the surface.
 * A service returns the expected ones as `Result` values (`DomainError`, see
 * result.ts); the inference core (src/router) and the request parsers
 * (chat-request.ts and the others) return `Failure` values; a boundary
 * throws a `FailureError`; anything else thrown is classified by
 * src/http/failures.ts (an outage, a cut upstream, or a bug). None of them
 * knows a surface's shape: each surface turns a `Failure` into its own with
 * one small table:
 *
 * - REST:    src/http/rest/errors.ts   (`{ error: { code, message, details } }`)
 * - GraphQL: src/http/graphql/errors.ts (`extensions.code`, result types, chat errors)
 * - OpenAI:  src/http/rest/chat-errors.ts (`{ error: { message, type, param, code } }`)
 *
 * `httpStatusOf` is the status every HTTP surface answers for a kind (and
 * the request log records). A failure's `code` is its stable reason where
 * the kind alone does not say it (`model_not_found`, `queue_full`): the
 * OpenAI-compatible routes answer it as their `code`.
 */
import type { EndpointStatus, LifecycleAction } from './lifecycle.js';
import type { DomainError, FieldViolation } from './result.js';

/** Why input was refused: a rule broken, a body that is not JSON, sent as another type, or too large. */
export type InvalidReason = 'invalid_value' | 'invalid_json' | 'unsupported_media_type' | 'too_large';

export type Failure =
  /** The request broke a rule: each field and the rule it breaks (`rule`: a protocol rule, for the request target). */
  | { kind: 'invalid'; message: string; fields: FieldViolation[]; reason: InvalidReason; rule?: string; code?: string }
  /** No key, an unknown key, a revoked key. */
  | { kind: 'unauthenticated'; message: string }
  /** Authenticated, but may not do this (a team header naming a team the caller is not in). */
  | { kind: 'forbidden'; message: string }
  /** Absent, or not visible to the caller (`field`: the request's field that named it). */
  | { kind: 'not-found'; message: string; code?: string; field?: string }
  /** The request conflicts with the current state (`field`: the request's field that named what conflicts). */
  | { kind: 'conflict'; message: string; code?: string; field?: string }
  /** The lifecycle action is not allowed from the endpoint's status. */
  | { kind: 'invalid-transition'; message: string; status: EndpointStatus; action: LifecycleAction }
  /** Too many requests, or a queue that is full: retry after `retryAfter` seconds. */
  | { kind: 'overloaded'; message: string; retryAfter: number; code?: string }
  /** A dependency (the database) cannot be reached; the request did nothing. Retry after `retryAfter` seconds. */
  | { kind: 'unavailable'; message: string; retryAfter: number; code?: string }
  /**
   * An upstream (a replica) failed, cut its answer short, or sent one that cannot be read;
   * `status`: the replica's own answer status, when it answered with an error (passed on as it is).
   */
  | { kind: 'upstream'; message: string; code: string; status?: number }
  /** The client went away before the answer (never seen by it: the request log records it). */
  | { kind: 'cancelled'; message: string }
  /** A bug: the client is told nothing more (the log is, with the request id). */
  | { kind: 'internal'; message: string };

export type FailureKind = Failure['kind'];

/** A failure, thrown from a boundary (a body that is not JSON, a path parameter that does not decode). */
export class FailureError extends Error {
  constructor(
    readonly failure: Failure,
    options?: { cause?: unknown },
  ) {
    super(failure.message, options);
    this.name = 'FailureError';
  }
}

/** What the client is told of a bug. */
export const INTERNAL_MESSAGE = 'internal error';

export const internalFailure = (): Failure => ({ kind: 'internal', message: INTERNAL_MESSAGE });

export type InvalidFailure = Extract<Failure, { kind: 'invalid' }>;

/** What the request log and the OpenAI-compatible routes record of a failure that happened to a client who left. */
export const CLIENT_CLOSED_CODE = 'client_closed';

export const clientClosed = (): Failure => ({ kind: 'cancelled', message: 'the client closed the request' });

/** A failure's stable reason, where it has one beyond its kind (a cancellation's is `client_closed`). */
export function codeOf(failure: Failure): string | null {
  if (failure.kind === 'cancelled') return CLIENT_CLOSED_CODE;
  return ('code' in failure ? failure.code : undefined) ?? null;
}

/** An `invalid` failure naming each field; its message lists them (`invalid request: name: must not be empty`). */
export function invalidInput(fields: FieldViolation[], reason: InvalidReason = 'invalid_value'): Failure {
  return { kind: 'invalid', message: `invalid request: ${fields.map((f) => `${f.field}: ${f.message}`).join('; ')}`, fields, reason };
}

/** The thrown form of `invalidInput`. */
export function invalidInputError(fields: FieldViolation[], reason: InvalidReason = 'invalid_value'): FailureError {
  return new FailureError(invalidInput(fields, reason));
}

/** The failure of a service's expected error. */
export function failureOfDomainError(error: DomainError): Failure {
  switch (error.type) {
    case 'UNAUTHENTICATED':
      return { kind: 'unauthenticated', message: error.message };
    case 'FORBIDDEN':
      return { kind: 'forbidden', message: error.message };
    case 'NOT_FOUND':
      return { kind: 'not-found', message: error.message };
    case 'CONFLICT':
      return { kind: 'conflict', message: error.message };
    case 'INVALID_ARGUMENT':
      return { kind: 'invalid', message: error.message, fields: error.fields, reason: 'invalid_value' };
    case 'INVALID_TRANSITION':
      return { kind: 'invalid-transition', message: error.message, status: error.status, action: error.action };
  }
}

const INVALID_STATUS: Record<InvalidReason, 400 | 413 | 415> = {
  invalid_value: 400,
  invalid_json: 400,
  unsupported_media_type: 415,
  too_large: 413,
};

const STATUS: Record<Exclude<FailureKind, 'invalid' | 'upstream'>, number> = {
  unauthenticated: 401,
  forbidden: 403,
  'not-found': 404,
  conflict: 409,
  'invalid-transition': 409,
  overloaded: 429,
  unavailable: 503,
  /** nginx's "client closed request": never sent (the client is gone), but recorded. */
  cancelled: 499,
  internal: 500,
};

/** The HTTP status of a failure, the same on every HTTP surface. */
export function httpStatusOf(failure: Failure): number {
  if (failure.kind === 'invalid') return INVALID_STATUS[failure.reason];
  if (failure.kind === 'upstream') return failure.status ?? 502;
  return STATUS[failure.kind];
}

/** Whether the failure is the server's (a bug, logged with the request id) rather than the client's or an outage's. */
export function isServerFailure(failure: Failure): boolean {
  return failure.kind === 'internal';
}
