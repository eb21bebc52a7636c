/**
 * React hooks over the session's API: a query that reloads on demand, a
 * subscription that lives as long as the component, and a mutation runner
 * that keeps its pending state and failure for the form that called it.
 */
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { useCallback, useEffect, useRef, useState } from 'react';
import { useSession } from '../session.js';
import { ApiError } from './graphql.js';

export interface QueryState<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload(): void;
}

/** Runs the query now and whenever the variables (compared as JSON) change. `skip` waits. */
export function useQuery<TResult, TVariables extends object>(
  document: TypedDocumentNode<TResult, TVariables>,
  variables: TVariables,
  options: { skip?: boolean } = {},
): QueryState<TResult> {
  const { api } = useSession();
  const [data, setData] = useState<TResult | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  const [loading, setLoading] = useState(!options.skip);
  const [generation, setGeneration] = useState(0);
  const key = JSON.stringify(variables);
  useEffect(() => {
    if (options.skip) return;
    let cancelled = false;
    setLoading(true);
    api
      .request(document, JSON.parse(key) as TVariables)
      .then((result) => {
        if (cancelled) return;
        setData(result);
        setError(undefined);
      })
      .catch((failure: unknown) => {
        if (!cancelled) setError(failure instanceof ApiError ? failure : new ApiError(String(failure)));
      })
      .finally(() => {
        if (!cancelled) setLoading(false);
      });
    return () => {
      cancelled = true;
    };
  }, [api, document, key, generation, options.skip]);
  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  return { data, error, loading, reload };
}

/**
 * Subscribes while mounted (and while `skip` is false); each value goes to `onData`, which may change between renders.
 * `completed`: the server ended the subscription (reset when it subscribes again).
 */
export function useSubscription<TResult, TVariables extends object>(
  document: TypedDocumentNode<TResult, TVariables>,
  variables: TVariables,
  onData: (value: TResult) => void,
  options: { skip?: boolean } = {},
): { error: ApiError | undefined; connected: boolean; completed: boolean } {
  const { api } = useSession();
  const handler = useRef(onData);
  handler.current = onData;
  const [error, setError] = useState<ApiError | undefined>();
  const [connected, setConnected] = useState(false);
  const [completed, setCompleted] = useState(false);
  const key = JSON.stringify(variables);
  useEffect(() => {
    if (options.skip) return;
    setError(undefined);
    setCompleted(false);
    setConnected(true);
    // graphql-ws completes a subscription that its caller ended too: what comes after the cleanup is not this run's news.
    let ended = false;
    const stop = api.subscribe(document, JSON.parse(key) as TVariables, {
      next: (value) => {
        if (!ended) handler.current(value);
      },
      error: (failure) => {
        if (ended) return;
        setError(failure);
        setConnected(false);
      },
      complete: () => {
        if (ended) return;
        setConnected(false);
        setCompleted(true);
      },
    });
    return () => {
      ended = true;
      stop();
      setConnected(false);
    };
  }, [api, document, key, options.skip]);
  return { error, connected, completed };
}

/** Runs a mutation; `pending` is true meanwhile, and a thrown ApiError lands in `error`. */
export function useMutation<TResult, TVariables extends object>(
  document: TypedDocumentNode<TResult, TVariables>,
): { run(variables: TVariables): Promise<TResult | undefined>; pending: boolean; error: ApiError | undefined } {
  const { api } = useSession();
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const run = useCallback(
    async (variables: TVariables) => {
      setPending(true);
      setError(undefined);
      try {
        return await api.request(document, variables);
      } catch (failure) {
        setError(failure instanceof ApiError ? failure : new ApiError(String(failure)));
        return undefined;
      } finally {
        setPending(false);
      }
    },
    [api, document],
  );
  return { run, pending, error };
}
