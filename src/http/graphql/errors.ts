/**
 * The GraphQL surface's errors: one table from the error model
 * (src/domain/errors.ts) to a GraphQL error's `extensions.code` and the HTTP
 * status it gives an answer over HTTP. Expected failures of mutations are
 * result types instead (schema/errors.ts); this is for what is thrown, for
 * query fields, and for authentication. Chat's failures (`chatErrorOf`,
 * `graphqlChatError`) are defined as the OpenAI-compatible route's errors,
 * and take its status, type and code from its table (src/http/rest/chat-errors.ts).
 *
 * A bug is masked as yoga masks it ("Unexpected error.", INTERNAL_SERVER_ERROR)
 * and, where the answer leaves (`reportGraphQLErrors`: HTTP through the yoga
 * plugin below, SSE, WebSocket), logged once with the request id, which the
 * masked error also carries as `extensions.requestId`.
 */
import { GraphQLError, type ExecutionResult, type GraphQLFormattedError } from 'graphql';
import { mapAsyncIterator, maskError as yogaMaskError, type Plugin } from 'graphql-yoga';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { httpStatusOf, type Failure, type FailureKind } from '../../domain/errors.js';
import type { FieldViolation } from '../../domain/result.js';
import { sendJson } from '../body.js';
import { failureOf } from '../failures.js';
import { openAIErrorOfFailure } from '../rest/chat-errors.js';
import { logFailure, requestIdOf, type Log } from '../request-id.js';

/** GraphQL names fields in camelCase; the shared validators speak the REST names. */
export function graphqlFieldName(field: string, jsonFields: ReadonlySet<string> = NO_JSON_FIELDS): string {
  const parts = field.split('.');
  for (let i = 0; i < parts.length; i++) {
    parts[i] = parts[i]!.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    // Below a field of type JSON the names are the client's own keys (`chatTemplateKwargs.enable_thinking`).
    if (jsonFields.has(parts[i]!.replace(/(\[\d+\])+$/, ''))) break;
  }
  return parts.join('.');
}

const NO_JSON_FIELDS: ReadonlySet<string> = new Set();

/** The other way: a GraphQL field's REST name (`topP` → `top_p`). */
export function restFieldName(field: string): string {
  return field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

type Located = Pick<GraphQLError, 'nodes' | 'source' | 'positions' | 'path'>;

const locationOf = (at?: Located) => (at ? { nodes: at.nodes, source: at.source, positions: at.positions, path: at.path } : {});

/**
 * Where a failure stands: `request` when the whole request fails (no data:
 * authentication), `field` when one field does (its siblings still answer).
 */
export type Scope = 'request' | 'field';

type Row<K extends FailureKind> = {
  code: string;
  /** Whether the HTTP status is set for a field's error too (a client's mistake, an outage), or only for the request's. */
  fieldStatus: boolean;
  extensions?: (failure: Extract<Failure, { kind: K }>) => Record<string, unknown>;
  headers?: (failure: Extract<Failure, { kind: K }>) => Record<string, string>;
};

const retryAfter = (f: { retryAfter: number }) => ({ retryAfter: f.retryAfter });
const retryAfterHeader = (f: { retryAfter: number }) => ({ 'Retry-After': String(f.retryAfter) });

const GRAPHQL: { [K in Exclude<FailureKind, 'internal'>]: Row<K> } = {
  invalid: {
    code: 'INVALID_ARGUMENT',
    fieldStatus: true,
    extensions: (f) => ({ fields: f.fields.map((v) => ({ ...v, field: graphqlFieldName(v.field) })) }),
  },
  unauthenticated: { code: 'UNAUTHENTICATED', fieldStatus: false },
  forbidden: { code: 'FORBIDDEN', fieldStatus: false },
  'not-found': { code: 'NOT_FOUND', fieldStatus: false },
  conflict: { code: 'CONFLICT', fieldStatus: false },
  'invalid-transition': { code: 'INVALID_TRANSITION', fieldStatus: false },
  overloaded: { code: 'RESOURCE_EXHAUSTED', fieldStatus: true, extensions: retryAfter, headers: retryAfterHeader },
  // The REST code of the same answer (503 with Retry-After: the contract's RESOURCE_EXHAUSTED), so that a client of
  // both surfaces reads one code for "retry after extensions.retryAfter".
  unavailable: { code: 'RESOURCE_EXHAUSTED', fieldStatus: true, extensions: retryAfter, headers: retryAfterHeader },
  upstream: { code: 'UPSTREAM_DISCONNECTED', fieldStatus: true },
  cancelled: { code: 'CANCELLED', fieldStatus: false },
};

/** The GraphQL error of a failure; undefined for a bug, which is masked (see `maskGraphQLError`). */
export function graphqlErrorOf(failure: Failure, scope: Scope = 'field', at?: Located): GraphQLError | undefined {
  if (failure.kind === 'internal') return undefined;
  const row = GRAPHQL[failure.kind] as Row<Exclude<FailureKind, 'internal'>>;
  const headers = row.headers?.(failure as never);
  const http = scope === 'request' || row.fieldStatus ? { http: { status: httpStatusOf(failure), ...(headers ? { headers } : {}) } } : {};
  return new GraphQLError(failure.message, {
    ...locationOf(at),
    extensions: { code: row.code, ...row.extensions?.(failure as never), ...http },
  });
}

/**
 * A whole GraphQL answer for a request that fails before an operation runs (its key, its body, an
 * error thrown past yoga): the table's error with its status and headers, or a masked one.
 */
export function sendGraphQLFailure(res: ServerResponse, failure: Failure, requestId: string, headers: Record<string, string> = {}): void {
  const error = graphqlErrorOf(failure, 'request');
  const http = (error?.extensions.http ?? { status: 500 }) as { status: number; headers?: Record<string, string> };
  const { http: _http, ...extensions } = error?.extensions ?? { code: 'INTERNAL_SERVER_ERROR', requestId };
  sendJson(res, http.status, { errors: [{ message: error?.message ?? 'Unexpected error.', extensions }] }, { ...http.headers, ...headers });
}

/** An error as a client sees it: yoga's internal extensions (`http`, `unexpected`) left out, as yoga writes it over HTTP. */
export function publicErrorJson(error: GraphQLError): GraphQLFormattedError {
  const json = typeof error.toJSON === 'function' ? error.toJSON() : { message: error.message };
  const { http: _h, unexpected: _u, ...rest } = (json.extensions ?? {}) as Record<string, unknown>;
  const { extensions: _e, ...base } = json;
  return Object.keys(rest).length > 0 ? { ...base, extensions: rest } : base;
}

/** An INVALID_ARGUMENT error: its fields in GraphQL's names, and a 400 (or 413, 415) over HTTP. */
export function graphqlInvalidArgument(message: string, fields: FieldViolation[], status: 400 | 413 | 415 = 400): GraphQLError {
  const reason = status === 415 ? 'unsupported_media_type' : status === 413 ? 'too_large' : 'invalid_value';
  return graphqlErrorOf({ kind: 'invalid', message, fields, reason })!;
}

/** Masked errors, each with the error it hides (for the log). */
const hidden = new WeakMap<GraphQLError, unknown>();
/** Masked errors already logged (a shared result reaches several subscribers). */
const reported = new WeakSet<GraphQLError>();

/**
 * yoga's `maskError`: a failure the client caused, an outage or a cut
 * upstream gets its own error (400, 503, 502 over HTTP); a bug is masked as
 * yoga masks it, and remembered, to be logged with its request id where the
 * answer leaves (`reportGraphQLErrors`).
 */
export function maskGraphQLError(error: unknown, message: string, isDev?: boolean): Error {
  const located = error instanceof GraphQLError ? error : undefined;
  const original = located ? located.originalError : error;
  if (original !== undefined && original !== null && !(original instanceof GraphQLError)) {
    const mapped = graphqlErrorOf(failureOf(original), 'field', located);
    if (mapped) return mapped;
  }
  const masked = yogaMaskError(error, message, isDev);
  if (masked !== error && masked instanceof GraphQLError) hidden.set(masked, original ?? error);
  return masked;
}

/** Masks a thrown error as a GraphQL error (for the transports that answer errors themselves). */
export function exposedGraphQLError(error: unknown): GraphQLError {
  const masked = maskGraphQLError(error, 'Unexpected error.');
  return masked instanceof GraphQLError ? masked : new GraphQLError('Unexpected error.');
}

/**
 * Logs each masked error among `errors` once, with the request id, and adds
 * the id to the error's extensions, so that the client can quote it.
 */
export function reportGraphQLErrors(
  errors: readonly GraphQLError[] | undefined,
  requestId: string,
  log: Log,
  what = 'a GraphQL operation',
): void {
  if (!errors) return;
  for (const error of errors) {
    if (!hidden.has(error) || reported.has(error)) continue;
    reported.add(error);
    (error.extensions as Record<string, unknown>).requestId = requestId;
    logFailure(log, requestId, what, hidden.get(error));
  }
}

/** The error a masked error hides (for a log line), or the error itself. */
export function unmasked(error: unknown): unknown {
  return error instanceof GraphQLError && hidden.has(error) ? hidden.get(error) : error;
}

function reportResult(result: unknown, requestId: string, log: Log): void {
  if (Array.isArray(result)) for (const one of result) reportResult(one, requestId, log);
  else if (result && typeof result === 'object' && 'errors' in result) {
    reportGraphQLErrors((result as ExecutionResult).errors, requestId, log);
  }
}

/** Reports the masked errors of every answer yoga writes over HTTP (results, streamed results, and request errors). */
export function useErrorReporting(log: Log): Plugin<Record<string, unknown>, { req?: IncomingMessage }> {
  return {
    onResultProcess({ result, setResult, serverContext }) {
      const req = serverContext.req;
      if (!req) return;
      const requestId = requestIdOf(req);
      if (result && typeof result === 'object' && Symbol.asyncIterator in result) {
        setResult(
          mapAsyncIterator(result, (one) => {
            reportResult(one, requestId, log);
            return one;
          }),
        );
      } else reportResult(result, requestId, log);
    },
  };
}

/** A chat failure as GraphQL answers it (`ChatCompletionError`): the REST route's error, its field in GraphQL's names. */
export interface ChatError {
  message: string;
  errorType: string;
  code: string | null;
  param: string | null;
  status: number;
  retryAfter: number | null;
}

/** The chat error of a failure; below a field of type JSON (`jsonFields`), `param` keeps the client's own key names. */
export function chatErrorOf(failure: Failure, jsonFields?: ReadonlySet<string>): ChatError {
  const { message, type, code, param, status, retryAfter } = openAIErrorOfFailure(failure);
  const field = param ? graphqlFieldName(param, jsonFields) : null;
  return { message, errorType: type, code, param: field, status, retryAfter: retryAfter ?? null };
}

/** A chat failure as a GraphQL error, for the `chatCompletion` subscription: the same fields, as extensions. */
export function graphqlChatError(failure: Failure, jsonFields?: ReadonlySet<string>): GraphQLError {
  const error = chatErrorOf(failure, jsonFields);
  return new GraphQLError(error.message, {
    extensions: {
      code: error.code ?? error.errorType,
      status: error.status,
      ...(error.param ? { param: error.param } : {}),
      ...(error.retryAfter !== null ? { retryAfter: error.retryAfter } : {}),
    },
  });
}
