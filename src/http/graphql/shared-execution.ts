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
}

type Result = ExecutionResult | Promise<ExecutionResult>;

const documentIds = new WeakMap<DocumentNode, number>();
let lastDocumentId = 0;

/** Per event payload: its results, by execution key. */
const results = new WeakMap<object, Map<string, Result>>();

function sharedRootFields(operation: OperationDefinitionNode, fields: ReadonlySet<string>): boolean {
  return operation.selectionSet.selections.every((s) => s.kind === Kind.FIELD && fields.has(s.name.value));
}

function executionKey(args: ExecutionArgs, audience: string): string {
  let documentId = documentIds.get(args.document);
  if (documentId === undefined) documentIds.set(args.document, (documentId = ++lastDocumentId));
  return `${documentId}\u0000${args.operationName ?? ''}\u0000${JSON.stringify(args.variableValues ?? {})}\u0000${audience}`;
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

/** The response stream of one subscriber: each source event, executed once per key. A class: no closures per subscriber. */
class SharedResponseStream implements AsyncIterableIterator<ExecutionResult> {
  constructor(
    private readonly events: AsyncIterator<unknown>,
    private readonly args: ExecutionArgs,
    private readonly operation: OperationDefinitionNode,
    private readonly key: string,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<ExecutionResult>> {
    let step: IteratorResult<unknown>;
    try {
      step = await this.events.next();
    } catch (error) {
      // An error from the source ends the stream as a located GraphQL error, as graphql-js's own subscribe reports it.
      if (error instanceof GraphQLError && error.nodes) throw error;
      const original = error instanceof Error ? error : new Error(String(error));
      throw new GraphQLError(original.message, { nodes: [this.operation], originalError: original });
    }
    if (step.done) return DONE;
    const result = executeOnce(this.args, this.key, step.value);
    return { done: false, value: result instanceof Promise ? await result : result };
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    await this.events.return?.();
    return DONE;
  }

  async throw(error: unknown): Promise<IteratorResult<ExecutionResult>> {
    await this.events.return?.();
    throw error;
  }
}

/** The subscribe function: the subscription field's source stream, mapped by a SharedResponseStream. */
async function subscribeShared(args: ExecutionArgs, operation: OperationDefinitionNode, key: string): Promise<ExecutionResult | AsyncIterableIterator<ExecutionResult>> {
  const source = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in source)) return source;
  return new SharedResponseStream(source[Symbol.asyncIterator](), args, operation, key);
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
      setSubscribeFn(((subscribeArgs: ExecutionArgs) => subscribeShared(subscribeArgs, operation, key)) as never);
    },
  };
}
