/**
 * An endpoint's replicas, their engine logs and its event history:
 * `Endpoint.replicas` (state, version, where each runs, since when, and the
 * replicas that failed lately), `Endpoint.logs` (a replica's last log lines),
 * `Endpoint.events` (paged like `versions`), and the `replicaLogs`
 * subscription, which follows a replica's log live. Access is checked by
 * the replica service, as for the endpoint itself.
 */
import { REPLICA_STATES } from '../../../domain/replica.js';
import type { ReplicaList, ReplicaView } from '../../../services/replica-service.js';
import type { GraphQLContext } from '../context.js';
import { builder } from '../builder.js';
import { CONNECTION_ARG_NAMES, connectionArgs, connectionType } from './connection.js';
import { Endpoint } from './endpoints.js';
import { GpuType } from './enums.js';
import { unwrapOrThrow } from './errors.js';
import { EndpointEvent } from './live.js';

const ReplicaState = builder.enumType('ReplicaState', {
  description: 'STARTING, READY (serving), DRAINING (finishing its requests), STOPPED, or FAILED (its engine died or did not start).',
  values: REPLICA_STATES,
});

/** When the replica entered its current state. */
function since(r: ReplicaView): Date {
  if (r.state === 'STOPPED' || r.state === 'FAILED') return r.stoppedAt ?? r.createdAt;
  return r.state === 'STARTING' ? r.createdAt : (r.readyAt ?? r.createdAt);
}

export const Replica = builder.objectRef<ReplicaView>('Replica').implement({
  description: 'One running copy of an endpoint, as its users see it: never its address, process, pod or token.',
  fields: (t) => ({
    id: t.exposeID('id'),
    state: t.field({ type: ReplicaState, resolve: (r) => r.state }),
    versionIndex: t.exposeInt('versionIndex', { description: 'The endpoint version it serves.' }),
    runtime: t.exposeString('runtime', { description: '`local` (a process of a gateway machine) or `kubernetes` (a pod).' }),
    node: t.exposeString('node', { description: 'Where it runs: the machine (local) or `kubernetes/<namespace>`.' }),
    gpuType: t.field({ type: GpuType, resolve: (r) => r.gpuType }),
    numGpu: t.exposeInt('numGpu'),
    since: t.field({ type: 'DateTime', description: 'When it entered its current state.', resolve: since }),
    createdAt: t.field({ type: 'DateTime', resolve: (r) => r.createdAt }),
    readyAt: t.field({ type: 'DateTime', nullable: true, resolve: (r) => r.readyAt }),
    endedAt: t.field({ type: 'DateTime', nullable: true, description: 'When it stopped or failed.', resolve: (r) => r.stoppedAt }),
    lastError: t.string({ nullable: true, description: 'Why it failed or stopped, when it did.', resolve: (r) => r.lastError }),
  }),
});

const ReplicaFailures = builder.objectRef<ReplicaList['failures']>('ReplicaFailures').implement({
  description: "The endpoint's replicas that failed within the window (the crash policy's: 5 failures in it fail the endpoint).",
  fields: (t) => ({
    windowSeconds: t.exposeInt('windowSeconds'),
    count: t.exposeInt('count'),
    last: t.field({ type: Replica, nullable: true, description: 'The last that failed, with why.', resolve: (f) => f.last }),
  }),
});

const EndpointReplicas = builder.objectRef<ReplicaList>('EndpointReplicas').implement({
  fields: (t) => ({
    nodes: t.field({
      type: [Replica],
      description: 'The live replicas (oldest first), then those that ended within the last day (newest first, at most 20).',
      resolve: (l) => l.replicas,
    }),
    failures: t.field({ type: ReplicaFailures, resolve: (l) => l.failures }),
  }),
});

interface LogView {
  replicaId: string;
  lines: string[];
}

const EngineLog = builder.objectRef<LogView>('EngineLog').implement({
  description: "Lines of a replica's engine log. They carry no request content (see docs/logs-and-events.md).",
  fields: (t) => ({
    replicaId: t.exposeID('replicaId'),
    lines: t.exposeStringList('lines'),
  }),
});

const EndpointEventConnection = connectionType('EndpointEventHistory', EndpointEvent);

const LOG_NAMES = { replica: 'replicaId', tail: 'tail' };

builder.objectFields(Endpoint, (t) => ({
  replicas: t.field({
    type: EndpointReplicas,
    resolve: (e, _, { services }) => services.replicas.listVisible(e.id),
  }),
  logs: t.field({
    type: EngineLog,
    description:
      "The last `tail` lines of a replica's engine log (the newest replica's, a READY one first, without `replicaId`). " +
      'NOT_FOUND: no such replica; CONFLICT: its log cannot be read from this gateway (the message says why).',
    args: {
      replicaId: t.arg.id(),
      tail: t.arg.int({ description: 'Lines from the end, 0 to 10000. @default 100' }),
    },
    resolve: async (e, args, { principal, services }) => {
      const request = { replica: args.replicaId ? String(args.replicaId) : null, tail: args.tail };
      const { replica, lines } = unwrapOrThrow(await services.replicas.log(principal, e.id, request, LOG_NAMES));
      return { replicaId: replica.id, lines };
    },
  }),
  events: t.field({
    type: EndpointEventConnection,
    description: "The endpoint's event history (status changes, versions, replica counts, retries), paged like `versions`.",
    args: {
      ...connectionArgs(t),
      newestFirst: t.arg.boolean({ defaultValue: false, description: 'Newest event first; `after` then pages towards older ones.' }),
    },
    resolve: async (e, args, { services }) => {
      const newestFirst = args.newestFirst === true;
      const query = { cursor: args.after, limit: args.first, newestFirst };
      const page = unwrapOrThrow(services.replicas.parseEventPage(query, CONNECTION_ARG_NAMES));
      return services.replicas.eventPage(e.id, page, newestFirst);
    },
  }),
}));

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/** Follows a replica's log; `return()` (the client went away) stops the follow at once. */
class ReplicaLogSubscription implements AsyncIterableIterator<LogView> {
  private readonly abort = new AbortController();
  private source: AsyncIterator<string[]> | undefined;
  private replicaId = '';

  constructor(
    private readonly context: GraphQLContext,
    private readonly endpointId: string,
    private readonly request: { replica: string | null; tail: number | null | undefined },
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<LogView>> {
    if (!this.source) {
      const { principal, services } = this.context;
      const followed = await services.replicas.follow(principal, this.endpointId, this.request, this.abort.signal, LOG_NAMES);
      const { replica, chunks } = unwrapOrThrow(followed);
      this.replicaId = replica.id;
      this.source = chunks[Symbol.asyncIterator]();
    }
    if (this.abort.signal.aborted) return DONE;
    const step = await this.source.next();
    return step.done || this.abort.signal.aborted ? DONE : { done: false, value: { replicaId: this.replicaId, lines: step.value } };
  }

  return(): Promise<IteratorResult<LogView>> {
    this.abort.abort();
    void this.source?.return?.();
    return Promise.resolve(DONE);
  }
}

builder.subscriptionFields((t) => ({
  replicaLogs: t.field({
    type: EngineLog,
    description:
      "Follows a replica's engine log: its last `tail` lines first (none by default), then new lines as the engine writes them. " +
      "Without `replicaId`, the endpoint's newest replica. Ends when the log does (a pod's, with its container).",
    args: {
      endpointId: t.arg.id({ required: true }),
      replicaId: t.arg.id(),
      tail: t.arg.int({ description: 'Lines from the end first, 0 to 10000. @default 0' }),
    },
    subscribe: (_, args, context) =>
      new ReplicaLogSubscription(context, String(args.endpointId), {
        replica: args.replicaId ? String(args.replicaId) : null,
        tail: args.tail ?? 0,
      }),
    resolve: (view) => view as LogView,
  }),
}));
