/**
 * Talking to W&B: the error of a failed answer (GraphQL, manifest or file),
 * read as the `wandb` SDK reads it, and the GraphQL caller with its retries.
 */
import { ClientError, GraphQLClient, type RequestOptions } from 'graphql-request';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { ANSWER_LIMITS, BodyTimeoutError, readTextWithin, type TextLimits } from '../bounded-text.js';
import { ModelSourceError, serverText, someOf, type ModelSourceErrorCode } from '../errors.js';
import { isTransientStatus, retryAfterMs, TransientError, withRetries, type RetryOptions } from '../retry.js';

export const API_ERROR: ModelSourceErrorCode = 'WORKLOAD_INIT_HF_WANDB_API_ERROR';
export const NOT_FOUND: ModelSourceErrorCode = 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR';

export function wandbAuthHeaders(apiKey: string | undefined): Record<string, string> {
  return {
    'user-agent': 'dedicated-endpoints',
    ...(apiKey ? { authorization: `Basic ${Buffer.from(`api:${apiKey}`).toString('base64')}` } : {}),
  };
}

export interface Context {
  /** `<org>/<registry>/<name>:<version>` as asked */
  label: string;
  org: string;
  registry: string;
  keySent: boolean;
  host: string;
}

/** The error for a failed HTTP answer from W&B (GraphQL, manifest or file); 429 and 5xx are TransientError. */
export function httpError(
  status: number,
  ctx: { label: string; keySent: boolean; what: string; download?: boolean; org?: string; registry?: string },
  res?: Response,
  serverMessage?: string,
  headers?: Headers,
): ModelSourceError {
  void res?.body?.cancel().catch(() => {});
  const retryAfter = retryAfterMs(headers ?? res?.headers);
  const said = serverMessage ? `: ${serverMessage}` : '';
  if (status === 401) {
    return new ModelSourceError(
      'WORKLOAD_INIT_INVALID_TOKEN_ERROR',
      ctx.keySent
        ? `W&B rejected the API key (401) while ${ctx.what} ${ctx.label}${said}. Check that WANDB_API_KEY is valid and not revoked.`
        : `W&B requires an API key (401) to read ${ctx.label}: set WANDB_API_KEY.`,
    );
  }
  if (status === 403) {
    const who = ctx.org
      ? ` The API key's user must be a member of organization "${ctx.org}" with access to registry "${ctx.registry}".`
      : '';
    return new ModelSourceError(
      'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR',
      `W&B denied access (403) while ${ctx.what} ${ctx.label}${said}.${who}`,
    );
  }
  if (ctx.download && (status === 404 || status === 410)) {
    return new ModelSourceError(NOT_FOUND, `W&B no longer has ${ctx.label} (${status}).`);
  }
  const code = API_ERROR;
  if (status === 429) return new TransientError(code, `W&B is rate-limiting requests (429) while ${ctx.what} ${ctx.label}.`, retryAfter);
  const message = `W&B answered ${status} while ${ctx.what} ${ctx.label}${said}.`;
  return isTransientStatus(status) ? new TransientError(code, message, retryAfter) : new ModelSourceError(code, message);
}

/** A fetch rejection (W&B unreachable), told apart from answers graphql-request cannot parse. */
export class UnreachableError extends Error {}

/** An answer read past its limits: too slow, cut off, or too large (then `cause` is undefined). */
class AnswerError extends Error {}

/**
 * fetch for graphql-request, which would read an answer whole, however large or slow: the body is read here within
 * `limits` (as the hub's answers are), and graphql-request is given a Response of that text.
 */
function boundedFetch(limits: TextLimits) {
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    let res: Response;
    try {
      res = await fetch(input, init);
    } catch (err) {
      throw new UnreachableError('unreachable', { cause: err });
    }
    let text: string | undefined;
    try {
      text = await readTextWithin(res, limits);
    } catch (err) {
      throw new AnswerError('unreadable', { cause: err });
    }
    if (text === undefined) throw new AnswerError('too large');
    // The text is decoded already: the headers must not say it is compressed, nor give the compressed length.
    const headers = new Headers(res.headers);
    headers.delete('content-encoding');
    headers.delete('content-length');
    const empty = [204, 205, 304].includes(res.status); // statuses a Response may not have a body with
    return new Response(empty ? null : text, { status: res.status, statusText: res.statusText, headers });
  };
}

/** The messages of an answer's GraphQL errors: as many as someOf shows, each cut as serverText cuts it. */
function graphqlMessages(err: ClientError): string | undefined {
  const errors = (err.response as { errors?: unknown }).errors;
  if (!Array.isArray(errors)) return undefined;
  const messages = errors.map((e) => (e as { message?: unknown } | null)?.message).filter((m): m is string => serverText(m) !== undefined);
  return messages.length ? someOf(messages) : undefined;
}

export function malformed(ctx: Context, what: string): ModelSourceError {
  return new ModelSourceError(API_ERROR, `W&B sent an unexpected ${what} for ${ctx.label}.`);
}

export type Json = Record<string, unknown>;
export const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
export const isInt = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

/**
 * Sends one typed operation; every failure comes back as a ModelSourceError (cancellation passes through). Each answer
 * is read within `limits`.
 */
export function graphqlCaller(baseUrl: string, apiKey: string | undefined, ctx: Context, retry: RetryOptions, limits = ANSWER_LIMITS) {
  const signal = retry.signal;
  const client = new GraphQLClient(`${baseUrl}/graphql`, { headers: wandbAuthHeaders(apiKey), fetch: boundedFetch(limits) });
  // Each operation is retried while it fails transiently (429, 5xx, unreachable); see ../retry.ts.
  return async <TData, TVariables extends Record<string, unknown>>(
    document: TypedDocumentNode<TData, TVariables>,
    variables: TVariables,
    what: string,
  ): Promise<{ data: TData } | { graphqlError: ModelSourceError }> =>
    withRetries('W&B', `${what} ${ctx.label}`, () => once(document, variables, what), retry);

  async function once<TData, TVariables extends Record<string, unknown>>(
    document: TypedDocumentNode<TData, TVariables>,
    variables: TVariables,
    what: string,
  ): Promise<{ data: TData } | { graphqlError: ModelSourceError }> {
    try {
      // The options type is conditional on the variables; with generic variables it needs the cast.
      const request = { document, variables, ...(signal ? { signal } : {}) } as unknown as RequestOptions<TVariables, TData>;
      const data = await client.request<TData, TVariables>(request);
      if (!isObject(data)) throw malformed(ctx, `answer to ${what}`);
      return { data };
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof ModelSourceError) throw err;
      if (err instanceof UnreachableError) {
        throw new TransientError(API_ERROR, `Could not reach W&B at ${ctx.host} while ${what} ${ctx.label}.`, undefined, {
          cause: err.cause,
        });
      }
      if (err instanceof AnswerError) {
        const answer = `W&B's answer while ${what} ${ctx.label}`;
        if (err.cause === undefined) throw new ModelSourceError(API_ERROR, `${answer} is larger than ${limits.maxBytes >> 20} MiB.`);
        // Too slow, or cut off: worth another attempt.
        const why = err.cause instanceof BodyTimeoutError ? `came too slowly (${err.cause.message})` : 'was cut off';
        throw new TransientError(API_ERROR, `${answer} ${why}.`, undefined, { cause: err.cause });
      }
      if (err instanceof ClientError) {
        const status = err.response.status;
        const message = graphqlMessages(err);
        if (status >= 200 && status < 300) {
          // The answer carries GraphQL errors: the caller decides whether that is fatal.
          return {
            graphqlError: new ModelSourceError(
              API_ERROR,
              `W&B answered with an error while ${what} ${ctx.label}${message ? `: ${message}` : ''}.`,
              { cause: err },
            ),
          };
        }
        throw httpError(
          status,
          { label: ctx.label, keySent: ctx.keySent, what, org: ctx.org, registry: ctx.registry },
          undefined,
          message,
          err.response.headers,
        );
      }
      throw new ModelSourceError(API_ERROR, `W&B sent an unreadable answer while ${what} ${ctx.label}.`, { cause: err });
    }
  }
}
