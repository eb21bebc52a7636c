/**
 * How endpoint, version and event rows map to the domain's records: the
 * column lists the repositories select, the row shapes postgres.js returns,
 * and the mappers. An endpoint is always read together with its current
 * version, in one statement.
 */
import type {
  DownloadProgress,
  EndpointEventRecord,
  EndpointEventType,
  EndpointRecord,
  RolloutState,
  VersionRecord,
} from '../domain/endpoint.js';
import type { DesiredState, EndpointErrorCode, EndpointPhase, EndpointStatus } from '../domain/lifecycle.js';

export const VERSION_COLUMNS = `
  v.endpoint_id, v.version_index, v.name, v.instance_id, v.hf_model_repo, v.hf_model_repo_revision, v.wandb_artifact,
  v.autoscaling_min, v.autoscaling_max, v.autoscaling_cooldown, v.max_batch_size, v.max_token_count,
  v.max_input_length, v.max_token_count_auto, v.max_input_length_auto, v.tokenizer_skip_special_tokens, v.tokenizer_add_special_tokens,
  v.enable_content_logging, v.comment, v.rollout_state, v.rolled_back_from, v.model, v.creator_id,
  v.created_at AS version_created_at`;

export const ENDPOINT_COLUMNS = `
  e.id, e.seq, e.project_id, e.team_id, e.creator_id AS endpoint_creator_id, e.status, e.phase,
  e.error_code, e.error_message, e.wait_reason, e.desired_state, e.curr_replica_cnt, e.desired_replica_cnt, e.updated_replica_cnt,
  e.created_at, e.updated_at, e.progress, e.last_request_at, e.deleted_at IS NOT NULL AS deleted, ${VERSION_COLUMNS}`;

export const CURRENT_VERSION_JOIN = 'JOIN endpoint_versions v ON v.endpoint_id = e.id AND v.version_index = e.current_version';

export interface VersionRow {
  endpoint_id: string;
  version_index: number;
  name: string;
  instance_id: string;
  hf_model_repo: string | null;
  hf_model_repo_revision: string | null;
  wandb_artifact: string | null;
  autoscaling_min: number;
  autoscaling_max: number;
  autoscaling_cooldown: number;
  max_batch_size: number;
  max_token_count: number;
  max_input_length: number;
  max_token_count_auto: boolean;
  max_input_length_auto: boolean;
  tokenizer_skip_special_tokens: boolean;
  tokenizer_add_special_tokens: boolean;
  enable_content_logging: boolean;
  comment: string | null;
  rollout_state: RolloutState;
  rolled_back_from: number | null;
  model: unknown;
  creator_id: string;
  version_created_at: Date;
}

export interface EndpointRow extends VersionRow {
  id: string;
  seq: string;
  project_id: string;
  team_id: string;
  endpoint_creator_id: string;
  status: EndpointStatus;
  phase: EndpointPhase | null;
  error_code: EndpointErrorCode | null;
  error_message: string | null;
  wait_reason: string | null;
  desired_state: DesiredState;
  curr_replica_cnt: number;
  desired_replica_cnt: number;
  updated_replica_cnt: number;
  created_at: Date;
  updated_at: Date;
  progress: DownloadProgress | null;
  last_request_at: Date | null;
  deleted: boolean;
}

export function toVersion(r: VersionRow): VersionRecord {
  return {
    endpointId: r.endpoint_id,
    versionIndex: r.version_index,
    spec: {
      name: r.name,
      instanceId: r.instance_id,
      model:
        r.wandb_artifact !== null
          ? { source: 'wandb', artifact: r.wandb_artifact }
          : { source: 'hf', repo: r.hf_model_repo!, revision: r.hf_model_repo_revision },
      autoscaling: { minReplica: r.autoscaling_min, maxReplica: r.autoscaling_max, cooldownPeriod: r.autoscaling_cooldown },
      advanced: {
        maxBatchSize: r.max_batch_size,
        maxTokenCount: r.max_token_count,
        maxInputLength: r.max_input_length,
        tokenizerSkipSpecialTokens: r.tokenizer_skip_special_tokens,
        tokenizerAddSpecialTokens: r.tokenizer_add_special_tokens,
        enableContentLogging: r.enable_content_logging,
        ...(r.max_token_count_auto ? { maxTokenCountAuto: true } : {}),
        ...(r.max_input_length_auto ? { maxInputLengthAuto: true } : {}),
      },
    },
    comment: r.comment,
    rolloutState: r.rollout_state,
    rolledBackFrom: r.rolled_back_from,
    model: r.model,
    creatorId: r.creator_id,
    createdAt: r.version_created_at,
  };
}

export function toEndpoint(r: EndpointRow): EndpointRecord {
  return {
    id: r.id,
    seq: Number(r.seq),
    projectId: r.project_id,
    teamId: r.team_id,
    creatorId: r.endpoint_creator_id,
    status: r.status,
    phase: r.phase,
    errorCode: r.error_code,
    errorMessage: r.error_message,
    waitReason: r.wait_reason,
    desiredState: r.desired_state,
    currReplicaCnt: r.curr_replica_cnt,
    desiredReplicaCnt: r.desired_replica_cnt,
    updatedReplicaCnt: r.updated_replica_cnt,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    progress: r.progress,
    lastRequestAt: r.last_request_at,
    deleted: r.deleted,
    current: toVersion(r),
  };
}

export interface EventRow {
  id: string;
  endpoint_id: string;
  project_id: string;
  team_id: string;
  type: EndpointEventType;
  status: EndpointStatus | null;
  phase: EndpointPhase | null;
  error_code: EndpointErrorCode | null;
  version_index: number | null;
  cause: string;
  actor_id: string | null;
  detail: Record<string, unknown> | null;
  created_at: Date;
}

export const EVENT_COLUMNS =
  'id, endpoint_id, project_id, team_id, type, status, phase, error_code, version_index, cause, actor_id, detail, created_at';

export const toEvent = (r: EventRow): EndpointEventRecord => ({
  id: String(r.id),
  endpointId: r.endpoint_id,
  projectId: r.project_id,
  teamId: r.team_id,
  type: r.type,
  status: r.status,
  phase: r.phase,
  errorCode: r.error_code,
  versionIndex: r.version_index,
  cause: r.cause,
  actorId: r.actor_id,
  detail: r.detail,
  createdAt: r.created_at,
});
