/**
 * The console's only way to the gateway: GraphQL queries and mutations over
 * HTTP (graphql-request) and subscriptions over graphql-ws, both with the
 * signed-in API key. Operations are typed documents from codegen
 * (src/console/api/generated.ts, from the .graphql files beside this one).
 */
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { ClientError, GraphQLClient } from 'graphql-request';
import { createClient, type Client as WsClient } from 'graphql-ws';
import { print } from 'graphql';

/** A failure the console shows as is: the server's message, never a stack. */
export class ApiError extends Error {
  constructor(
    message: string,
    /** 401: the key no longer works; the console signs out. */
    readonly status?: number,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface Api {
  request<TResult, TVariables extends object>(document: TypedDocumentNode<TResult, TVariables>, variables: TVariables): Promise<TResult>;
  /** Starts a subscription; the returned function ends it. */
  subscribe<TResult, TVariables extends object>(
    document: TypedDocumentNode<TResult, TVariables>,
    variables: TVariables,
    sink: { next(value: TResult): void; error?(error: ApiError): void; complete?(): void },
  ): () => void;
  close(): void;
}

/** The gateway's WebSocket close codes for a key it will not serve (src/http/graphql/websocket.ts). */
const isKeyRefusal = (code: number) => code === 4401 || code === 4403;

function apiErrorOf(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof ClientError) {
    const first = error.response.errors?.[0];
    const code = typeof first?.extensions?.code === 'string' ? first.extensions.code : undefined;
    return new ApiError(first?.message ?? `The gateway answered ${error.response.status}.`, error.response.status, code);
  }
  if (Array.isArray(error)) {
    // graphql-ws hands over the operation's GraphQL errors as an array.
    const first = error[0] as { message?: string; extensions?: { code?: string } } | undefined;
    return new ApiError(first?.message ?? 'The subscription failed.', undefined, first?.extensions?.code);
  }
  if (error && typeof error === 'object' && 'code' in error && 'reason' in error) {
    // A CloseEvent: 4401 is a key refused when the socket opens, 4403 a key revoked (or access lost) while it is open.
    const close = error as { code: number; reason: string };
    return new ApiError(close.reason || `The connection closed (${close.code}).`, isKeyRefusal(close.code) ? 401 : undefined);
  }
  return new ApiError(error instanceof Error ? error.message : 'The gateway could not be reached.');
}

export function createApi(apiKey: string, onUnauthorized: () => void): Api {
  const origin = window.location.origin;
  const http = new GraphQLClient(`${origin}/graphql`, { headers: { authorization: `Bearer ${apiKey}` } });
  let ws: WsClient | undefined;
  const socket = (): WsClient => {
    ws ??= createClient({
      url: `${origin.replace(/^http/, 'ws')}/graphql`,
      connectionParams: { authorization: `Bearer ${apiKey}` },
      lazy: true,
      retryAttempts: 5,
      shouldRetry: (event) => !(event && typeof event === 'object' && 'code' in event && isKeyRefusal((event as { code: number }).code)),
    });
    return ws;
  };
  const fail = (error: unknown): ApiError => {
    const apiError = apiErrorOf(error);
    if (apiError.status === 401) onUnauthorized();
    return apiError;
  };
  return {
    async request(document, variables) {
      try {
        return await http.request({ document, variables: variables as Record<string, unknown> } as never);
      } catch (error) {
        throw fail(error);
      }
    },
    subscribe(document, variables, sink) {
      return socket().subscribe(
        { query: print(document), variables: variables as Record<string, unknown> },
        {
          next: (value) => {
            if (value.errors?.length) sink.error?.(fail(value.errors));
            else if (value.data) sink.next(value.data as never);
          },
          error: (error) => sink.error?.(fail(error)),
          complete: () => sink.complete?.(),
        },
      );
    },
    close() {
      void ws?.dispose();
    },
  };
}

/** Checks a key before it is kept: the caller's identity, or the server's refusal. */
export async function verifyKey<TResult>(apiKey: string, document: TypedDocumentNode<TResult, Record<string, never>>): Promise<TResult> {
  const api = createApi(apiKey, () => undefined);
  try {
    return await api.request(document, {});
  } finally {
    api.close();
  }
}

/** A mutation's typed failure (`InvalidArgumentError`, `NotFoundError`…) with its field errors, if any. */
export interface MutationFailure {
  __typename: string;
  message: string;
  fields?: ReadonlyArray<{ field: string; message: string }>;
}

/** The result union's failure, or undefined when it is the success type. */
export function failureOf(result: { __typename?: string }): MutationFailure | undefined {
  const typename = result.__typename ?? '';
  if (typename.endsWith('Success')) return undefined;
  return result as MutationFailure;
}
