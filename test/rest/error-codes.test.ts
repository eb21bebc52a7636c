/**
 * The management routes' error codes are the contract's closed list, each with
 * the status the contract pairs it with: a client written against the
 * contract knows every code it can get. An outage (the database unreachable)
 * and a failed upstream are RESOURCE_EXHAUSTED, 503 with Retry-After: retry
 * after it. GraphQL answers the kinds both surfaces share with the same code.
 */
import { describe, expect, test } from 'vitest';
import { clientClosed, type Failure, type FailureKind } from '../../src/domain/errors.js';
import { graphqlErrorOf } from '../../src/http/graphql/errors.js';
import { failureOf } from '../../src/http/failures.js';
import { restErrorOfFailure, UPSTREAM_RETRY_AFTER_S } from '../../src/http/rest/errors.js';
import { UpstreamCutError } from '../../src/router/relay.js';

/** The contract's codes ("Errors, management routes") and the statuses it gives each. */
const CONTRACT: Record<string, number[]> = {
  UNAUTHENTICATED: [401],
  FORBIDDEN: [403],
  NOT_FOUND: [404],
  INVALID_ARGUMENT: [400, 413, 415],
  INVALID_TRANSITION: [409],
  CONFLICT: [409],
  RESOURCE_EXHAUSTED: [429, 503],
  INTERNAL: [500],
};

const EXAMPLES: Record<FailureKind, Failure> = {
  invalid: { kind: 'invalid', message: 'bad', fields: [{ field: 'name', message: 'must not be empty' }], reason: 'invalid_value' },
  unauthenticated: { kind: 'unauthenticated', message: 'no key' },
  forbidden: { kind: 'forbidden', message: 'not yours' },
  'not-found': { kind: 'not-found', message: 'none' },
  conflict: { kind: 'conflict', message: 'taken' },
  'invalid-transition': { kind: 'invalid-transition', message: 'no', status: 'TERMINATED', action: 'sleep' },
  overloaded: { kind: 'overloaded', message: 'slow down', retryAfter: 3 },
  unavailable: { kind: 'unavailable', message: 'the database is unavailable', retryAfter: 5, code: 'database_unavailable' },
  upstream: { kind: 'upstream', message: 'the hub failed', code: 'upstream_error' },
  cancelled: clientClosed(),
  internal: { kind: 'internal', message: 'internal error' },
};

describe('REST management errors', () => {
  test.each(Object.values(EXAMPLES).filter((f) => f.kind !== 'cancelled'))('$kind: a code of the contract, with its status', (failure) => {
    const error = restErrorOfFailure(failure);
    expect(Object.keys(CONTRACT)).toContain(error.code);
    expect(CONTRACT[error.code]).toContain(error.status);
    if (error.code === 'RESOURCE_EXHAUSTED') expect(error.headers?.['retry-after']).toMatch(/^[1-9][0-9]*$/);
  });

  test('the database unreachable: RESOURCE_EXHAUSTED, 503, Retry-After 5', () => {
    expect(restErrorOfFailure(EXAMPLES.unavailable)).toEqual({
      status: 503,
      code: 'RESOURCE_EXHAUSTED',
      message: 'the database is unavailable',
      headers: { 'retry-after': '5' },
    });
  });

  test('an upstream that failed or was cut: RESOURCE_EXHAUSTED, 503, with a Retry-After, whatever status it had', () => {
    const headers = { 'retry-after': String(UPSTREAM_RETRY_AFTER_S) };
    expect(restErrorOfFailure(EXAMPLES.upstream)).toEqual({ status: 503, code: 'RESOURCE_EXHAUSTED', message: 'the hub failed', headers });
    const cut = failureOf(new UpstreamCutError());
    expect(restErrorOfFailure(cut)).toMatchObject({ status: 503, code: 'RESOURCE_EXHAUSTED', headers });
    const shuttingDown: Failure = { kind: 'upstream', message: 'shutting down', code: 'engine_shutting_down', status: 502 };
    expect(restErrorOfFailure(shuttingDown)).toMatchObject({ status: 503, code: 'RESOURCE_EXHAUSTED', headers });
  });

  test('a client that left: a code of the list (never sent), with the 499 the logs record', () => {
    const error = restErrorOfFailure(EXAMPLES.cancelled);
    expect(Object.keys(CONTRACT)).toContain(error.code);
    expect(error.status).toBe(499);
  });
});

describe('GraphQL errors', () => {
  // GraphQL's own codes, for the kinds GraphQL answers in its own way: a bug is masked as yoga masks it
  // (INTERNAL_SERVER_ERROR), a cut replica ends a chat subscription (UPSTREAM_DISCONNECTED, docs/chat-api.md).
  const OWN: FailureKind[] = ['internal', 'upstream', 'cancelled'];

  test.each(Object.values(EXAMPLES).filter((f) => !OWN.includes(f.kind)))('$kind: the REST code', (failure) => {
    expect(graphqlErrorOf(failure)?.extensions.code).toBe(restErrorOfFailure(failure).code);
  });

  test('the database unreachable: RESOURCE_EXHAUSTED with retryAfter, 503 over HTTP', () => {
    const error = graphqlErrorOf(EXAMPLES.unavailable)!;
    expect(error.extensions).toMatchObject({ code: 'RESOURCE_EXHAUSTED', retryAfter: 5, http: { status: 503 } });
  });
});
