/**
 * SQL for endpoints, their versions and their append-only event log. An
 * endpoint is always read together with its current version, in one
 * statement.
 */
import type { EndpointSpec } from '../domain/endpoint-spec.js';
import type { DesiredState, EndpointErrorCode, EndpointPhase, EndpointStatus } from '../domain/lifecycle.js';
import type { Queryable } from './database.js';
import type { TeamRecord } from './identity-repository.js';
import type { ProjectRecord } from './projects-repository.js';

export type RolloutState = 'RECORDED' | 'ROLLED_OUT' | 'FAILED';

export interface VersionRecord {
  endpointId: string;
  versionIndex: number;
  spec: EndpointSpec;
  comment: string | null;
  rolloutState: RolloutState;
  rolledBackFrom: number | null;
  /** What the model resolved to when this version first started (see ModelStore). */
  model: unknown;
  creatorId: string;
  createdAt: Date;
}

export interface EndpointRecord {
  id: string;
  seq: number;
  projectId: string;
  teamId: string;
  creatorId: string;
  status: EndpointStatus;
  phase: EndpointPhase | null;
  errorCode: EndpointErrorCode | null;
  desiredState: DesiredState;
  currReplicaCnt: number;
  desiredReplicaCnt: number;
  updatedReplicaCnt: number;
  createdAt: Date;
  updatedAt: Date;
  /** Download progress while in DOWNLOADING_MODEL. */
  progress: { bytesDone: number; bytesTotal: number } | null;
  lastRequestAt: Date | null;
  deleted: boolean;
  /** The newest version. */
  current: VersionRecord;
}

export type EndpointEventType = 'CREATED' | 'STATUS_CHANGED' | 'VERSION_ADDED' | 'REPLICAS_CHANGED' | 'DELETED';

export interface EndpointEventInput {
  endpointId: string;
  projectId: string;
  teamId: string;
  type: EndpointEventType;
  status: EndpointStatus | null;
  phase: EndpointPhase | null;
  errorCode: EndpointErrorCode | null;
  versionIndex: number | null;
  /** What caused it: an API action such as `api:sleep`, or a controller step. */
  cause: string;
  actorId: string | null;
  detail?: Record<string, unknown> | null;
}

export interface EndpointEventRecord extends EndpointEventInput {
  id: string;
  createdAt: Date;
}

const VERSION_COLUMNS = `
  v.endpoint_id, v.version_index, v.name, v.instance_id, v.hf_model_repo, v.hf_model_repo_revision, v.wandb_artifact,
  v.autoscaling_min, v.autoscaling_max, v.autoscaling_cooldown, v.max_batch_size, v.max_token_count,
  v.max_input_length, v.tokenizer_skip_special_tokens, v.tokenizer_add_special_tokens,
  v.enable_content_logging, v.comment, v.rollout_state, v.rolled_back_from, v.model, v.creator_id,
  v.created_at AS version_created_at`;

const ENDPOINT_COLUMNS = `
  e.id, e.seq, e.project_id, e.team_id, e.creator_id AS endpoint_creator_id, e.status, e.phase,
  e.error_code, e.desired_state, e.curr_replica_cnt, e.desired_replica_cnt, e.updated_replica_cnt,
  e.created_at, e.updated_at, e.progress, e.last_request_at, e.deleted_at IS NOT NULL AS deleted, ${VERSION_COLUMNS}`;

const CURRENT_VERSION_JOIN = 'JOIN endpoint_versions v ON v.endpoint_id = e.id AND v.version_index = e.current_version';

interface VersionRow {
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

interface EndpointRow extends VersionRow {
  id: string;
  seq: string;
  project_id: string;
  team_id: string;
  endpoint_creator_id: string;
  status: EndpointStatus;
  phase: EndpointPhase | null;
  error_code: EndpointErrorCode | null;
  desired_state: DesiredState;
  curr_replica_cnt: number;
  desired_replica_cnt: number;
  updated_replica_cnt: number;
  created_at: Date;
  updated_at: Date;
  progress: { bytesDone: number; bytesTotal: number } | null;
  last_request_at: Date | null;
  deleted: boolean;
}

function toVersion(r: VersionRow): VersionRecord {
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

function toEndpoint(r: EndpointRow): EndpointRecord {
  return {
    id: r.id,
    seq: Number(r.seq),
    projectId: r.project_id,
    teamId: r.team_id,
    creatorId: r.endpoint_creator_id,
    status: r.status,
    phase: r.phase,
    errorCode: r.error_code,
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

export async function insertEndpoint(
  db: Queryable,
  e: {
    id: string;
    projectId: string;
    teamId: string;
    creatorId: string;
    status: EndpointStatus;
    phase: EndpointPhase | null;
    desiredState: DesiredState;
    idempotencyKey?: string | null;
  },
): Promise<boolean> {
  // With a key, a concurrent insert of the same key waits for the other to commit, then inserts nothing.
  const rows = await db`
    INSERT INTO endpoints (id, project_id, team_id, creator_id, status, phase, desired_state, idempotency_key)
    VALUES (${e.id}, ${e.projectId}, ${e.teamId}, ${e.creatorId}, ${e.status}, ${e.phase}, ${e.desiredState}, ${e.idempotencyKey ?? null})
    ON CONFLICT (project_id, idempotency_key) WHERE idempotency_key IS NOT NULL AND deleted_at IS NULL DO NOTHING
    RETURNING 1`;
  return rows.length > 0;
}

/** The live endpoint an idempotency key created in a project. */
export async function findEndpointIdByKey(db: Queryable, projectId: string, idempotencyKey: string): Promise<string | undefined> {
  const rows = await db<{ id: string }[]>`
    SELECT id FROM endpoints WHERE project_id = ${projectId} AND idempotency_key = ${idempotencyKey} AND deleted_at IS NULL`;
  return rows[0]?.id;
}

export async function insertVersion(
  db: Queryable,
  v: {
    endpointId: string;
    versionIndex: number;
    spec: EndpointSpec;
    comment: string | null;
    creatorId: string;
    rolledBackFrom?: number | null;
  },
): Promise<void> {
  const { spec } = v;
  const hub = spec.model.source === 'hf' ? spec.model : null;
  const artifact = spec.model.source === 'wandb' ? spec.model.artifact : null;
  await db`
    INSERT INTO endpoint_versions (
      endpoint_id, version_index, name, instance_id, hf_model_repo, hf_model_repo_revision, wandb_artifact,
      autoscaling_min, autoscaling_max, autoscaling_cooldown, max_batch_size, max_token_count,
      max_input_length, tokenizer_skip_special_tokens, tokenizer_add_special_tokens,
      enable_content_logging, comment, rolled_back_from, creator_id
    ) VALUES (
      ${v.endpointId}, ${v.versionIndex}, ${spec.name}, ${spec.instanceId}, ${hub?.repo ?? null},
      ${hub?.revision ?? null}, ${artifact}, ${spec.autoscaling.minReplica}, ${spec.autoscaling.maxReplica},
      ${spec.autoscaling.cooldownPeriod}, ${spec.advanced.maxBatchSize}, ${spec.advanced.maxTokenCount},
      ${spec.advanced.maxInputLength}, ${spec.advanced.tokenizerSkipSpecialTokens},
      ${spec.advanced.tokenizerAddSpecialTokens}, ${spec.advanced.enableContentLogging}, ${v.comment},
      ${v.rolledBackFrom ?? null}, ${v.creatorId}
    )`;
}

/** Which endpoints a read sees: live ones, or (for the controller, which cleans up after a delete) deleted ones too. */
export interface EndpointVisibility {
  includeDeleted?: boolean;
}

/** Endpoints by id, with their current versions; live ones only unless asked. */
export async function findEndpoints(db: Queryable, ids: readonly string[], options: EndpointVisibility = {}): Promise<EndpointRecord[]> {
  const rows = await db<EndpointRow[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)} FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    WHERE e.id = ANY(${ids as string[]}) ${options.includeDeleted ? db`` : db`AND e.deleted_at IS NULL`}`;
  return rows.map(toEndpoint);
}

export interface EndpointWithOwners {
  endpoint: EndpointRecord;
  project: ProjectRecord;
  team: TeamRecord;
}

/**
 * Live endpoints with their project and team, in one statement: a reader
 * that shows an endpoint's owners needs no second and third round trip.
 */
export async function findEndpointsWithOwners(db: Queryable, ids: readonly string[]): Promise<EndpointWithOwners[]> {
  const rows = await db<(EndpointRow & { project_name: string; project_created_at: Date; team_name: string; team_created_at: Date })[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)}, p.name AS project_name, p.created_at AS project_created_at,
      t.name AS team_name, t.created_at AS team_created_at
    FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    JOIN projects p ON p.id = e.project_id
    JOIN teams t ON t.id = e.team_id
    WHERE e.id = ANY(${ids as string[]}) AND e.deleted_at IS NULL`;
  return rows.map((r) => ({
    endpoint: toEndpoint(r),
    project: { id: r.project_id, teamId: r.team_id, name: r.project_name, createdAt: r.project_created_at },
    team: { id: r.team_id, name: r.team_name, createdAt: r.team_created_at },
  }));
}

/**
 * Row-locks one live endpoint for the rest of the transaction, then reads it.
 * The lock is taken alone first: a locking read that joins the current
 * version would, after waiting on a concurrent writer, re-check the join
 * against a version row its snapshot cannot see, and find nothing. The read
 * that follows is a new statement with a fresh snapshot.
 */
export async function lockEndpoint(db: Queryable, id: string, options: EndpointVisibility = {}): Promise<EndpointRecord | undefined> {
  const locked = await db`
    SELECT 1 FROM endpoints WHERE id = ${id} ${options.includeDeleted ? db`` : db`AND deleted_at IS NULL`} FOR UPDATE`;
  if (locked.length === 0) return undefined;
  const [endpoint] = await findEndpoints(db, [id], options);
  return endpoint;
}

/** One page of live endpoints in creation order, in the given projects or teams. */
export async function listEndpoints(
  db: Queryable,
  scope: { projectIds: readonly string[] } | { teamIds: readonly string[] },
  page: { afterSeq: number; limit: number },
): Promise<EndpointRecord[]> {
  const filter =
    'projectIds' in scope ? db`e.project_id = ANY(${scope.projectIds as string[]})` : db`e.team_id = ANY(${scope.teamIds as string[]})`;
  const rows = await db<EndpointRow[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)} FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    WHERE ${filter} AND e.deleted_at IS NULL AND e.seq > ${page.afterSeq}
    ORDER BY e.seq LIMIT ${page.limit}`;
  return rows.map(toEndpoint);
}

export async function listVersions(
  db: Queryable,
  endpointId: string,
  page: { afterIndex: number; limit: number },
): Promise<VersionRecord[]> {
  const rows = await db<VersionRow[]>`
    SELECT ${db.unsafe(VERSION_COLUMNS)} FROM endpoint_versions v
    WHERE v.endpoint_id = ${endpointId} AND v.version_index > ${page.afterIndex}
    ORDER BY v.version_index LIMIT ${page.limit}`;
  return rows.map(toVersion);
}

export async function findVersion(db: Queryable, endpointId: string, versionIndex: number): Promise<VersionRecord | undefined> {
  const rows = await db<VersionRow[]>`
    SELECT ${db.unsafe(VERSION_COLUMNS)} FROM endpoint_versions v
    WHERE v.endpoint_id = ${endpointId} AND v.version_index = ${versionIndex}`;
  return rows[0] && toVersion(rows[0]);
}

export async function countVersions(db: Queryable, endpointIds: readonly string[]): Promise<Map<string, number>> {
  const rows = await db<{ endpoint_id: string; n: number }[]>`
    SELECT endpoint_id, count(*)::int AS n FROM endpoint_versions
    WHERE endpoint_id = ANY(${endpointIds as string[]}) GROUP BY endpoint_id`;
  return new Map(rows.map((r) => [r.endpoint_id, r.n]));
}

export async function updateEndpointState(
  db: Queryable,
  id: string,
  change: {
    status: EndpointStatus;
    phase: EndpointPhase | null;
    errorCode: EndpointErrorCode | null;
    desiredState: DesiredState;
    currentVersion?: number;
  },
): Promise<void> {
  await db`
    UPDATE endpoints SET
      status = ${change.status},
      phase = ${change.phase},
      error_code = ${change.errorCode},
      desired_state = ${change.desiredState},
      current_version = coalesce(${change.currentVersion ?? null}::int, current_version),
      updated_at = now()
    WHERE id = ${id}`;
}

export interface ReplicaCounts {
  currReplicaCnt: number;
  desiredReplicaCnt: number;
  updatedReplicaCnt: number;
}

export async function setReplicaCounts(db: Queryable, id: string, counts: ReplicaCounts): Promise<void> {
  await db`
    UPDATE endpoints SET curr_replica_cnt = ${counts.currReplicaCnt}, desired_replica_cnt = ${counts.desiredReplicaCnt},
      updated_replica_cnt = ${counts.updatedReplicaCnt}, updated_at = now()
    WHERE id = ${id}`;
}

export async function setProgress(db: Queryable, id: string, progress: { bytesDone: number; bytesTotal: number } | null): Promise<void> {
  const rows = await db`
    UPDATE endpoints SET progress = ${progress ? db.json(progress) : null}
    WHERE id = ${id} AND progress IS DISTINCT FROM ${progress ? db.json(progress) : null}::jsonb RETURNING 1`;
  if (progress && rows.length > 0) await db`SELECT pg_notify('endpoint_progress', ${id})`;
}

export async function markEndpointCleaned(db: Queryable, id: string): Promise<void> {
  await db`UPDATE endpoints SET cleaned_at = now() WHERE id = ${id}`;
}

export async function setVersionRollout(
  db: Queryable,
  endpointId: string,
  versionIndex: number,
  change: { rolloutState: RolloutState; model?: unknown },
): Promise<void> {
  await db`
    UPDATE endpoint_versions SET rollout_state = ${change.rolloutState},
      model = coalesce(${change.model === undefined ? null : db.json(change.model as never)}, model)
    WHERE endpoint_id = ${endpointId} AND version_index = ${versionIndex}`;
}

export async function markEndpointDeleted(db: Queryable, id: string): Promise<void> {
  await db`UPDATE endpoints SET deleted_at = now(), desired_state = 'DELETED', updated_at = now() WHERE id = ${id}`;
}

/**
 * Appends an event. Writers take one transaction-level lock first, so event
 * ids are assigned in commit order: a subscriber that has seen event N has
 * seen every event below N, and can resume from N without a gap. The lock
 * and the insert are one statement: the materialized CTE takes the lock
 * before the row (and so its id) is made, and the lock is held from there
 * to commit.
 */
export async function insertEvent(db: Queryable, event: EndpointEventInput): Promise<string> {
  const [row] = await db<{ id: string }[]>`
    WITH ordered AS MATERIALIZED (SELECT pg_advisory_xact_lock(7266431003))
    INSERT INTO endpoint_events (
      endpoint_id, project_id, team_id, type, status, phase, error_code, version_index, cause, actor_id, detail
    ) SELECT
      ${event.endpointId}, ${event.projectId}, ${event.teamId}, ${event.type}, ${event.status}, ${event.phase},
      ${event.errorCode}, ${event.versionIndex}, ${event.cause}, ${event.actorId},
      ${event.detail ? db.json(event.detail as never) : null}
    FROM ordered
    RETURNING id`;
  return row!.id;
}

interface EventRow {
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

const EVENT_COLUMNS =
  'id, endpoint_id, project_id, team_id, type, status, phase, error_code, version_index, cause, actor_id, detail, created_at';

const toEvent = (r: EventRow): EndpointEventRecord => ({
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

export type EventScope = { endpointId: string } | { projectId: string };

const scopeFilter = (db: Queryable, scope: EventScope) =>
  'endpointId' in scope ? db`endpoint_id = ${scope.endpointId}` : db`project_id = ${scope.projectId}`;

/** Events of an endpoint or a project after an event id, oldest first. */
export async function listEvents(db: Queryable, scope: EventScope, afterId = '0', limit = 1000): Promise<EndpointEventRecord[]> {
  const filter = scopeFilter(db, scope);
  const rows = await db<EventRow[]>`
    SELECT ${db.unsafe(EVENT_COLUMNS)} FROM endpoint_events
    WHERE ${filter} AND id > ${afterId}::bigint ORDER BY id LIMIT ${limit}`;
  return rows.map(toEvent);
}

/** The newest event id of an endpoint or a project ('0' when it has none). */
export async function latestEventId(db: Queryable, scope: EventScope): Promise<string> {
  const [row] = await db<{ id: string | null }[]>`SELECT max(id)::text AS id FROM endpoint_events WHERE ${scopeFilter(db, scope)}`;
  return row?.id ?? '0';
}

export async function findEvents(db: Queryable, ids: readonly string[]): Promise<EndpointEventRecord[]> {
  const rows = await db<EventRow[]>`
    SELECT ${db.unsafe(EVENT_COLUMNS)} FROM endpoint_events WHERE id = ANY(${ids as string[]}::bigint[]) ORDER BY id`;
  return rows.map(toEvent);
}
