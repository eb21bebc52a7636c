/**
 * Live status for front-ends that must not poll: `endpointStatus` emits an
 * endpoint's current status, then every change; `endpointEvents` streams every
 * event of a project's endpoints. Both work across gateway processes (the
 * events come through PostgreSQL), resume after a given event id, and are
 * served over graphql-ws and SSE.
 */
import { GraphQLError } from 'graphql';
import { latestEventId, liveEvents, SubscriptionOverflowError, type LiveItem } from '../../../live/event-stream.js';
import type { EndpointEventRecord, EndpointRecord } from '../../../storage/endpoints-repository.js';
import { canAccessTeam } from '../../../services/principal.js';
import { builder } from '../builder.js';
import { EndpointStatus } from './endpoints.js';
import { EndpointErrorCode, EndpointPhase, EndpointStatusValue } from './enums.js';

const EndpointEventType = builder.enumType('EndpointEventType', {
  values: ['CREATED', 'STATUS_CHANGED', 'VERSION_ADDED', 'REPLICAS_CHANGED', 'DELETED'] as const,
});

interface Counts {
  currReplicaCnt: number;
  desiredReplicaCnt: number;
  updatedReplicaCnt: number;
}

const ReplicaCounts = builder.objectRef<Counts>('ReplicaCounts').implement({
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
      resolve: (e) => (e.type === 'REPLICAS_CHANGED' && e.detail ? (e.detail as unknown as Counts) : null),
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

const EndpointStatusUpdate = builder.objectRef<StatusUpdate>('EndpointStatusUpdate').implement({
  fields: (t) => ({
    event: t.field({ type: EndpointEvent, nullable: true, resolve: (u) => u.event }),
    status: t.field({ type: EndpointStatus, resolve: (u) => u.status }),
  }),
});

function overflowError(error: SubscriptionOverflowError): GraphQLError {
  return new GraphQLError(error.message, { extensions: { code: 'SUBSCRIPTION_OVERFLOW', after: error.lastEventId } });
}

async function* guardOverflow<T>(items: AsyncGenerator<T>): AsyncGenerator<T> {
  try {
    yield* items;
  } catch (error) {
    if (error instanceof SubscriptionOverflowError) throw overflowError(error);
    throw error;
  }
}

builder.subscriptionFields((t) => ({
  endpointStatus: t.field({
    type: EndpointStatusUpdate,
    description:
      "Emits the endpoint's current status, then every change: status, phase, error code, download progress and replica counts. " +
      'With `after` (an event id), the changes since that event come first. Completes when the endpoint is deleted.',
    args: { endpointId: t.arg.id({ required: true }), after: t.arg.id() },
    subscribe: async function* (_, { endpointId, after }, { principal, services, live }) {
      const id = String(endpointId);
      // The position is taken before the status is read: a change in between is replayed, never lost.
      const position = after == null ? await latestEventId(services.db, { endpointId: id }) : String(after);
      {
        const found = await services.endpoints.get(principal, id);
        if (found.type === 'error') throw new GraphQLError(found.error.message, { extensions: { code: 'NOT_FOUND' } });
        if (after == null) yield { event: null, status: found.value };
      }
      // From here on, the hub's shared snapshots describe the endpoint to every subscriber.
      let version = '';
      const items: AsyncGenerator<LiveItem> = liveEvents(live.hub, services.db, { endpointId: id }, { after: position, bufferSize: live.bufferSize, maxLagMs: live.maxLagMs });
      for await (const item of guardOverflow(items)) {
        version = item.kind === 'event' ? item.event.id : `${version}+`;
        const status = await live.hub.snapshot(id, version);
        if (!status) return; // the endpoint row is gone: nothing more to report
        if (item.kind === 'event') {
          yield { event: item.event, status };
          if (item.event.type === 'DELETED') return;
        } else if (status.phase === 'DOWNLOADING_MODEL') {
          yield { event: null, status };
        }
      }
    },
    resolve: (update) => update as StatusUpdate,
  }),
  endpointEvents: t.field({
    type: EndpointEvent,
    description: "Every event of every endpoint of a project: created, status changed, version added, replicas changed, deleted. With `after`, the missed ones come first.",
    args: { projectId: t.arg.id({ required: true }), after: t.arg.id() },
    subscribe: async function* (_, { projectId, after }, { principal, loaders, services, live }) {
      const project = await loaders.project.load(String(projectId));
      if (!project || !canAccessTeam(principal, project.teamId)) {
        throw new GraphQLError(`project '${String(projectId)}' not found`, { extensions: { code: 'NOT_FOUND' } });
      }
      const items = liveEvents(live.hub, services.db, { projectId: project.id }, { after: after == null ? null : String(after), bufferSize: live.bufferSize, maxLagMs: live.maxLagMs });
      for await (const item of guardOverflow(items)) {
        if (item.kind === 'event') yield item.event;
      }
    },
    resolve: (event) => event as EndpointEventRecord,
  }),
}));
