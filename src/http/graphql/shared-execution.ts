/**
 * One execution per event for subscribers who asked the same thing.
 *
 * A subscription runs its selection set once for every event it emits, and
 * for every subscriber. Ten thousand front-ends watching one endpoint all ask
 * the same question of the same event, so this plugin executes the selection
 * once per (event payload, document, operation, variables, audience) and
 * hands every such subscriber the same result. The payload object is the
 * event's identity: the live-status resolvers emit one shared object per
 * event (see `schema/live.ts`), and a result lives only as long as its
 * payload is referenced.
 *
 * Only the root fields named in `fields` are shared: a chat stream's payloads
 * belong to one subscriber, and caching them would only cost memory. The
 * audience key says who may see the same data (for us: the user and the
 * acting team), so no result crosses an authorization boundary.
 *
 * A transport may also give each subscriber a `ResultSink` (`sinkOf`): a
 * shared result without errors is then written straight to it, serialized
 * once for everyone (`resultJson`), instead of travelling up through
 * envelop's wrappers and the transport's own per-subscriber loop. Results
 * with errors, and any result the sink refuses (a socket that is behind),
 * take the usual way, so error masking and backpressure are unchanged.
 */
import {
  createSourceEventStream,
  execute,
  getOperationAST,
  GraphQLError,
  Kind,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type OperationDefinitionNode,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';

export interface SharedExecutionOptions<C> {
  /** Subscription root fields whose events are shared objects. */
  fields: readonly string[];
  /** Subscribers with the same key may see the same result; null shares nothing. */
  audienceOf(context: C): string | null;
  /** Where this subscriber's shared results may be written directly; undefined yields them as usual. */
  sinkOf?(context: C): ResultSink | undefined;
}

/** A subscriber's transport, written to directly with shared results. */
export interface ResultSink {
  /** Writes one shared result without errors; false when it cannot take it now (it is then yielded as usual). */
  write(result: ExecutionResult): boolean;
}

const jsons = new WeakMap<ExecutionResult, string>();

/** The JSON of a result without errors, computed once however many subscribers share it. */
export function resultJson(result: ExecutionResult): string {
  let json = jsons.get(result);
  if (json === undefined) jsons.set(result, (json = JSON.stringify(result)));
  return json;
}

type Result = ExecutionResult | Promise<ExecutionResult>;

const documentIds = new WeakMap<DocumentNode, number>();
let lastDocumentId = 0;

/** Per event payload: its results, by execution key. */
const results = new WeakMap<object, Map<string, Result>>();

function sharedRootFields(operation: OperationDefinitionNode, fields: ReadonlySet<string>): boolean {
  return operation.selectionSet.selections.every((s) => s.kind === Kind.FIELD && fields.has(s.name.value));
}

/**
 * The key of executions that may share their results; undefined when the variables cannot be written as JSON (nested
 * deeper than the stack allows: they are not coerced yet here): such an operation executes alone, and the variables'
 * coercion refuses it as usual.
 */
function executionKey(args: ExecutionArgs, audience: string): string | undefined {
  let variables: string;
  try {
    variables = JSON.stringify(args.variableValues ?? {});
  } catch {
    return undefined;
  }
  let documentId = documentIds.get(args.document);
  if (documentId === undefined) documentIds.set(args.document, (documentId = ++lastDocumentId));
  return `${documentId}\u0000${args.operationName ?? ''}\u0000${variables}\u0000${audience}`;
}

function executeOnce(args: ExecutionArgs, key: string, payload: unknown): Result {
  if (typeof payload !== 'object' || payload === null) return execute({ ...args, rootValue: payload });
  let byKey = results.get(payload);
  if (!byKey) results.set(payload, (byKey = new Map()));
  let result = byKey.get(key);
  if (!result) {
    result = execute({ ...args, rootValue: payload });
    byKey.set(key, result);
  }
  return result;
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * The response stream of one subscriber: each source event, executed once per
 * key. With a sink, results it takes are written there and the stream moves on
 * to the next event; `next()` then settles only for what the sink refused and
 * at the end. A class: no closures per subscriber.
 */
class SharedResponseStream implements AsyncIterableIterator<ExecutionResult> {
  private closed = false;

  constructor(
    private readonly events: AsyncIterator<unknown>,
    private readonly args: ExecutionArgs,
    private readonly operation: OperationDefinitionNode,
    private readonly key: string,
    private readonly sink: ResultSink | undefined,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<ExecutionResult>> {
    for (;;) {
      let step: IteratorResult<unknown>;
      try {
        step = await this.events.next();
      } catch (error) {
        // An error from the source ends the stream as a located GraphQL error, as graphql-js's own subscribe reports it.
        if (error instanceof GraphQLError && error.nodes) throw error;
        const original = error instanceof Error ? error : new Error(String(error));
        throw new GraphQLError(original.message, { nodes: [this.operation], originalError: original });
      }
      if (step.done || this.closed) return DONE;
      const pending = executeOnce(this.args, this.key, step.value);
      const result = pending instanceof Promise ? await pending : pending;
      if (this.closed) return DONE;
      if (this.sink && !result.errors && this.sink.write(result)) continue;
      return { done: false, value: result };
    }
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    this.closed = true;
    await this.events.return?.();
    return DONE;
  }

  async throw(error: unknown): Promise<IteratorResult<ExecutionResult>> {
    this.closed = true;
    await this.events.return?.();
    throw error;
  }
}

/** The subscribe function: the subscription field's source stream, mapped by a SharedResponseStream. */
async function subscribeShared(
  args: ExecutionArgs,
  operation: OperationDefinitionNode,
  key: string,
  sink: ResultSink | undefined,
): Promise<ExecutionResult | AsyncIterableIterator<ExecutionResult>> {
  const source = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in source)) return source;
  return new SharedResponseStream(source[Symbol.asyncIterator](), args, operation, key, sink);
}

export function useSharedSubscriptionExecution<C>(options: SharedExecutionOptions<C>): Plugin<C & Record<string, unknown>> {
  const fields = new Set(options.fields);
  return {
    onSubscribe({ args, setSubscribeFn }) {
      const operation = getOperationAST(args.document, args.operationName);
      if (!operation || !sharedRootFields(operation, fields)) return;
      const audience = options.audienceOf(args.contextValue as C);
      if (audience === null) return;
      const key = executionKey(args, audience);
      if (key === undefined) return;
      const sink = options.sinkOf?.(args.contextValue as C);
      setSubscribeFn(((subscribeArgs: ExecutionArgs) => subscribeShared(subscribeArgs, operation, key, sink)) as never);
    },
  };
}
