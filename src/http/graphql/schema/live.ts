/**
 * Live status for front-ends that must not poll: `endpointStatus` emits an
 * endpoint's current status, then every change; `endpointEvents` streams every
 * event of a project's endpoints. Both work across gateway processes (the
 * events come through PostgreSQL), resume after a given event id, and are
 * served over graphql-ws and SSE.
 */
import { GraphQLError } from 'graphql';
import {
  ENDPOINT_EVENT_TYPES,
  EVENT_ID_RULE,
  parseEventId,
  type EndpointEventRecord,
  type EndpointRecord,
  type EventScope,
  type ReplicaCounts,
} from '../../../domain/endpoint.js';
import { invalidInputError } from '../../../domain/errors.js';
import { progressVersion } from '../../../live/event-hub.js';
import { SubscriptionOverflowError, type LiveEventStream, type LiveItem } from '../../../live/event-stream.js';
import type { GraphQLContext } from '../context.js';
import { builder } from '../builder.js';
import { EndpointStatus } from './endpoints.js';
import { EndpointErrorCode, EndpointPhase, EndpointStatusValue } from './enums.js';

const EndpointEventType = builder.enumType('EndpointEventType', {
  values: ENDPOINT_EVENT_TYPES,
});

const ReplicaCounts = builder.objectRef<ReplicaCounts>('ReplicaCounts').implement({
  fields: (t) => ({
    currReplicaCnt: t.exposeInt('currReplicaCnt'),
    desiredReplicaCnt: t.exposeInt('desiredReplicaCnt'),
    updatedReplicaCnt: t.exposeInt('updatedReplicaCnt'),
  }),
});

export const EndpointEvent = builder.objectRef<EndpointEventRecord>('EndpointEvent').implement({
  description: 'One entry of the append-only event log. Its `id` is the position to resume from (`after`).',
  fields: (t) => ({
    id: t.exposeID('id'),
    type: t.expose('type', { type: EndpointEventType }),
    endpointId: t.exposeID('endpointId'),
    projectId: t.exposeID('projectId'),
    status: t.expose('status', { type: EndpointStatusValue, nullable: true }),
    phase: t.expose('phase', { type: EndpointPhase, nullable: true }),
    errorCode: t.expose('errorCode', { type: EndpointErrorCode, nullable: true }),
    versionIndex: t.exposeInt('versionIndex', { nullable: true }),
    replicas: t.field({
      type: ReplicaCounts,
      nullable: true,
      resolve: (e) => (e.type === 'REPLICAS_CHANGED' && e.detail ? (e.detail as unknown as ReplicaCounts) : null),
    }),
    cause: t.exposeString('cause', { description: '`api:<action>` for a user action, `controller:<step>` for the controller.' }),
    actorId: t.exposeID('actorId', { nullable: true }),
    message: t.string({
      nullable: true,
      description: 'Why it failed, for a failure.',
      resolve: (e) => (typeof e.detail?.message === 'string' ? e.detail.message : null),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

interface StatusUpdate {
  /** Null for the first update (the current status) and for download progress. */
  event: EndpointEventRecord | null;
  status: EndpointRecord;
}

/**
 * One update object per (event, snapshot), shared by every subscriber that
 * emits it, so that subscribers asking the same thing share its execution
 * (`../shared-execution.ts`).
 */
const sharedUpdates = new WeakMap<EndpointRecord, Map<string, StatusUpdate>>();
function sharedUpdate(event: EndpointEventRecord | null, status: EndpointRecord): StatusUpdate {
  let byEvent = sharedUpdates.get(status);
  if (!byEvent) sharedUpdates.set(status, (byEvent = new Map()));
  const key = event?.id ?? '';
  let update = byEvent.get(key);
  if (!update) byEvent.set(key, (update = { event, status }));
  return update;
}

const EndpointStatusUpdate = builder.objectRef<StatusUpdate>('EndpointStatusUpdate').implement({
  fields: (t) => ({
    event: t.field({ type: EndpointEvent, nullable: true, resolve: (u) => u.event }),
    status: t.field({ type: EndpointStatus, resolve: (u) => u.status }),
  }),
});

function overflowError(error: SubscriptionOverflowError): GraphQLError {
  return new GraphQLError(error.message, { extensions: { code: 'SUBSCRIPTION_OVERFLOW', after: error.lastEventId } });
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/** What one live item becomes: a value (`last` ends the stream after it), nothing, or the end. */
type Mapped<T> = { value: T; last?: boolean } | null | 'end';

/**
 * A subscription's values from live events. `begin` checks access and may
 * give a first value; `map` turns each live item into a value or none. An
 * async iterator, not a generator: when the client goes away, `return()`
 * unsubscribes at once instead of at the endpoint's next event.
 */
abstract class LiveSubscription<T> implements AsyncIterableIterator<T> {
  private items: LiveEventStream | undefined;
  private begun = false;
  private ended = false;

  constructor(protected readonly context: GraphQLContext) {}

  protected abstract begin(): Promise<{ items: LiveEventStream; first: T | null }>;
  protected abstract map(item: LiveItem): Mapped<T> | Promise<Mapped<T>>;

  protected stream(scope: EventScope, after: string | null): LiveEventStream {
    const { hub, bufferSize, maxLagMs } = this.context.live;
    return hub.stream(scope, { after, bufferSize, maxLagMs });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<T>> {
    try {
      if (!this.begun) {
        this.begun = true;
        const { items, first } = await this.begin();
        this.items = items;
        if (this.ended) return this.end();
        if (first !== null) return { done: false, value: first };
      }
      while (!this.ended) {
        const step = await this.items!.next();
        if (step.done || this.ended) break;
        const pending = this.map(step.value);
        const mapped = pending instanceof Promise ? await pending : pending;
        if (mapped === 'end') break;
        if (mapped) {
          if (mapped.last) this.end();
          return { done: false, value: mapped.value };
        }
      }
      return this.end();
    } catch (error) {
      this.end();
      // A subscriber cut off for lagging gets a GraphQL error that says where to resume.
      if (error instanceof SubscriptionOverflowError) throw overflowError(error);
      throw error;
    }
  }

  return(): Promise<IteratorResult<T>> {
    return Promise.resolve(this.end());
  }

  private end(): IteratorReturnResult<undefined> {
    this.ended = true;
    void this.items?.return();
    return DONE;
  }
}

class EndpointStatusSubscription extends LiveSubscription<StatusUpdate> {
  constructor(
    context: GraphQLContext,
    private readonly endpointId: string,
    private readonly after: string | null,
  ) {
    super(context);
  }

  protected async begin() {
    const { principal, services } = this.context;
    const scope = { endpointId: this.endpointId };
    // The position is taken before the status is read: a change in between is replayed, never lost.
    const position = this.after ?? (await services.endpoints.latestEventId(this.endpointId));
    const found = await services.endpoints.get(principal, this.endpointId);
    if (found.type === 'error') throw new GraphQLError(found.error.message, { extensions: { code: 'NOT_FOUND' } });
    return { items: this.stream(scope, position), first: this.after === null ? { event: null, status: found.value } : null };
  }

  /**
   * From here on, the hub's shared snapshots describe the endpoint to every
   * subscriber. The version comes from the hub (the event, or the progress
   * announcement), so every subscriber of a change asks for the same one: it
   * is read once, and never answered with a snapshot of an earlier moment.
   */
  protected map(item: LiveItem): Mapped<StatusUpdate> | Promise<Mapped<StatusUpdate>> {
    const version = item.kind === 'event' ? item.event.id : progressVersion(item.seq);
    const snapshot = this.context.live.hub.snapshot(this.endpointId, version);
    return snapshot instanceof Promise ? snapshot.then((status) => this.update(item, status)) : this.update(item, snapshot);
  }

  private update(item: LiveItem, status: EndpointRecord | undefined): Mapped<StatusUpdate> {
    if (!status) return 'end'; // the endpoint row is gone: nothing more to report
    if (item.kind === 'event') return { value: sharedUpdate(item.event, status), last: item.event.type === 'DELETED' };
    return status.phase === 'DOWNLOADING_MODEL' ? { value: sharedUpdate(null, status) } : null;
  }
}

class EndpointEventsSubscription extends LiveSubscription<EndpointEventRecord> {
  constructor(
    context: GraphQLContext,
    private readonly projectId: string,
    private readonly after: string | null,
  ) {
    super(context);
  }

  protected async begin() {
    const project = await this.context.loaders.projectFor(this.context.principal, this.projectId);
    if (!project) {
      throw new GraphQLError(`project '${this.projectId}' not found`, { extensions: { code: 'NOT_FOUND' } });
    }
    return { items: this.stream({ projectId: project.id }, this.after), first: null };
  }

  protected map(item: LiveItem): Mapped<EndpointEventRecord> {
    return item.kind === 'event' ? { value: item.event } : null;
  }
}

/** The `after` argument: an event id, checked before the subscription starts (a 400 naming it, never a database error). */
function afterArg(after: string | number | null | undefined): string | null {
  if (after === null || after === undefined) return null;
  const id = parseEventId(String(after));
  if (id === undefined) throw invalidInputError([{ field: 'after', message: EVENT_ID_RULE }]);
  return id;
}

builder.subscriptionFields((t) => ({
  endpointStatus: t.field({
    type: EndpointStatusUpdate,
    description:
      "Emits the endpoint's current status, then every change: status, phase, error code, download progress and replica counts. " +
      'With `after` (an event id), the changes since that event come first. Completes when the endpoint is deleted.',
    args: { endpointId: t.arg.id({ required: true }), after: t.arg.id() },
    subscribe: (_, { endpointId, after }, context) => new EndpointStatusSubscription(context, String(endpointId), afterArg(after)),
    resolve: (update) => update as StatusUpdate,
  }),
  endpointEvents: t.field({
    type: EndpointEvent,
    description:
      'Every event of every endpoint of a project: created, status changed, version added, replicas changed, deleted. With `after`, the missed ones come first.',
    args: { projectId: t.arg.id({ required: true }), after: t.arg.id() },
    subscribe: (_, { projectId, after }, context) => new EndpointEventsSubscription(context, String(projectId), afterArg(after)),
    resolve: (event) => event as EndpointEventRecord,
  }),
}));
