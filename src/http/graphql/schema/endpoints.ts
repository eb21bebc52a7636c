/**
 * Endpoints: their status, spec, versions, the instance catalog, and every
 * lifecycle mutation. Resolvers call the endpoint service (or the request's
 * checked reads) and map results; access is checked there, never here.
 */
import { findInstanceOption, INSTANCE_OPTIONS, type InstanceOption as InstanceOptionRecord } from '../../../domain/instance-catalog.js';
import type { Result } from '../../../domain/result.js';
import { INT4_MAX, parsePageRequest } from '../../../domain/pagination.js';
import { hubModelOf } from '../../../domain/endpoint-spec.js';
import { statusMessage } from '../../../domain/failure-advice.js';
import type { ResolvedModel } from '../../../models/model-store.js';
import type { EndpointAction } from '../../../services/endpoint-service.js';
import type { DownloadProgress as DownloadProgressRecord, EndpointRecord, VersionRecord } from '../../../domain/endpoint.js';
import { builder } from '../builder.js';
import { CONNECTION_ARG_NAMES, connectionArgs, connectionType } from './connection.js';
import { EndpointErrorCode, EndpointPhase, EndpointStatusValue, GpuType, RolloutState } from './enums.js';
import { InvalidArgumentError, InvalidTransitionError, NotFoundError, payload, resultUnion, unwrapOrThrow } from './errors.js';
import { Project, Team, User } from './identity.js';

/** A version seen through its endpoint, which supplies the owner and the live replica counts. */
interface VersionView {
  endpoint: EndpointRecord;
  version: VersionRecord;
}

const InstanceOption = builder.objectRef<InstanceOptionRecord>('InstanceOption').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    gpuType: t.expose('gpuType', { type: GpuType }),
    numGpu: t.exposeInt('numGpu'),
    gpuMemoryGb: t.exposeInt('gpuMemoryGb'),
  }),
});

const DownloadProgress = builder.objectRef<DownloadProgressRecord>('DownloadProgress').implement({
  fields: (t) => ({
    bytesDone: t.float({ resolve: (p) => p.bytesDone }),
    bytesTotal: t.float({ resolve: (p) => p.bytesTotal }),
  }),
});

export const EndpointStatus = builder.objectRef<EndpointRecord>('EndpointStatus').implement({
  fields: (t) => ({
    endpointId: t.exposeID('id'),
    status: t.expose('status', { type: EndpointStatusValue }),
    phase: t.expose('phase', { type: EndpointPhase, nullable: true }),
    errorCode: t.expose('errorCode', { type: EndpointErrorCode, nullable: true }),
    errorMessage: t.string({
      nullable: true,
      description: 'While errorCode is set: what went wrong and what to do about it, safe to show a user.',
      resolve: (e) => statusMessage(e),
    }),
    waitReason: t.string({
      nullable: true,
      description:
        'While the phase is REQUESTING_VIRTUAL_MACHINE: what the endpoint waits for (e.g. "waiting for 1 × H100 80 GB: 2 of 2 in use", or the cluster scheduler\'s message).',
      resolve: (e) => (e.phase === 'REQUESTING_VIRTUAL_MACHINE' ? (e.waitReason ?? null) : null),
    }),
    downloadProgress: t.field({
      type: DownloadProgress,
      nullable: true,
      description: 'Bytes of the model downloaded so far, while the phase is DOWNLOADING_MODEL.',
      resolve: (e) => (e.phase === 'DOWNLOADING_MODEL' ? e.progress : null),
    }),
    currReplicaCnt: t.exposeInt('currReplicaCnt'),
    desiredReplicaCnt: t.exposeInt('desiredReplicaCnt'),
    updatedReplicaCnt: t.exposeInt('updatedReplicaCnt'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

interface ArtifactView {
  name: string;
  resolved: Extract<ResolvedModel, { source: 'wandb' }> | null;
}

const RegistryArtifact = builder.objectRef<ArtifactView>('RegistryArtifact').implement({
  description: 'The W&B registry artifact a version serves.',
  fields: (t) => ({
    name: t.string({ description: 'As requested, e.g. `acme/model/llama:latest`.', resolve: (a) => a.name }),
    version: t.string({
      nullable: true,
      description: 'The concrete version it resolved to when the version first started, e.g. `v3`.',
      resolve: (a) => (a.resolved ? (a.resolved.artifact.split(':').pop() ?? null) : null),
    }),
    digest: t.string({ nullable: true, description: "The artifact version's digest.", resolve: (a) => a.resolved?.digest ?? null }),
    file: t.string({ nullable: true, resolve: (a) => a.resolved?.file ?? null }),
  }),
});

const EndpointSpec = builder.objectRef<VersionView>('EndpointSpec').implement({
  fields: (t) => {
    const spec = (v: VersionView) => v.version.spec;
    const option = (v: VersionView) => findInstanceOption(spec(v).instanceId)!;
    return {
      name: t.string({ resolve: (v) => spec(v).name }),
      gpuType: t.field({ type: GpuType, resolve: (v) => option(v).gpuType }),
      numGpu: t.int({ resolve: (v) => option(v).numGpu }),
      instanceId: t.string({ resolve: (v) => spec(v).instanceId }),
      instanceOption: t.field({ type: InstanceOption, resolve: option }),
      projectId: t.id({ resolve: (v) => v.endpoint.projectId }),
      teamId: t.id({ resolve: (v) => v.endpoint.teamId }),
      creatorId: t.id({ resolve: (v) => v.endpoint.creatorId }),
      hfModelRepo: t.string({
        nullable: true,
        description: 'Null for an endpoint served from a W&B artifact.',
        resolve: (v) => hubModelOf(spec(v)).repo,
      }),
      hfModelRepoRevision: t.string({ nullable: true, resolve: (v) => hubModelOf(spec(v)).revision }),
      wandbArtifact: t.field({
        type: RegistryArtifact,
        nullable: true,
        description: 'Null for an endpoint served from a hub repository.',
        resolve: (v) => {
          const model = spec(v).model;
          if (model.source !== 'wandb') return null;
          const resolved = v.version.model as ResolvedModel | null;
          return { name: model.artifact, resolved: resolved?.source === 'wandb' ? resolved : null };
        },
      }),
      autoscalingMin: t.int({ resolve: (v) => spec(v).autoscaling.minReplica }),
      autoscalingMax: t.int({ resolve: (v) => spec(v).autoscaling.maxReplica }),
      autoscalingCooldown: t.int({ description: 'Seconds.', resolve: (v) => spec(v).autoscaling.cooldownPeriod }),
      maxBatchSize: t.int({ resolve: (v) => spec(v).advanced.maxBatchSize }),
      maxTokenCount: t.int({ resolve: (v) => spec(v).advanced.maxTokenCount }),
      maxTokenCountFromModel: t.boolean({
        description: "True when max_token_count was left out: it follows the model's context (bounded by the instance's memory).",
        resolve: (v) => spec(v).advanced.maxTokenCountAuto === true,
      }),
      maxInputLength: t.int({ resolve: (v) => spec(v).advanced.maxInputLength }),
      tokenizerSkipSpecialTokens: t.boolean({ resolve: (v) => spec(v).advanced.tokenizerSkipSpecialTokens }),
      tokenizerAddSpecialTokens: t.boolean({ resolve: (v) => spec(v).advanced.tokenizerAddSpecialTokens }),
      enableContentLogging: t.boolean({ resolve: (v) => spec(v).advanced.enableContentLogging }),
      currReplicaCnt: t.int({ resolve: (v) => v.endpoint.currReplicaCnt }),
      desiredReplicaCnt: t.int({ resolve: (v) => v.endpoint.desiredReplicaCnt }),
      updatedReplicaCnt: t.int({ resolve: (v) => v.endpoint.updatedReplicaCnt }),
    };
  },
});

const EndpointVersion = builder.objectRef<VersionView>('EndpointVersion').implement({
  fields: (t) => ({
    versionIndex: t.int({ resolve: (v) => v.version.versionIndex }),
    comment: t.string({ nullable: true, resolve: (v) => v.version.comment }),
    rolloutState: t.field({ type: RolloutState, resolve: (v) => v.version.rolloutState }),
    rolledBackFrom: t.int({
      nullable: true,
      description: 'The version this one copies, for a rollback.',
      resolve: (v) => v.version.rolledBackFrom,
    }),
    createdAt: t.field({ type: 'DateTime', resolve: (v) => v.version.createdAt }),
    creator: t.field({ type: User, nullable: true, resolve: (v, _, { loaders }) => loaders.user.load(v.version.creatorId) }),
    spec: t.field({ type: EndpointSpec, resolve: (v) => v }),
  }),
});

const EndpointVersionConnection = connectionType('EndpointVersion', EndpointVersion);

export const Endpoint = builder.objectRef<EndpointRecord>('Endpoint').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.string({ resolve: (e) => e.current.spec.name }),
    status: t.field({ type: EndpointStatus, resolve: (e) => e }),
    spec: t.field({ type: EndpointSpec, resolve: (e) => ({ endpoint: e, version: e.current }) }),
    currentVersion: t.field({ type: EndpointVersion, resolve: (e) => ({ endpoint: e, version: e.current }) }),
    versions: t.field({
      type: EndpointVersionConnection,
      args: {
        ...connectionArgs(t),
        newestFirst: t.arg.boolean({
          defaultValue: false,
          description: 'Newest version first (a history view); `after` then pages towards older versions.',
        }),
      },
      resolve: async (e, args, { services }) => {
        const newestFirst = args.newestFirst === true;
        const start = newestFirst ? INT4_MAX : -1;
        const request = unwrapOrThrow(parsePageRequest('ver', { cursor: args.after, limit: args.first }, CONNECTION_ARG_NAMES, start));
        const page = await services.endpoints.versionPage(e.id, request, newestFirst);
        return { ...page, items: page.items.map((version) => ({ endpoint: e, version })) };
      },
    }),
    project: t.field({ type: Project, resolve: async (e, _, { loaders }) => (await loaders.project.load(e.projectId))! }),
    team: t.field({ type: Team, resolve: async (e, _, { loaders }) => (await loaders.team.load(e.teamId))! }),
    creator: t.field({ type: User, nullable: true, resolve: (e, _, { loaders }) => loaders.user.load(e.creatorId) }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const EndpointConnection = connectionType('Endpoint', Endpoint);

builder.objectField(Project, 'endpoints', (t) =>
  t.field({
    type: EndpointConnection,
    args: connectionArgs(t),
    resolve: async (project, args, { principal, services }) =>
      unwrapOrThrow(
        await services.endpoints.list(principal, { projectId: project.id, cursor: args.after, limit: args.first }, CONNECTION_ARG_NAMES),
      ),
  }),
);

builder.queryFields((t) => ({
  endpoint: t.field({
    type: Endpoint,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_, { id }, { principal, loaders }) => (await loaders.endpointFor(principal, String(id))) ?? null,
  }),
  endpoints: t.field({
    type: EndpointConnection,
    description: "A project's endpoints; without projectId, the acting team's.",
    args: { projectId: t.arg.id(), ...connectionArgs(t) },
    resolve: async (_, args, { principal, services }) =>
      unwrapOrThrow(
        await services.endpoints.list(
          principal,
          { projectId: args.projectId ? String(args.projectId) : null, cursor: args.after, limit: args.first },
          CONNECTION_ARG_NAMES,
        ),
      ),
  }),
  instanceOptions: t.field({ type: [InstanceOption], resolve: () => [...INSTANCE_OPTIONS] }),
}));

// Inputs mirror the REST bodies, in GraphQL's camelCase.
export const AutoscalingPolicyInput = builder.inputType('AutoscalingPolicyInput', {
  fields: (t) => ({
    minReplica: t.int({ description: 'From 0 to maxReplica; 0 lets the endpoint sleep when idle. @default 0' }),
    maxReplica: t.int({ description: 'At most 10. @default 1' }),
    cooldownPeriod: t.int({ description: 'Seconds without requests before scaling down. @default 300' }),
  }),
});

export const SimplescaleInput = builder.inputType('SimplescaleInput', {
  description: 'A fixed replica count: min = max = replicas.',
  fields: (t) => ({ replicas: t.int({ required: true }) }),
});

const AdvancedConfigInput = builder.inputType('AdvancedConfigInput', {
  fields: (t) => ({
    tokenizerSkipSpecialTokens: t.boolean({ description: '@default true' }),
    tokenizerAddSpecialTokens: t.boolean({ description: '@default false' }),
    maxBatchSize: t.int({ description: 'Sequences one replica decodes at once. @default 8' }),
    maxTokenCount: t.int({
      description:
        "Most tokens, prompt plus completion, of one request. @default the model's context, bounded by the instance's memory (resolved at the first start)",
    }),
    maxInputLength: t.int({ description: 'Most prompt tokens. @default 2048, or maxTokenCount when smaller' }),
    enableContentLogging: t.boolean({ description: '@default false' }),
  }),
});

const CreateEndpointInput = builder.inputType('CreateEndpointInput', {
  fields: (t) => ({
    projectId: t.id({ required: true }),
    name: t.string({ required: true }),
    instanceOptionId: t.string({ required: true }),
    hfModelRepo: t.string({ required: true }),
    hfModelRepoRevision: t.string(),
    advanced: t.field({ type: AdvancedConfigInput, required: true }),
    autoscalingPolicy: t.field({ type: AutoscalingPolicyInput }),
    simplescale: t.field({ type: SimplescaleInput }),
    initialVersionComment: t.string(),
  }),
});

const UpdateEndpointInput = builder.inputType('UpdateEndpointInput', {
  description: 'Only the fields given change. Every update, an empty one included, appends one version.',
  fields: (t) => ({
    name: t.string(),
    instanceOptionId: t.string(),
    hfModelRepo: t.string(),
    hfModelRepoRevision: t.string({ description: 'null returns to the default branch.' }),
    advanced: t.field({ type: AdvancedConfigInput }),
    autoscalingPolicy: t.field({ type: AutoscalingPolicyInput }),
    simplescale: t.field({ type: SimplescaleInput }),
    newVersionComment: t.string(),
  }),
});

/** Turns a GraphQL input into the REST body shape the shared validators read (snake_case `advanced`). */
export function toRestBody(input: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    if (value === undefined) continue;
    if (key === 'advanced' && value && typeof value === 'object') {
      body.advanced = Object.fromEntries(
        Object.entries(value)
          .filter(([, v]) => v !== undefined && v !== null)
          .map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v]),
      );
    } else {
      body[key] = value;
    }
  }
  return body;
}

const EndpointPayload = (name: string) =>
  builder.objectRef<{ endpoint: EndpointRecord }>(name).implement({
    fields: (t) => ({ endpoint: t.field({ type: Endpoint, resolve: (p) => p.endpoint }) }),
  });

const withEndpoint = (result: Result<EndpointRecord>) => payload(result, (endpoint) => ({ endpoint }));

builder.mutationFields((t) => ({
  createEndpoint: t.field({
    type: resultUnion('CreateEndpointResult', EndpointPayload('CreateEndpointSuccess'), [NotFoundError, InvalidArgumentError]),
    description: 'Creates an endpoint from a hub model; it starts INITIALIZING.',
    args: { input: t.arg({ type: CreateEndpointInput, required: true }) },
    resolve: async (_, { input }, { principal, services }) => withEndpoint(await services.endpoints.create(principal, toRestBody(input))),
  }),
  updateEndpoint: t.field({
    type: resultUnion('UpdateEndpointResult', EndpointPayload('UpdateEndpointSuccess'), [
      NotFoundError,
      InvalidArgumentError,
      InvalidTransitionError,
    ]),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateEndpointInput, required: true }) },
    resolve: async (_, { id, input }, { principal, services }) =>
      withEndpoint(await services.endpoints.update(principal, String(id), toRestBody(input))),
  }),
  rollbackEndpoint: t.field({
    type: resultUnion('RollbackEndpointResult', EndpointPayload('RollbackEndpointSuccess'), [
      NotFoundError,
      InvalidArgumentError,
      InvalidTransitionError,
    ]),
    description: 'Appends a new version whose spec copies version `versionIndex`.',
    args: { id: t.arg.id({ required: true }), versionIndex: t.arg.int({ required: true }) },
    resolve: async (_, { id, versionIndex }, { principal, services }) =>
      withEndpoint(await services.endpoints.rollback(principal, String(id), versionIndex)),
  }),
  deleteEndpoint: t.field({
    type: resultUnion(
      'DeleteEndpointResult',
      builder
        .objectRef<{ endpointId: string }>('DeleteEndpointSuccess')
        .implement({ fields: (f) => ({ endpointId: f.exposeID('endpointId') }) }),
      [NotFoundError],
    ),
    description: 'Stops all replicas and deletes the endpoint.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_, { id }, { principal, services }) =>
      payload(await services.endpoints.delete(principal, String(id)), () => ({ endpointId: String(id) })),
  }),
}));

const ACTIONS: Record<EndpointAction, { field: string; type: string; description: string }> = {
  sleep: {
    field: 'sleepEndpoint',
    type: 'SleepEndpoint',
    description: 'Stops serving and keeps the configuration. From RUNNING, READY or UPDATING.',
  },
  wake: { field: 'wakeEndpoint', type: 'WakeEndpoint', description: 'Starts a SLEEPING endpoint again (AWAKING).' },
  restart: { field: 'restartEndpoint', type: 'RestartEndpoint', description: 'Re-initializes a FAILED or TERMINATED endpoint.' },
  terminate: {
    field: 'terminateEndpoint',
    type: 'TerminateEndpoint',
    description: 'Stops all inference and releases the GPUs; the configuration is kept.',
  },
};

for (const [action, names] of Object.entries(ACTIONS) as [EndpointAction, (typeof ACTIONS)[EndpointAction]][]) {
  builder.mutationField(names.field, (t) =>
    t.field({
      type: resultUnion(`${names.type}Result`, EndpointPayload(`${names.type}Success`), [NotFoundError, InvalidTransitionError]),
      description: names.description,
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_, { id }, { principal, services }) => withEndpoint(await services.endpoints.act(principal, String(id), action)),
    }),
  );
}
