/**
 * The one mapping from a thrown error to what a client is told, shared by
 * REST, GraphQL and the chat route. Expected outcomes travel as `Result`
 * values (see src/domain/result.ts); what is thrown is one of:
 *
 * - a `ClientInputError`: the request broke a rule at the boundary (a path
 *   parameter that does not decode, a NUL inside a string, a body that is not
 *   JSON or not sent as JSON): 400, or 415 for a wrong content type, naming
 *   each field and its rule;
 * - a data exception from PostgreSQL (SQLSTATE class 22): a value that got
 *   past validation and the database refused. The client sent it, so it is a
 *   400 as well: a safety net, since the boundary and the domain rules are
 *   meant to stop such values before any statement;
 * - the database being unreachable (see src/storage/database-errors.ts): 503
 *   with Retry-After, on every surface;
 * - anything else: a bug, 500 with a message that leaks nothing.
 */
import type { ServerResponse } from 'node:http';
import { GraphQLError } from 'graphql';
import { maskError as yogaMaskError } from 'graphql-yoga';
import type { FieldViolation } from '../domain/result.js';
import { openAIError, type OpenAIError } from '../domain/openai-errors.js';
import { UpstreamCutError } from '../router/relay.js';
import { databaseFailureOf } from '../storage/database-errors.js';
import { HttpError, sendError, sendJson } from './rest/responses.js';

/**
 * Seconds a client is asked to wait during a database outage. The pool
 * reconnects by itself a few seconds after the database is back.
 */
export const DATABASE_RETRY_AFTER_S = 5;

export const DATABASE_UNAVAILABLE_MESSAGE = `the database is unavailable; retry in ${DATABASE_RETRY_AFTER_S} seconds`;

/** A request refused at a surface's boundary; thrown, then mapped below. */
export class ClientInputError extends Error {
  constructor(
    readonly fields: FieldViolation[],
    /** 400, or 415 for a body sent with a content type other than JSON. */
    readonly status: 400 | 415 = 400,
    /** The reason in one word, for the OpenAI shape's `code`. */
    readonly reason: 'invalid_value' | 'invalid_json' | 'unsupported_media_type' = status === 415
      ? 'unsupported_media_type'
      : 'invalid_value',
  ) {
    super(`invalid request: ${fields.map((f) => `${f.field}: ${f.message}`).join('; ')}`);
    this.name = 'ClientInputError';
  }
}

export type Failure =
  | { kind: 'invalid'; status: 400 | 415; message: string; fields: FieldViolation[]; reason: ClientInputError['reason'] }
  | { kind: 'upstream'; status: 502; message: string; code: string }
  | { kind: 'unavailable'; status: 503; message: string; retryAfter: number }
  | { kind: 'internal'; status: 500; message: string };

/** What a thrown error means to the client. */
export function classifyFailure(error: unknown): Failure {
  if (error instanceof ClientInputError)
    return { kind: 'invalid', status: error.status, message: error.message, fields: error.fields, reason: error.reason };
  if (error instanceof UpstreamCutError) return { kind: 'upstream', status: 502, message: error.message, code: error.code };
  const database = databaseFailureOf(error);
  if (database?.kind === 'unavailable') {
    return { kind: 'unavailable', status: 503, message: DATABASE_UNAVAILABLE_MESSAGE, retryAfter: DATABASE_RETRY_AFTER_S };
  }
  if (database?.kind === 'invalid-data') {
    // PostgreSQL's message names the value's problem (`invalid byte sequence for encoding "UTF8": 0x00`,
    // `value "…" is out of range for type integer`), not the schema; it cannot say which request field.
    const fields = [{ field: 'request', message: `holds a value the database cannot store (${database.message})` }];
    return {
      kind: 'invalid',
      status: 400,
      message: `invalid request: ${fields[0]!.field}: ${fields[0]!.message}`,
      fields,
      reason: 'invalid_value',
    };
  }
  return { kind: 'internal', status: 500, message: 'internal error' };
}

/** Whether the failure is the server's (worth logging) rather than the client's. */
export function isServerFailure(failure: Failure): boolean {
  return failure.kind === 'internal';
}

// --- REST --------------------------------------------------------------------------------------

/** The REST error for a thrown error (an HttpError passes as it is). */
export function restErrorOf(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  const failure = classifyFailure(error);
  switch (failure.kind) {
    case 'invalid':
      return new HttpError(failure.status, 'INVALID_ARGUMENT', failure.message, { fields: failure.fields });
    case 'unavailable':
      return new HttpError(503, 'UNAVAILABLE', failure.message, undefined, { 'retry-after': String(failure.retryAfter) });
    case 'upstream':
      return new HttpError(502, 'UNAVAILABLE', failure.message);
    case 'internal':
      return new HttpError(500, 'INTERNAL', failure.message);
  }
}

/**
 * The last-resort answer for an error thrown past a surface's own handling
 * (the HTTP server's catch-all): REST's error body, or GraphQL's.
 */
export function sendThrown(res: ServerResponse, error: unknown, shape: 'rest' | 'graphql'): void {
  const mapped = restErrorOf(error);
  if (shape === 'rest') return sendError(res, mapped);
  const message = mapped.status === 500 ? 'Unexpected error.' : mapped.message;
  const code = mapped.status === 500 ? 'INTERNAL_SERVER_ERROR' : mapped.code;
  sendJson(res, mapped.status, { errors: [{ message, extensions: { code, ...mapped.details } }] }, mapped.headers);
}

// --- Chat (OpenAI error shape) -----------------------------------------------------------------

/** The chat route's error for a thrown error, in the OpenAI shape. */
export function openAIErrorOf(error: unknown): OpenAIError {
  if (error instanceof HttpError && error.status < 500) {
    const fields = (error.details?.fields as FieldViolation[] | undefined) ?? [];
    return openAIError(
      error.status,
      'invalid_request_error',
      error.message,
      error.status === 413 ? 'request_too_large' : 'invalid_value',
      fields[0]?.field ?? null,
    );
  }
  const failure = classifyFailure(error);
  switch (failure.kind) {
    case 'invalid':
      return openAIError(failure.status, 'invalid_request_error', failure.message, failure.reason, failure.fields[0]?.field ?? null);
    case 'unavailable':
      return openAIError(503, 'server_error', failure.message, 'database_unavailable', null, failure.retryAfter);
    case 'upstream':
      return openAIError(502, 'server_error', failure.message, failure.code);
    case 'internal':
      return openAIError(500, 'server_error', failure.message, 'internal_error');
  }
}

// --- GraphQL -----------------------------------------------------------------------------------

/** GraphQL names fields in camelCase; the shared validators speak the REST names. */
export function graphqlFieldName(field: string): string {
  return field.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

type Located = Pick<GraphQLError, 'nodes' | 'source' | 'positions' | 'path'>;

/**
 * An INVALID_ARGUMENT GraphQL error: its fields in GraphQL's names, and an
 * HTTP status of 400 (or 415) for the answer over HTTP.
 */
export function graphqlInvalidArgument(message: string, fields: FieldViolation[], status: 400 | 415 = 400, at?: Located): GraphQLError {
  return new GraphQLError(message, {
    ...(at ? { nodes: at.nodes, source: at.source, positions: at.positions, path: at.path } : {}),
    extensions: {
      code: 'INVALID_ARGUMENT',
      fields: fields.map((f) => ({ ...f, field: graphqlFieldName(f.field) })),
      http: { status },
    },
  });
}

/** The GraphQL error for a classified failure, or undefined for a bug (masked as usual). */
function graphqlErrorFor(failure: Failure, at?: Located): GraphQLError | undefined {
  switch (failure.kind) {
    case 'invalid':
      return graphqlInvalidArgument(failure.message, failure.fields, failure.status, at);
    case 'unavailable':
      return new GraphQLError(failure.message, {
        ...(at ? { nodes: at.nodes, source: at.source, positions: at.positions, path: at.path } : {}),
        extensions: {
          code: 'UNAVAILABLE',
          retryAfter: failure.retryAfter,
          http: { status: 503, headers: { 'Retry-After': String(failure.retryAfter) } },
        },
      });
    case 'upstream':
      return new GraphQLError(failure.message, {
        ...(at ? { nodes: at.nodes, source: at.source, positions: at.positions, path: at.path } : {}),
        extensions: { code: 'UPSTREAM_DISCONNECTED', http: { status: 502 } },
      });
    case 'internal':
      return undefined;
  }
}

/**
 * yoga's `maskError`: a failure the client caused, or a database outage,
 * gets its own error (400 or 503 over HTTP); everything else is masked as
 * yoga masks it ("Unexpected error.", INTERNAL_SERVER_ERROR).
 */
export function maskGraphQLError(error: unknown, message: string, isDev?: boolean): Error {
  const located = error instanceof GraphQLError ? error : undefined;
  const original = located ? located.originalError : error;
  if (original !== undefined && original !== null && !(original instanceof GraphQLError)) {
    const mapped = graphqlErrorFor(classifyFailure(original), located);
    if (mapped) return mapped;
  }
  return yogaMaskError(error, message, isDev);
}
