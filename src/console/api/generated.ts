/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';
export type AcceleratorInput = {
  /** 1, 2, 4 or 8. @default 1 */
  count?: number | null | undefined;
  /** @default H100 */
  type?: GpuType | null | undefined;
};

export type AdvancedConfigInput = {
  /** @default false */
  enableContentLogging?: boolean | null | undefined;
  /** Sequences one replica decodes at once. @default 8 */
  maxBatchSize?: number | null | undefined;
  /** Most prompt tokens. @default 2048, or maxTokenCount when smaller */
  maxInputLength?: number | null | undefined;
  /** Most tokens, prompt plus completion, of one request. @default the model's context, bounded by the instance's memory (resolved at the first start) */
  maxTokenCount?: number | null | undefined;
  /** @default false */
  tokenizerAddSpecialTokens?: boolean | null | undefined;
  /** @default true */
  tokenizerSkipSpecialTokens?: boolean | null | undefined;
};

/** An endpoint from a W&B registry artifact version; the same fields as POST /dedicated/endpoint/wandb-artifact-create. */
export type ArtifactEndpointInput = {
  accelerator?: AcceleratorInput | null | undefined;
  autoscalingPolicy?: AutoscalingPolicyInput | null | undefined;
  /** A call with a key that already created an endpoint in the project rolls that endpoint out instead. */
  idempotencyKey?: string | null | undefined;
  /** Generated from the artifact when omitted. */
  name?: string | null | undefined;
  /** Required with idempotencyKey; without both, a new project is created in the acting team. */
  projectId?: string | null | undefined;
  simplescale?: SimplescaleInput | null | undefined;
  /** `<org>/<registry>/<name>:<version>`, the version `v3` or an alias such as `latest`. */
  wandbArtifactVersionName: string;
};

export type AutoscalingPolicyInput = {
  /** Seconds without requests before scaling down. @default 300 */
  cooldownPeriod?: number | null | undefined;
  /** At most 10. @default 1 */
  maxReplica?: number | null | undefined;
  /** From 0 to maxReplica; 0 lets the endpoint sleep when idle. @default 0 */
  minReplica?: number | null | undefined;
};

/** An OpenAI chat-completion request; `model` is the endpoint id. */
export type ChatCompletionInput = {
  /** Passed to the chat template; `enable_thinking` toggles reasoning. */
  chatTemplateKwargs?: unknown;
  /** OpenAI `frequency_penalty`, −2 to 2. @default 0 */
  frequencyPenalty?: number | null | undefined;
  /** Streams a final chunk with the token usage. @default false */
  includeUsage?: boolean | null | undefined;
  /** OpenAI `logit_bias`: token ids (as strings) to a bias from −100 to 100; −100 bans the token. */
  logitBias?: unknown;
  /** Return each answer token's log probability. @default false */
  logprobs?: boolean | null | undefined;
  maxTokens?: number | null | undefined;
  messages: Array<ChatMessageInput>;
  /** Drop tokens less likely than min_p × the most likely one. @default 0 */
  minP?: number | null | undefined;
  model: string;
  /** Whether an answer may call several tools. @default true */
  parallelToolCalls?: boolean | null | undefined;
  /** OpenAI `presence_penalty`, −2 to 2. @default 0 */
  presencePenalty?: number | null | undefined;
  /** Above 0, at most 10; 1 is none. @default 1 */
  repetitionPenalty?: number | null | undefined;
  /** OpenAI `response_format`: `{type: "json_object"}`, or `{type: "json_schema", json_schema: {name, schema}}`; the JSON is enforced while the answer is generated. @default text */
  responseFormat?: unknown;
  /** OpenAI `seed`: an integer within ±(2^53 − 1), as the REST route takes (a 32-bit Int is one). */
  seed?: number | null | undefined;
  stop?: Array<string> | null | undefined;
  temperature?: number | null | undefined;
  /** OpenAI `tool_choice`: "none", "auto", "required", or `{type: "function", function: {name}}`. @default auto */
  toolChoice?: unknown;
  /** OpenAI `tools`: `[{type: "function", function: {name, description, parameters}}]`, the tools the model may call. */
  tools?: unknown;
  /** Sample from the k most likely tokens only. @default 0 (no filtering) */
  topK?: number | null | undefined;
  /** With logprobs: the most likely alternatives per token, 0 to 20. @default 0 */
  topLogprobs?: number | null | undefined;
  topP?: number | null | undefined;
};

export type ChatMessageInput = {
  /** Required, except in an assistant message that only calls tools. */
  content?: string | null | undefined;
  /** system, user, assistant or tool */
  role: string;
  /** A tool message: the id of the call it answers. */
  toolCallId?: string | null | undefined;
  /** An assistant message's calls, OpenAI `tool_calls`: `[{id, type: "function", function: {name, arguments}}]`. */
  toolCalls?: unknown;
};

export type CreateEndpointInput = {
  advanced: AdvancedConfigInput;
  autoscalingPolicy?: AutoscalingPolicyInput | null | undefined;
  hfModelRepo: string;
  hfModelRepoRevision?: string | null | undefined;
  initialVersionComment?: string | null | undefined;
  instanceOptionId: string;
  name: string;
  projectId: string;
  simplescale?: SimplescaleInput | null | undefined;
};

/** Why an endpoint failed, or why its last rollout failed. */
export type EndpointErrorCode =
  | 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR'
  | 'INFERENCE_ENGINE_MEMORY_ERROR'
  | 'INFERENCE_ENGINE_METERING_CLIENT_CONFIG_ERROR'
  | 'INFERENCE_ENGINE_UNKNOWN_ERROR'
  | 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR'
  | 'WORKLOAD_INIT_DOWNLOAD_ERROR'
  | 'WORKLOAD_INIT_GRPC_ERROR'
  | 'WORKLOAD_INIT_HF_WANDB_API_ERROR'
  | 'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR'
  | 'WORKLOAD_INIT_INVALID_TOKEN_ERROR'
  | 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR'
  | 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR'
  | 'WORKLOAD_INIT_SETTINGS_ERROR'
  | 'WORKLOAD_INIT_UNKNOWN_ERROR';

export type EndpointEventType =
  | 'CREATED'
  | 'DELETED'
  | 'REPLICAS_CHANGED'
  | 'RETRYING'
  | 'STATUS_CHANGED'
  | 'VERSION_ADDED';

/** The step of a start (create, restart or wake) in progress. */
export type EndpointPhase =
  | 'DOWNLOADING_MODEL'
  | 'ENGINE_INITIALIZING'
  | 'REQUESTING_VIRTUAL_MACHINE';

/** Where an endpoint is in its lifecycle. */
export type EndpointStatusValue =
  | 'AWAKING'
  | 'FAILED'
  | 'INITIALIZING'
  | 'READY'
  | 'RUNNING'
  | 'SLEEPING'
  | 'STOPPING'
  | 'TERMINATED'
  | 'TERMINATING'
  | 'UNKNOWN'
  | 'UPDATING';

export type GpuType =
  | 'A100'
  | 'B200'
  | 'H100'
  | 'H200';

/** STARTING, READY (serving), DRAINING (finishing its requests), STOPPED, or FAILED (its engine died or did not start). */
export type ReplicaState =
  | 'DRAINING'
  | 'FAILED'
  | 'READY'
  | 'STARTING'
  | 'STOPPED';

export type RequestActivityFilter = {
  /** Only failed requests (a status of 400 or more, or an error code). */
  errorsOnly?: boolean | null | undefined;
  /** Started at or after. */
  from?: string | null | undefined;
  /** Only these HTTP statuses. */
  statuses?: Array<number> | null | undefined;
  /** Started before. */
  to?: string | null | undefined;
  /** Only this user's requests. */
  userId?: string | null | undefined;
};

/** RECORDED: not applied yet; ROLLED_OUT: replicas ran it; FAILED: its rollout failed. */
export type RolloutState =
  | 'FAILED'
  | 'RECORDED'
  | 'ROLLED_OUT';

/** A fixed replica count: min = max = replicas. */
export type SimplescaleInput = {
  replicas: number;
};

export type TeamRole =
  | 'MEMBER'
  | 'OWNER';

/** Only the fields given change. Every update, an empty one included, appends one version. */
export type UpdateEndpointInput = {
  advanced?: AdvancedConfigInput | null | undefined;
  autoscalingPolicy?: AutoscalingPolicyInput | null | undefined;
  hfModelRepo?: string | null | undefined;
  /** null returns to the default branch. */
  hfModelRepoRevision?: string | null | undefined;
  instanceOptionId?: string | null | undefined;
  name?: string | null | undefined;
  newVersionComment?: string | null | undefined;
  simplescale?: SimplescaleInput | null | undefined;
};

type ConsoleFailure_ConflictError_Fragment = { __typename: 'ConflictError', message: string };

type ConsoleFailure_ForbiddenError_Fragment = { __typename: 'ForbiddenError', message: string };

type ConsoleFailure_InvalidArgumentError_Fragment = { __typename: 'InvalidArgumentError', message: string, fields: Array<{ __typename: 'FieldError', field: string, message: string }> };

type ConsoleFailure_InvalidTransitionError_Fragment = { __typename: 'InvalidTransitionError', message: string };

type ConsoleFailure_NotFoundError_Fragment = { __typename: 'NotFoundError', message: string };

export type ConsoleFailureFragment =
  | ConsoleFailure_ConflictError_Fragment
  | ConsoleFailure_ForbiddenError_Fragment
  | ConsoleFailure_InvalidArgumentError_Fragment
  | ConsoleFailure_InvalidTransitionError_Fragment
  | ConsoleFailure_NotFoundError_Fragment
;

export type ConsoleMeQueryVariables = Exact<{ [key: string]: never; }>;


export type ConsoleMeQuery = { __typename: 'Query', me: { __typename: 'Me', user: { __typename: 'User', id: string, email: string, name: string, isAdmin: boolean }, defaultTeam: { __typename: 'Team', id: string, name: string } | null } };

export type ConsoleTeamsQueryVariables = Exact<{ [key: string]: never; }>;


export type ConsoleTeamsQuery = { __typename: 'Query', teams: Array<{ __typename: 'Team', id: string, name: string, myRole: TeamRole | null, projects: Array<{ __typename: 'Project', id: string, name: string }> }> };

export type EndpointPageSpecFragment = { __typename: 'EndpointSpec', name: string, hfModelRepo: string | null, hfModelRepoRevision: string | null, instanceId: string, gpuType: GpuType, numGpu: number, autoscalingMin: number, autoscalingMax: number, autoscalingCooldown: number, maxBatchSize: number, maxInputLength: number, maxTokenCount: number, maxTokenCountFromModel: boolean, enableContentLogging: boolean, tokenizerAddSpecialTokens: boolean, tokenizerSkipSpecialTokens: boolean, wandbArtifact: { __typename: 'RegistryArtifact', name: string, version: string | null, digest: string | null } | null, instanceOption: { __typename: 'InstanceOption', id: string, gpuType: GpuType, numGpu: number, gpuMemoryGb: number } };

export type EndpointPageStatusFieldsFragment = { __typename: 'EndpointStatus', status: EndpointStatusValue, phase: EndpointPhase | null, errorCode: EndpointErrorCode | null, errorMessage: string | null, waitReason: string | null, currReplicaCnt: number, desiredReplicaCnt: number, updatedReplicaCnt: number, updatedAt: string, downloadProgress: { __typename: 'DownloadProgress', bytesDone: number, bytesTotal: number } | null };

export type EndpointPageEventFieldsFragment = { __typename: 'EndpointEvent', id: string, endpointId: string, type: EndpointEventType, cause: string, createdAt: string, status: EndpointStatusValue | null, phase: EndpointPhase | null, errorCode: EndpointErrorCode | null, message: string | null, versionIndex: number | null, replicas: { __typename: 'ReplicaCounts', currReplicaCnt: number, desiredReplicaCnt: number, updatedReplicaCnt: number } | null };

export type EndpointPageEndpointQueryVariables = Exact<{
  id: string;
}>;


export type EndpointPageEndpointQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, name: string, createdAt: string, updatedAt: string, status: { __typename: 'EndpointStatus', status: EndpointStatusValue, phase: EndpointPhase | null, errorCode: EndpointErrorCode | null, errorMessage: string | null, waitReason: string | null, currReplicaCnt: number, desiredReplicaCnt: number, updatedReplicaCnt: number, updatedAt: string, downloadProgress: { __typename: 'DownloadProgress', bytesDone: number, bytesTotal: number } | null }, project: { __typename: 'Project', id: string, name: string }, currentVersion: { __typename: 'EndpointVersion', versionIndex: number }, spec: { __typename: 'EndpointSpec', currReplicaCnt: number, desiredReplicaCnt: number, updatedReplicaCnt: number, name: string, hfModelRepo: string | null, hfModelRepoRevision: string | null, instanceId: string, gpuType: GpuType, numGpu: number, autoscalingMin: number, autoscalingMax: number, autoscalingCooldown: number, maxBatchSize: number, maxInputLength: number, maxTokenCount: number, maxTokenCountFromModel: boolean, enableContentLogging: boolean, tokenizerAddSpecialTokens: boolean, tokenizerSkipSpecialTokens: boolean, wandbArtifact: { __typename: 'RegistryArtifact', name: string, version: string | null, digest: string | null } | null, instanceOption: { __typename: 'InstanceOption', id: string, gpuType: GpuType, numGpu: number, gpuMemoryGb: number } } } | null };

export type EndpointPageVersionsQueryVariables = Exact<{
  id: string;
  first?: number | null | undefined;
  after?: string | null | undefined;
}>;


export type EndpointPageVersionsQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, versions: { __typename: 'EndpointVersionConnection', nodes: Array<{ __typename: 'EndpointVersion', versionIndex: number, createdAt: string, comment: string | null, rolledBackFrom: number | null, rolloutState: RolloutState, creator: { __typename: 'User', id: string, name: string, email: string } | null, spec: { __typename: 'EndpointSpec', name: string, hfModelRepo: string | null, hfModelRepoRevision: string | null, instanceId: string, gpuType: GpuType, numGpu: number, autoscalingMin: number, autoscalingMax: number, autoscalingCooldown: number, maxBatchSize: number, maxInputLength: number, maxTokenCount: number, maxTokenCountFromModel: boolean, enableContentLogging: boolean, tokenizerAddSpecialTokens: boolean, tokenizerSkipSpecialTokens: boolean, wandbArtifact: { __typename: 'RegistryArtifact', name: string, version: string | null, digest: string | null } | null, instanceOption: { __typename: 'InstanceOption', id: string, gpuType: GpuType, numGpu: number, gpuMemoryGb: number } } }>, pageInfo: { __typename: 'PageInfo', endCursor: string | null, hasNextPage: boolean } } } | null };

export type EndpointPageMetricsQueryVariables = Exact<{
  id: string;
  from: string;
  step?: number | null | undefined;
}>;


export type EndpointPageMetricsQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, metrics: { __typename: 'EndpointMetrics', from: string, to: string, stepSeconds: number, timestamps: Array<string>, requests: Array<number>, requestsPerSecond: Array<number>, completionTokensPerSecond: Array<number>, promptTokens: Array<number>, completionTokens: Array<number>, ttftP50Ms: Array<number | null>, ttftP95Ms: Array<number | null>, ttftP99Ms: Array<number | null>, durationAvgMs: Array<number | null>, errors4xx: Array<number>, errors5xx: Array<number>, replicasCurrent: Array<number | null>, replicasDesired: Array<number | null>, replicasUpdated: Array<number | null> } } | null };

export type EndpointPageRequestsQueryVariables = Exact<{
  id: string;
  first?: number | null | undefined;
  after?: string | null | undefined;
  filter?: RequestActivityFilter | null | undefined;
}>;


export type EndpointPageRequestsQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, requests: { __typename: 'RequestActivityConnection', nodes: Array<{ __typename: 'RequestActivity', id: string, startedAt: string, status: number, cancelled: boolean, errorCode: string | null, finishReason: string | null, promptTokens: number | null, completionTokens: number | null, latencyMs: number, ttftMs: number | null, stream: boolean, user: { __typename: 'User', id: string, name: string, email: string } | null }>, pageInfo: { __typename: 'PageInfo', endCursor: string | null, hasNextPage: boolean } } } | null };

export type EndpointPageStatusSubscriptionVariables = Exact<{
  endpointId: string;
}>;


export type EndpointPageStatusSubscription = { __typename: 'Subscription', endpointStatus: { __typename: 'EndpointStatusUpdate', status: { __typename: 'EndpointStatus', status: EndpointStatusValue, phase: EndpointPhase | null, errorCode: EndpointErrorCode | null, errorMessage: string | null, waitReason: string | null, currReplicaCnt: number, desiredReplicaCnt: number, updatedReplicaCnt: number, updatedAt: string, downloadProgress: { __typename: 'DownloadProgress', bytesDone: number, bytesTotal: number } | null }, event: { __typename: 'EndpointEvent', id: string, endpointId: string, type: EndpointEventType, cause: string, createdAt: string, status: EndpointStatusValue | null, phase: EndpointPhase | null, errorCode: EndpointErrorCode | null, message: string | null, versionIndex: number | null, replicas: { __typename: 'ReplicaCounts', currReplicaCnt: number, desiredReplicaCnt: number, updatedReplicaCnt: number } | null } | null } };

export type EndpointPageEventsSubscriptionVariables = Exact<{
  projectId: string;
}>;


export type EndpointPageEventsSubscription = { __typename: 'Subscription', endpointEvents: { __typename: 'EndpointEvent', id: string, endpointId: string, type: EndpointEventType, cause: string, createdAt: string, status: EndpointStatusValue | null, phase: EndpointPhase | null, errorCode: EndpointErrorCode | null, message: string | null, versionIndex: number | null, replicas: { __typename: 'ReplicaCounts', currReplicaCnt: number, desiredReplicaCnt: number, updatedReplicaCnt: number } | null } };

export type EndpointPageMinuteSubscriptionVariables = Exact<{
  id: string;
}>;


export type EndpointPageMinuteSubscription = { __typename: 'Subscription', endpointMetrics: { __typename: 'EndpointMetricsMinute', minute: string, requests: number, requestsPerSecond: number, completionTokensPerSecond: number, promptTokens: number, completionTokens: number, ttftP50Ms: number | null, ttftP95Ms: number | null, ttftP99Ms: number | null, durationAvgMs: number | null, errors4xx: number, errors5xx: number, replicasCurrent: number | null, replicasDesired: number | null, replicasUpdated: number | null } };

export type EndpointPageSleepMutationVariables = Exact<{
  id: string;
}>;


export type EndpointPageSleepMutation = { __typename: 'Mutation', sleepEndpoint:
    | { __typename: 'InvalidTransitionError', message: string }
    | { __typename: 'NotFoundError', message: string }
    | { __typename: 'SleepEndpointSuccess' }
   };

export type EndpointPageWakeMutationVariables = Exact<{
  id: string;
}>;


export type EndpointPageWakeMutation = { __typename: 'Mutation', wakeEndpoint:
    | { __typename: 'InvalidTransitionError', message: string }
    | { __typename: 'NotFoundError', message: string }
    | { __typename: 'WakeEndpointSuccess' }
   };

export type EndpointPageRestartMutationVariables = Exact<{
  id: string;
}>;


export type EndpointPageRestartMutation = { __typename: 'Mutation', restartEndpoint:
    | { __typename: 'InvalidTransitionError', message: string }
    | { __typename: 'NotFoundError', message: string }
    | { __typename: 'RestartEndpointSuccess' }
   };

export type EndpointPageTerminateMutationVariables = Exact<{
  id: string;
}>;


export type EndpointPageTerminateMutation = { __typename: 'Mutation', terminateEndpoint:
    | { __typename: 'InvalidTransitionError', message: string }
    | { __typename: 'NotFoundError', message: string }
    | { __typename: 'TerminateEndpointSuccess' }
   };

export type EndpointPageDeleteMutationVariables = Exact<{
  id: string;
}>;


export type EndpointPageDeleteMutation = { __typename: 'Mutation', deleteEndpoint:
    | { __typename: 'DeleteEndpointSuccess' }
    | { __typename: 'NotFoundError', message: string }
   };

export type EndpointPageRollbackMutationVariables = Exact<{
  id: string;
  versionIndex: number;
}>;


export type EndpointPageRollbackMutation = { __typename: 'Mutation', rollbackEndpoint:
    | { __typename: 'InvalidArgumentError', message: string, fields: Array<{ __typename: 'FieldError', field: string, message: string }> }
    | { __typename: 'InvalidTransitionError', message: string }
    | { __typename: 'NotFoundError', message: string }
    | { __typename: 'RollbackEndpointSuccess' }
   };

export type EndpointPageReplicaFragment = { __typename: 'Replica', id: string, state: ReplicaState, versionIndex: number, runtime: string, node: string, gpuType: GpuType, numGpu: number, since: string, createdAt: string, readyAt: string | null, endedAt: string | null, lastError: string | null };

export type EndpointPageReplicasQueryVariables = Exact<{
  id: string;
}>;


export type EndpointPageReplicasQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, replicas: { __typename: 'EndpointReplicas', nodes: Array<{ __typename: 'Replica', id: string, state: ReplicaState, versionIndex: number, runtime: string, node: string, gpuType: GpuType, numGpu: number, since: string, createdAt: string, readyAt: string | null, endedAt: string | null, lastError: string | null }>, failures: { __typename: 'ReplicaFailures', windowSeconds: number, count: number, last: { __typename: 'Replica', id: string, endedAt: string | null, lastError: string | null } | null } } } | null };

export type EndpointPageLogQueryVariables = Exact<{
  id: string;
  replicaId?: string | null | undefined;
  tail?: number | null | undefined;
}>;


export type EndpointPageLogQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, logs: { __typename: 'EngineLog', replicaId: string, lines: Array<string> } } | null };

export type EndpointPageLogFollowSubscriptionVariables = Exact<{
  endpointId: string;
  replicaId?: string | null | undefined;
  tail?: number | null | undefined;
}>;


export type EndpointPageLogFollowSubscription = { __typename: 'Subscription', replicaLogs: { __typename: 'EngineLog', replicaId: string, lines: Array<string> } };

export type EndpointPageEventHistoryQueryVariables = Exact<{
  id: string;
  first?: number | null | undefined;
  after?: string | null | undefined;
}>;


export type EndpointPageEventHistoryQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, events: { __typename: 'EndpointEventHistoryConnection', nodes: Array<{ __typename: 'EndpointEvent', id: string, endpointId: string, type: EndpointEventType, cause: string, createdAt: string, status: EndpointStatusValue | null, phase: EndpointPhase | null, errorCode: EndpointErrorCode | null, message: string | null, versionIndex: number | null, replicas: { __typename: 'ReplicaCounts', currReplicaCnt: number, desiredReplicaCnt: number, updatedReplicaCnt: number } | null }>, pageInfo: { __typename: 'PageInfo', endCursor: string | null, hasNextPage: boolean } } } | null };

export type EndpointsRowFragment = { __typename: 'Endpoint', id: string, name: string, status: { __typename: 'EndpointStatus', status: EndpointStatusValue, currReplicaCnt: number, desiredReplicaCnt: number, updatedAt: string }, currentVersion: { __typename: 'EndpointVersion', versionIndex: number, spec: { __typename: 'EndpointSpec', hfModelRepo: string | null, hfModelRepoRevision: string | null, wandbArtifact: { __typename: 'RegistryArtifact', name: string } | null, instanceOption: { __typename: 'InstanceOption', id: string, gpuType: GpuType, numGpu: number, gpuMemoryGb: number } } } };

export type EndpointsListQueryVariables = Exact<{
  projectId: string;
  first?: number | null | undefined;
  after?: string | null | undefined;
}>;


export type EndpointsListQuery = { __typename: 'Query', endpoints: { __typename: 'EndpointConnection', nodes: Array<{ __typename: 'Endpoint', id: string, name: string, status: { __typename: 'EndpointStatus', status: EndpointStatusValue, currReplicaCnt: number, desiredReplicaCnt: number, updatedAt: string }, currentVersion: { __typename: 'EndpointVersion', versionIndex: number, spec: { __typename: 'EndpointSpec', hfModelRepo: string | null, hfModelRepoRevision: string | null, wandbArtifact: { __typename: 'RegistryArtifact', name: string } | null, instanceOption: { __typename: 'InstanceOption', id: string, gpuType: GpuType, numGpu: number, gpuMemoryGb: number } } } }>, pageInfo: { __typename: 'PageInfo', endCursor: string | null, hasNextPage: boolean } } };

export type EndpointsEventsSubscriptionVariables = Exact<{
  projectId: string;
}>;


export type EndpointsEventsSubscription = { __typename: 'Subscription', endpointEvents: { __typename: 'EndpointEvent', id: string, type: EndpointEventType, endpointId: string, createdAt: string, status: EndpointStatusValue | null, replicas: { __typename: 'ReplicaCounts', currReplicaCnt: number, desiredReplicaCnt: number } | null } };

export type EndpointsCreateProjectMutationVariables = Exact<{
  name: string;
  teamId?: string | null | undefined;
}>;


export type EndpointsCreateProjectMutation = { __typename: 'Mutation', createProject:
    | { __typename: 'CreateProjectSuccess', project: { __typename: 'Project', id: string, name: string } }
    | { __typename: 'InvalidArgumentError', message: string, fields: Array<{ __typename: 'FieldError', field: string, message: string }> }
    | { __typename: 'NotFoundError', message: string }
   };

export type EndpointsInstanceOptionsQueryVariables = Exact<{ [key: string]: never; }>;


export type EndpointsInstanceOptionsQuery = { __typename: 'Query', instanceOptions: Array<{ __typename: 'InstanceOption', id: string, gpuType: GpuType, numGpu: number, gpuMemoryGb: number }> };

export type EndpointsEditableQueryVariables = Exact<{
  id: string;
}>;


export type EndpointsEditableQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, name: string, project: { __typename: 'Project', id: string, name: string }, currentVersion: { __typename: 'EndpointVersion', versionIndex: number, spec: { __typename: 'EndpointSpec', name: string, instanceId: string, hfModelRepo: string | null, hfModelRepoRevision: string | null, autoscalingMin: number, autoscalingMax: number, autoscalingCooldown: number, maxBatchSize: number, maxTokenCount: number, maxInputLength: number, tokenizerSkipSpecialTokens: boolean, tokenizerAddSpecialTokens: boolean, enableContentLogging: boolean, wandbArtifact: { __typename: 'RegistryArtifact', name: string } | null } } } | null };

export type EndpointsCreateMutationVariables = Exact<{
  input: CreateEndpointInput;
}>;


export type EndpointsCreateMutation = { __typename: 'Mutation', createEndpoint:
    | { __typename: 'CreateEndpointSuccess', endpoint: { __typename: 'Endpoint', id: string } }
    | { __typename: 'InvalidArgumentError', message: string, fields: Array<{ __typename: 'FieldError', field: string, message: string }> }
    | { __typename: 'NotFoundError', message: string }
   };

export type EndpointsCreateFromArtifactMutationVariables = Exact<{
  input: ArtifactEndpointInput;
}>;


export type EndpointsCreateFromArtifactMutation = { __typename: 'Mutation', createEndpointFromArtifact:
    | { __typename: 'CreateEndpointFromArtifactSuccess', endpoint: { __typename: 'Endpoint', id: string } }
    | { __typename: 'InvalidArgumentError', message: string, fields: Array<{ __typename: 'FieldError', field: string, message: string }> }
    | { __typename: 'InvalidTransitionError', message: string }
    | { __typename: 'NotFoundError', message: string }
   };

export type EndpointsUpdateMutationVariables = Exact<{
  id: string;
  input: UpdateEndpointInput;
}>;


export type EndpointsUpdateMutation = { __typename: 'Mutation', updateEndpoint:
    | { __typename: 'InvalidArgumentError', message: string, fields: Array<{ __typename: 'FieldError', field: string, message: string }> }
    | { __typename: 'InvalidTransitionError', message: string }
    | { __typename: 'NotFoundError', message: string }
    | { __typename: 'UpdateEndpointSuccess', endpoint: { __typename: 'Endpoint', id: string } }
   };

export type PlaygroundEndpointsQueryVariables = Exact<{
  teamId: string;
}>;


export type PlaygroundEndpointsQuery = { __typename: 'Query', team: { __typename: 'Team', id: string, projects: Array<{ __typename: 'Project', id: string, name: string, endpoints: { __typename: 'EndpointConnection', nodes: Array<{ __typename: 'Endpoint', id: string, name: string, status: { __typename: 'EndpointStatus', status: EndpointStatusValue, currReplicaCnt: number } }> } }> } | null };

export type PlaygroundEndpointQueryVariables = Exact<{
  id: string;
}>;


export type PlaygroundEndpointQuery = { __typename: 'Query', endpoint: { __typename: 'Endpoint', id: string, name: string, project: { __typename: 'Project', id: string, name: string }, status: { __typename: 'EndpointStatus', status: EndpointStatusValue, currReplicaCnt: number } } | null };

export type PlaygroundChatSubscriptionVariables = Exact<{
  input: ChatCompletionInput;
}>;


export type PlaygroundChatSubscription = { __typename: 'Subscription', chatCompletion: { __typename: 'ChatCompletionChunk', id: string, model: string, choices: Array<{ __typename: 'ChatChunkChoice', index: number, finishReason: string | null, delta: { __typename: 'ChatDelta', role: string | null, content: string | null, reasoningContent: string | null }, logprobs: Array<{ __typename: 'ChatTokenLogprob', token: string, logprob: number, topLogprobs: Array<{ __typename: 'ChatTopLogprob', token: string, logprob: number }> }> | null }>, usage: { __typename: 'ChatUsage', promptTokens: number, completionTokens: number, totalTokens: number } | null } };

export type PlaygroundStatusSubscriptionVariables = Exact<{
  endpointId: string;
}>;


export type PlaygroundStatusSubscription = { __typename: 'Subscription', endpointStatus: { __typename: 'EndpointStatusUpdate', status: { __typename: 'EndpointStatus', endpointId: string, status: EndpointStatusValue, currReplicaCnt: number } } };

export type SettingsApiKeysQueryVariables = Exact<{ [key: string]: never; }>;


export type SettingsApiKeysQuery = { __typename: 'Query', me: { __typename: 'Me', apiKeys: Array<{ __typename: 'ApiKey', id: string, name: string, prefix: string, createdAt: string, lastUsedAt: string | null, revokedAt: string | null }> } };

export type SettingsCreateApiKeyMutationVariables = Exact<{
  name: string;
}>;


export type SettingsCreateApiKeyMutation = { __typename: 'Mutation', createApiKey:
    | { __typename: 'CreateApiKeySuccess', secret: string, apiKey: { __typename: 'ApiKey', id: string, name: string, prefix: string, createdAt: string, lastUsedAt: string | null, revokedAt: string | null } }
    | { __typename: 'ForbiddenError', message: string }
    | { __typename: 'InvalidArgumentError', message: string, fields: Array<{ __typename: 'FieldError', field: string, message: string }> }
    | { __typename: 'NotFoundError', message: string }
   };

export type SettingsRevokeApiKeyMutationVariables = Exact<{
  id: string;
}>;


export type SettingsRevokeApiKeyMutation = { __typename: 'Mutation', revokeApiKey:
    | { __typename: 'NotFoundError', message: string }
    | { __typename: 'RevokeApiKeySuccess', apiKey: { __typename: 'ApiKey', id: string, revokedAt: string | null } }
   };

export type SettingsInvitationsQueryVariables = Exact<{ [key: string]: never; }>;


export type SettingsInvitationsQuery = { __typename: 'Query', me: { __typename: 'Me', invitations: Array<{ __typename: 'TeamInvitation', id: string, teamName: string, role: TeamRole, invitedBy: string | null, createdAt: string, expiresAt: string }> } };

export type SettingsAcceptInvitationMutationVariables = Exact<{
  id: string;
}>;


export type SettingsAcceptInvitationMutation = { __typename: 'Mutation', acceptTeamInvitation:
    | { __typename: 'AcceptTeamInvitationSuccess', team: { __typename: 'Team', id: string, name: string } }
    | { __typename: 'NotFoundError', message: string }
   };

export type SettingsDeclineInvitationMutationVariables = Exact<{
  id: string;
}>;


export type SettingsDeclineInvitationMutation = { __typename: 'Mutation', declineTeamInvitation:
    | { __typename: 'DeclineTeamInvitationSuccess', invitationId: string }
    | { __typename: 'NotFoundError', message: string }
   };

export const ConsoleFailureFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<ConsoleFailureFragment, unknown>;
export const EndpointPageSpecFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageSpec"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointSpec"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepo"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepoRevision"}},{"kind":"Field","name":{"kind":"Name","value":"wandbArtifact"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"version"}},{"kind":"Field","name":{"kind":"Name","value":"digest"}}]}},{"kind":"Field","name":{"kind":"Name","value":"instanceId"}},{"kind":"Field","name":{"kind":"Name","value":"instanceOption"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"gpuMemoryGb"}}]}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingMin"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingMax"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingCooldown"}},{"kind":"Field","name":{"kind":"Name","value":"maxBatchSize"}},{"kind":"Field","name":{"kind":"Name","value":"maxInputLength"}},{"kind":"Field","name":{"kind":"Name","value":"maxTokenCount"}},{"kind":"Field","name":{"kind":"Name","value":"maxTokenCountFromModel"}},{"kind":"Field","name":{"kind":"Name","value":"enableContentLogging"}},{"kind":"Field","name":{"kind":"Name","value":"tokenizerAddSpecialTokens"}},{"kind":"Field","name":{"kind":"Name","value":"tokenizerSkipSpecialTokens"}}]}}]} as unknown as DocumentNode<EndpointPageSpecFragment, unknown>;
export const EndpointPageStatusFieldsFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageStatusFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointStatus"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"phase"}},{"kind":"Field","name":{"kind":"Name","value":"errorCode"}},{"kind":"Field","name":{"kind":"Name","value":"errorMessage"}},{"kind":"Field","name":{"kind":"Name","value":"waitReason"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"downloadProgress"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"bytesDone"}},{"kind":"Field","name":{"kind":"Name","value":"bytesTotal"}}]}},{"kind":"Field","name":{"kind":"Name","value":"updatedAt"}}]}}]} as unknown as DocumentNode<EndpointPageStatusFieldsFragment, unknown>;
export const EndpointPageEventFieldsFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageEventFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointEvent"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"endpointId"}},{"kind":"Field","name":{"kind":"Name","value":"type"}},{"kind":"Field","name":{"kind":"Name","value":"cause"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"phase"}},{"kind":"Field","name":{"kind":"Name","value":"errorCode"}},{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"replicas"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedReplicaCnt"}}]}}]}}]} as unknown as DocumentNode<EndpointPageEventFieldsFragment, unknown>;
export const EndpointPageReplicaFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageReplica"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Replica"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"state"}},{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"runtime"}},{"kind":"Field","name":{"kind":"Name","value":"node"}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"since"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"readyAt"}},{"kind":"Field","name":{"kind":"Name","value":"endedAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastError"}}]}}]} as unknown as DocumentNode<EndpointPageReplicaFragment, unknown>;
export const EndpointsRowFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointsRow"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Endpoint"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"status"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedAt"}}]}},{"kind":"Field","name":{"kind":"Name","value":"currentVersion"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"spec"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"hfModelRepo"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepoRevision"}},{"kind":"Field","name":{"kind":"Name","value":"wandbArtifact"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}}]}},{"kind":"Field","name":{"kind":"Name","value":"instanceOption"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"gpuMemoryGb"}}]}}]}}]}}]}}]} as unknown as DocumentNode<EndpointsRowFragment, unknown>;
export const ConsoleMeDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"ConsoleMe"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"me"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"user"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"email"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"isAdmin"}}]}},{"kind":"Field","name":{"kind":"Name","value":"defaultTeam"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]}}]} as unknown as DocumentNode<ConsoleMeQuery, ConsoleMeQueryVariables>;
export const ConsoleTeamsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"ConsoleTeams"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"teams"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"myRole"}},{"kind":"Field","name":{"kind":"Name","value":"projects"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]}}]} as unknown as DocumentNode<ConsoleTeamsQuery, ConsoleTeamsQueryVariables>;
export const EndpointPageEndpointDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointPageEndpoint"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointPageStatusFields"}}]}},{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}},{"kind":"Field","name":{"kind":"Name","value":"currentVersion"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}}]}},{"kind":"Field","name":{"kind":"Name","value":"spec"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointPageSpec"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedReplicaCnt"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageStatusFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointStatus"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"phase"}},{"kind":"Field","name":{"kind":"Name","value":"errorCode"}},{"kind":"Field","name":{"kind":"Name","value":"errorMessage"}},{"kind":"Field","name":{"kind":"Name","value":"waitReason"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"downloadProgress"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"bytesDone"}},{"kind":"Field","name":{"kind":"Name","value":"bytesTotal"}}]}},{"kind":"Field","name":{"kind":"Name","value":"updatedAt"}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageSpec"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointSpec"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepo"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepoRevision"}},{"kind":"Field","name":{"kind":"Name","value":"wandbArtifact"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"version"}},{"kind":"Field","name":{"kind":"Name","value":"digest"}}]}},{"kind":"Field","name":{"kind":"Name","value":"instanceId"}},{"kind":"Field","name":{"kind":"Name","value":"instanceOption"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"gpuMemoryGb"}}]}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingMin"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingMax"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingCooldown"}},{"kind":"Field","name":{"kind":"Name","value":"maxBatchSize"}},{"kind":"Field","name":{"kind":"Name","value":"maxInputLength"}},{"kind":"Field","name":{"kind":"Name","value":"maxTokenCount"}},{"kind":"Field","name":{"kind":"Name","value":"maxTokenCountFromModel"}},{"kind":"Field","name":{"kind":"Name","value":"enableContentLogging"}},{"kind":"Field","name":{"kind":"Name","value":"tokenizerAddSpecialTokens"}},{"kind":"Field","name":{"kind":"Name","value":"tokenizerSkipSpecialTokens"}}]}}]} as unknown as DocumentNode<EndpointPageEndpointQuery, EndpointPageEndpointQueryVariables>;
export const EndpointPageVersionsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointPageVersions"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"versions"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}},{"kind":"Argument","name":{"kind":"Name","value":"newestFirst"},"value":{"kind":"BooleanValue","value":true}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"comment"}},{"kind":"Field","name":{"kind":"Name","value":"rolledBackFrom"}},{"kind":"Field","name":{"kind":"Name","value":"rolloutState"}},{"kind":"Field","name":{"kind":"Name","value":"creator"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"email"}}]}},{"kind":"Field","name":{"kind":"Name","value":"spec"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointPageSpec"}}]}}]}},{"kind":"Field","name":{"kind":"Name","value":"pageInfo"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endCursor"}},{"kind":"Field","name":{"kind":"Name","value":"hasNextPage"}}]}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageSpec"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointSpec"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepo"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepoRevision"}},{"kind":"Field","name":{"kind":"Name","value":"wandbArtifact"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"version"}},{"kind":"Field","name":{"kind":"Name","value":"digest"}}]}},{"kind":"Field","name":{"kind":"Name","value":"instanceId"}},{"kind":"Field","name":{"kind":"Name","value":"instanceOption"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"gpuMemoryGb"}}]}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingMin"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingMax"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingCooldown"}},{"kind":"Field","name":{"kind":"Name","value":"maxBatchSize"}},{"kind":"Field","name":{"kind":"Name","value":"maxInputLength"}},{"kind":"Field","name":{"kind":"Name","value":"maxTokenCount"}},{"kind":"Field","name":{"kind":"Name","value":"maxTokenCountFromModel"}},{"kind":"Field","name":{"kind":"Name","value":"enableContentLogging"}},{"kind":"Field","name":{"kind":"Name","value":"tokenizerAddSpecialTokens"}},{"kind":"Field","name":{"kind":"Name","value":"tokenizerSkipSpecialTokens"}}]}}]} as unknown as DocumentNode<EndpointPageVersionsQuery, EndpointPageVersionsQueryVariables>;
export const EndpointPageMetricsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointPageMetrics"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"from"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"DateTime"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"step"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"metrics"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"from"},"value":{"kind":"Variable","name":{"kind":"Name","value":"from"}}},{"kind":"Argument","name":{"kind":"Name","value":"step"},"value":{"kind":"Variable","name":{"kind":"Name","value":"step"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"from"}},{"kind":"Field","name":{"kind":"Name","value":"to"}},{"kind":"Field","name":{"kind":"Name","value":"stepSeconds"}},{"kind":"Field","name":{"kind":"Name","value":"timestamps"}},{"kind":"Field","name":{"kind":"Name","value":"requests"}},{"kind":"Field","name":{"kind":"Name","value":"requestsPerSecond"}},{"kind":"Field","name":{"kind":"Name","value":"completionTokensPerSecond"}},{"kind":"Field","name":{"kind":"Name","value":"promptTokens"}},{"kind":"Field","name":{"kind":"Name","value":"completionTokens"}},{"kind":"Field","name":{"kind":"Name","value":"ttftP50Ms"}},{"kind":"Field","name":{"kind":"Name","value":"ttftP95Ms"}},{"kind":"Field","name":{"kind":"Name","value":"ttftP99Ms"}},{"kind":"Field","name":{"kind":"Name","value":"durationAvgMs"}},{"kind":"Field","name":{"kind":"Name","value":"errors4xx"}},{"kind":"Field","name":{"kind":"Name","value":"errors5xx"}},{"kind":"Field","name":{"kind":"Name","value":"replicasCurrent"}},{"kind":"Field","name":{"kind":"Name","value":"replicasDesired"}},{"kind":"Field","name":{"kind":"Name","value":"replicasUpdated"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageMetricsQuery, EndpointPageMetricsQueryVariables>;
export const EndpointPageRequestsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointPageRequests"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"filter"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"RequestActivityFilter"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"requests"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}},{"kind":"Argument","name":{"kind":"Name","value":"filter"},"value":{"kind":"Variable","name":{"kind":"Name","value":"filter"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"startedAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"cancelled"}},{"kind":"Field","name":{"kind":"Name","value":"errorCode"}},{"kind":"Field","name":{"kind":"Name","value":"finishReason"}},{"kind":"Field","name":{"kind":"Name","value":"promptTokens"}},{"kind":"Field","name":{"kind":"Name","value":"completionTokens"}},{"kind":"Field","name":{"kind":"Name","value":"latencyMs"}},{"kind":"Field","name":{"kind":"Name","value":"ttftMs"}},{"kind":"Field","name":{"kind":"Name","value":"stream"}},{"kind":"Field","name":{"kind":"Name","value":"user"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"email"}}]}}]}},{"kind":"Field","name":{"kind":"Name","value":"pageInfo"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endCursor"}},{"kind":"Field","name":{"kind":"Name","value":"hasNextPage"}}]}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageRequestsQuery, EndpointPageRequestsQueryVariables>;
export const EndpointPageStatusDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"EndpointPageStatus"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"endpointId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpointStatus"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"endpointId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"endpointId"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointPageStatusFields"}}]}},{"kind":"Field","name":{"kind":"Name","value":"event"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointPageEventFields"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageStatusFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointStatus"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"phase"}},{"kind":"Field","name":{"kind":"Name","value":"errorCode"}},{"kind":"Field","name":{"kind":"Name","value":"errorMessage"}},{"kind":"Field","name":{"kind":"Name","value":"waitReason"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"downloadProgress"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"bytesDone"}},{"kind":"Field","name":{"kind":"Name","value":"bytesTotal"}}]}},{"kind":"Field","name":{"kind":"Name","value":"updatedAt"}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageEventFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointEvent"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"endpointId"}},{"kind":"Field","name":{"kind":"Name","value":"type"}},{"kind":"Field","name":{"kind":"Name","value":"cause"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"phase"}},{"kind":"Field","name":{"kind":"Name","value":"errorCode"}},{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"replicas"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedReplicaCnt"}}]}}]}}]} as unknown as DocumentNode<EndpointPageStatusSubscription, EndpointPageStatusSubscriptionVariables>;
export const EndpointPageEventsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"EndpointPageEvents"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"projectId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpointEvents"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"projectId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"projectId"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointPageEventFields"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageEventFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointEvent"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"endpointId"}},{"kind":"Field","name":{"kind":"Name","value":"type"}},{"kind":"Field","name":{"kind":"Name","value":"cause"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"phase"}},{"kind":"Field","name":{"kind":"Name","value":"errorCode"}},{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"replicas"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedReplicaCnt"}}]}}]}}]} as unknown as DocumentNode<EndpointPageEventsSubscription, EndpointPageEventsSubscriptionVariables>;
export const EndpointPageMinuteDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"EndpointPageMinute"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpointMetrics"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"minute"}},{"kind":"Field","name":{"kind":"Name","value":"requests"}},{"kind":"Field","name":{"kind":"Name","value":"requestsPerSecond"}},{"kind":"Field","name":{"kind":"Name","value":"completionTokensPerSecond"}},{"kind":"Field","name":{"kind":"Name","value":"promptTokens"}},{"kind":"Field","name":{"kind":"Name","value":"completionTokens"}},{"kind":"Field","name":{"kind":"Name","value":"ttftP50Ms"}},{"kind":"Field","name":{"kind":"Name","value":"ttftP95Ms"}},{"kind":"Field","name":{"kind":"Name","value":"ttftP99Ms"}},{"kind":"Field","name":{"kind":"Name","value":"durationAvgMs"}},{"kind":"Field","name":{"kind":"Name","value":"errors4xx"}},{"kind":"Field","name":{"kind":"Name","value":"errors5xx"}},{"kind":"Field","name":{"kind":"Name","value":"replicasCurrent"}},{"kind":"Field","name":{"kind":"Name","value":"replicasDesired"}},{"kind":"Field","name":{"kind":"Name","value":"replicasUpdated"}}]}}]}}]} as unknown as DocumentNode<EndpointPageMinuteSubscription, EndpointPageMinuteSubscriptionVariables>;
export const EndpointPageSleepDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointPageSleep"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"sleepEndpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageSleepMutation, EndpointPageSleepMutationVariables>;
export const EndpointPageWakeDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointPageWake"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"wakeEndpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageWakeMutation, EndpointPageWakeMutationVariables>;
export const EndpointPageRestartDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointPageRestart"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"restartEndpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageRestartMutation, EndpointPageRestartMutationVariables>;
export const EndpointPageTerminateDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointPageTerminate"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"terminateEndpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageTerminateMutation, EndpointPageTerminateMutationVariables>;
export const EndpointPageDeleteDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointPageDelete"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"deleteEndpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageDeleteMutation, EndpointPageDeleteMutationVariables>;
export const EndpointPageRollbackDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointPageRollback"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"versionIndex"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"rollbackEndpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}},{"kind":"Argument","name":{"kind":"Name","value":"versionIndex"},"value":{"kind":"Variable","name":{"kind":"Name","value":"versionIndex"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageRollbackMutation, EndpointPageRollbackMutationVariables>;
export const EndpointPageReplicasDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointPageReplicas"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"replicas"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointPageReplica"}}]}},{"kind":"Field","name":{"kind":"Name","value":"failures"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"windowSeconds"}},{"kind":"Field","name":{"kind":"Name","value":"count"}},{"kind":"Field","name":{"kind":"Name","value":"last"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"endedAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastError"}}]}}]}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageReplica"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Replica"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"state"}},{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"runtime"}},{"kind":"Field","name":{"kind":"Name","value":"node"}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"since"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"readyAt"}},{"kind":"Field","name":{"kind":"Name","value":"endedAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastError"}}]}}]} as unknown as DocumentNode<EndpointPageReplicasQuery, EndpointPageReplicasQueryVariables>;
export const EndpointPageLogDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointPageLog"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"replicaId"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"tail"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"logs"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"replicaId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"replicaId"}}},{"kind":"Argument","name":{"kind":"Name","value":"tail"},"value":{"kind":"Variable","name":{"kind":"Name","value":"tail"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"replicaId"}},{"kind":"Field","name":{"kind":"Name","value":"lines"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointPageLogQuery, EndpointPageLogQueryVariables>;
export const EndpointPageLogFollowDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"EndpointPageLogFollow"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"endpointId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"replicaId"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"tail"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"replicaLogs"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"endpointId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"endpointId"}}},{"kind":"Argument","name":{"kind":"Name","value":"replicaId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"replicaId"}}},{"kind":"Argument","name":{"kind":"Name","value":"tail"},"value":{"kind":"Variable","name":{"kind":"Name","value":"tail"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"replicaId"}},{"kind":"Field","name":{"kind":"Name","value":"lines"}}]}}]}}]} as unknown as DocumentNode<EndpointPageLogFollowSubscription, EndpointPageLogFollowSubscriptionVariables>;
export const EndpointPageEventHistoryDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointPageEventHistory"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"events"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}},{"kind":"Argument","name":{"kind":"Name","value":"newestFirst"},"value":{"kind":"BooleanValue","value":true}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointPageEventFields"}}]}},{"kind":"Field","name":{"kind":"Name","value":"pageInfo"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endCursor"}},{"kind":"Field","name":{"kind":"Name","value":"hasNextPage"}}]}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointPageEventFields"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"EndpointEvent"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"endpointId"}},{"kind":"Field","name":{"kind":"Name","value":"type"}},{"kind":"Field","name":{"kind":"Name","value":"cause"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"phase"}},{"kind":"Field","name":{"kind":"Name","value":"errorCode"}},{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"replicas"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedReplicaCnt"}}]}}]}}]} as unknown as DocumentNode<EndpointPageEventHistoryQuery, EndpointPageEventHistoryQueryVariables>;
export const EndpointsListDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointsList"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"projectId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoints"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"projectId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"projectId"}}},{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"EndpointsRow"}}]}},{"kind":"Field","name":{"kind":"Name","value":"pageInfo"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endCursor"}},{"kind":"Field","name":{"kind":"Name","value":"hasNextPage"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"EndpointsRow"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Endpoint"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"status"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedAt"}}]}},{"kind":"Field","name":{"kind":"Name","value":"currentVersion"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"spec"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"hfModelRepo"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepoRevision"}},{"kind":"Field","name":{"kind":"Name","value":"wandbArtifact"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}}]}},{"kind":"Field","name":{"kind":"Name","value":"instanceOption"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"gpuMemoryGb"}}]}}]}}]}}]}}]} as unknown as DocumentNode<EndpointsListQuery, EndpointsListQueryVariables>;
export const EndpointsEventsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"EndpointsEvents"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"projectId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpointEvents"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"projectId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"projectId"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"type"}},{"kind":"Field","name":{"kind":"Name","value":"endpointId"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"replicas"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}},{"kind":"Field","name":{"kind":"Name","value":"desiredReplicaCnt"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointsEventsSubscription, EndpointsEventsSubscriptionVariables>;
export const EndpointsCreateProjectDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointsCreateProject"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"name"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"teamId"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createProject"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"name"},"value":{"kind":"Variable","name":{"kind":"Name","value":"name"}}},{"kind":"Argument","name":{"kind":"Name","value":"teamId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"teamId"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"CreateProjectSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointsCreateProjectMutation, EndpointsCreateProjectMutationVariables>;
export const EndpointsInstanceOptionsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointsInstanceOptions"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"instanceOptions"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"gpuType"}},{"kind":"Field","name":{"kind":"Name","value":"numGpu"}},{"kind":"Field","name":{"kind":"Name","value":"gpuMemoryGb"}}]}}]}}]} as unknown as DocumentNode<EndpointsInstanceOptionsQuery, EndpointsInstanceOptionsQueryVariables>;
export const EndpointsEditableDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"EndpointsEditable"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}},{"kind":"Field","name":{"kind":"Name","value":"currentVersion"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"versionIndex"}},{"kind":"Field","name":{"kind":"Name","value":"spec"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"instanceId"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepo"}},{"kind":"Field","name":{"kind":"Name","value":"hfModelRepoRevision"}},{"kind":"Field","name":{"kind":"Name","value":"wandbArtifact"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}}]}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingMin"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingMax"}},{"kind":"Field","name":{"kind":"Name","value":"autoscalingCooldown"}},{"kind":"Field","name":{"kind":"Name","value":"maxBatchSize"}},{"kind":"Field","name":{"kind":"Name","value":"maxTokenCount"}},{"kind":"Field","name":{"kind":"Name","value":"maxInputLength"}},{"kind":"Field","name":{"kind":"Name","value":"tokenizerSkipSpecialTokens"}},{"kind":"Field","name":{"kind":"Name","value":"tokenizerAddSpecialTokens"}},{"kind":"Field","name":{"kind":"Name","value":"enableContentLogging"}}]}}]}}]}}]}}]} as unknown as DocumentNode<EndpointsEditableQuery, EndpointsEditableQueryVariables>;
export const EndpointsCreateDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointsCreate"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateEndpointInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createEndpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"CreateEndpointSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}}]}}]}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointsCreateMutation, EndpointsCreateMutationVariables>;
export const EndpointsCreateFromArtifactDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointsCreateFromArtifact"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ArtifactEndpointInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createEndpointFromArtifact"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"CreateEndpointFromArtifactSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}}]}}]}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointsCreateFromArtifactMutation, EndpointsCreateFromArtifactMutationVariables>;
export const EndpointsUpdateDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"EndpointsUpdate"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"UpdateEndpointInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"updateEndpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}},{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"UpdateEndpointSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}}]}}]}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<EndpointsUpdateMutation, EndpointsUpdateMutationVariables>;
export const PlaygroundEndpointsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"PlaygroundEndpoints"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"teamId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"team"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"teamId"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"projects"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"endpoints"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"IntValue","value":"100"}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"status"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}}]}}]}}]}}]}}]}}]}}]} as unknown as DocumentNode<PlaygroundEndpointsQuery, PlaygroundEndpointsQueryVariables>;
export const PlaygroundEndpointDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"PlaygroundEndpoint"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpoint"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}},{"kind":"Field","name":{"kind":"Name","value":"status"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}}]}}]}}]}}]} as unknown as DocumentNode<PlaygroundEndpointQuery, PlaygroundEndpointQueryVariables>;
export const PlaygroundChatDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"PlaygroundChat"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ChatCompletionInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"chatCompletion"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"model"}},{"kind":"Field","name":{"kind":"Name","value":"choices"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"index"}},{"kind":"Field","name":{"kind":"Name","value":"finishReason"}},{"kind":"Field","name":{"kind":"Name","value":"delta"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"role"}},{"kind":"Field","name":{"kind":"Name","value":"content"}},{"kind":"Field","name":{"kind":"Name","value":"reasoningContent"}}]}},{"kind":"Field","name":{"kind":"Name","value":"logprobs"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"token"}},{"kind":"Field","name":{"kind":"Name","value":"logprob"}},{"kind":"Field","name":{"kind":"Name","value":"topLogprobs"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"token"}},{"kind":"Field","name":{"kind":"Name","value":"logprob"}}]}}]}}]}},{"kind":"Field","name":{"kind":"Name","value":"usage"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"promptTokens"}},{"kind":"Field","name":{"kind":"Name","value":"completionTokens"}},{"kind":"Field","name":{"kind":"Name","value":"totalTokens"}}]}}]}}]}}]} as unknown as DocumentNode<PlaygroundChatSubscription, PlaygroundChatSubscriptionVariables>;
export const PlaygroundStatusDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"PlaygroundStatus"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"endpointId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpointStatus"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"endpointId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"endpointId"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"status"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"endpointId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"currReplicaCnt"}}]}}]}}]}}]} as unknown as DocumentNode<PlaygroundStatusSubscription, PlaygroundStatusSubscriptionVariables>;
export const SettingsApiKeysDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"SettingsApiKeys"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"me"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"apiKeys"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"prefix"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastUsedAt"}},{"kind":"Field","name":{"kind":"Name","value":"revokedAt"}}]}}]}}]}}]} as unknown as DocumentNode<SettingsApiKeysQuery, SettingsApiKeysQueryVariables>;
export const SettingsCreateApiKeyDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"SettingsCreateApiKey"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"name"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createApiKey"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"name"},"value":{"kind":"Variable","name":{"kind":"Name","value":"name"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"CreateApiKeySuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"secret"}},{"kind":"Field","name":{"kind":"Name","value":"apiKey"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"prefix"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"lastUsedAt"}},{"kind":"Field","name":{"kind":"Name","value":"revokedAt"}}]}}]}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<SettingsCreateApiKeyMutation, SettingsCreateApiKeyMutationVariables>;
export const SettingsRevokeApiKeyDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"SettingsRevokeApiKey"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"revokeApiKey"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"RevokeApiKeySuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"apiKey"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"revokedAt"}}]}}]}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<SettingsRevokeApiKeyMutation, SettingsRevokeApiKeyMutationVariables>;
export const SettingsInvitationsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"SettingsInvitations"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"me"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"invitations"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"teamName"}},{"kind":"Field","name":{"kind":"Name","value":"role"}},{"kind":"Field","name":{"kind":"Name","value":"invitedBy"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"expiresAt"}}]}}]}}]}}]} as unknown as DocumentNode<SettingsInvitationsQuery, SettingsInvitationsQueryVariables>;
export const SettingsAcceptInvitationDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"SettingsAcceptInvitation"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"acceptTeamInvitation"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"AcceptTeamInvitationSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"team"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<SettingsAcceptInvitationMutation, SettingsAcceptInvitationMutationVariables>;
export const SettingsDeclineInvitationDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"SettingsDeclineInvitation"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"declineTeamInvitation"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"DeclineTeamInvitationSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"invitationId"}}]}},{"kind":"FragmentSpread","name":{"kind":"Name","value":"ConsoleFailure"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"ConsoleFailure"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"InvalidArgumentError"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"fields"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"field"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}}]} as unknown as DocumentNode<SettingsDeclineInvitationMutation, SettingsDeclineInvitationMutationVariables>;