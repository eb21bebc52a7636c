/**
 * What a thrown error means, in the one error model (src/domain/errors.ts).
 * Expected outcomes travel as `Result` values; what is thrown is one of:
 *
 * - a `FailureError`: the request broke a rule at the boundary (a path
 *   parameter that does not decode, a NUL inside a string, a body that is not
 *   JSON, too large, or not sent as JSON), or another failure a boundary
 *   raises;
 * - a data exception from PostgreSQL (SQLSTATE class 22): a value that got
 *   past validation and the database refused. The client sent it, so it is
 *   `invalid` as well: a safety net, since the boundary and the domain rules
 *   are meant to stop such values before any statement;
 * - the database being unreachable (see src/storage/database-errors.ts):
 *   `unavailable`, with a Retry-After, on every surface;
 * - a replica's answer cut short (`UpstreamCutError`): `upstream`;
 * - anything else: a bug, `internal`, with a message that leaks nothing.
 *
 * Each surface's table turns the failure into its shape: src/http/rest/errors.ts,
 * src/http/graphql/errors.ts, src/http/rest/chat-errors.ts.
 */
import { FailureError, internalFailure, invalidInput, type Failure } from '../domain/errors.js';
import { UpstreamCutError } from '../router/relay.js';
import { databaseFailureOf } from '../storage/database-errors.js';

export { isServerFailure } from '../domain/errors.js';

/**
 * Seconds a client is asked to wait during a database outage. The pool
 * reconnects by itself a few seconds after the database is back.
 */
export const DATABASE_RETRY_AFTER_S = 5;

export const DATABASE_UNAVAILABLE_MESSAGE = `the database is unavailable; retry in ${DATABASE_RETRY_AFTER_S} seconds`;

/** The failure of a thrown error. */
export function failureOf(error: unknown): Failure {
  if (error instanceof FailureError) return error.failure;
  if (error instanceof UpstreamCutError) return { kind: 'upstream', message: error.message, code: error.code };
  const database = databaseFailureOf(error);
  if (database?.kind === 'unavailable') {
    return { kind: 'unavailable', message: DATABASE_UNAVAILABLE_MESSAGE, retryAfter: DATABASE_RETRY_AFTER_S, code: 'database_unavailable' };
  }
  if (database?.kind === 'invalid-data') {
    // PostgreSQL's message names the value's problem (`invalid byte sequence for encoding "UTF8": 0x00`,
    // `value "…" is out of range for type integer`), not the schema; it cannot say which request field.
    return invalidInput([{ field: 'request', message: `holds a value the database cannot store (${database.message})` }]);
  }
  return internalFailure();
}
