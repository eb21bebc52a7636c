/** SQL for endpoint versions: each update appends one; the endpoint points at its current one. */
import type { RolloutState, VersionRecord } from '../domain/endpoint.js';
import type { EndpointSpec } from '../domain/endpoint-spec.js';
import type { Queryable } from './database.js';
import { toVersion, VERSION_COLUMNS, type VersionRow } from './endpoint-rows.js';

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
      enable_content_logging, comment, rolled_back_from, creator_id, max_token_count_auto, max_input_length_auto
    ) VALUES (
      ${v.endpointId}, ${v.versionIndex}, ${spec.name}, ${spec.instanceId}, ${hub?.repo ?? null},
      ${hub?.revision ?? null}, ${artifact}, ${spec.autoscaling.minReplica}, ${spec.autoscaling.maxReplica},
      ${spec.autoscaling.cooldownPeriod}, ${spec.advanced.maxBatchSize}, ${spec.advanced.maxTokenCount},
      ${spec.advanced.maxInputLength}, ${spec.advanced.tokenizerSkipSpecialTokens},
      ${spec.advanced.tokenizerAddSpecialTokens}, ${spec.advanced.enableContentLogging}, ${v.comment},
      ${v.rolledBackFrom ?? null}, ${v.creatorId}, ${spec.advanced.maxTokenCountAuto === true},
      ${spec.advanced.maxInputLengthAuto === true}
    )`;
}

/** Versions after `afterIndex` in the page's order: oldest first (index above it), or newest first (index below it). */
export async function listVersions(
  db: Queryable,
  endpointId: string,
  page: { afterIndex: number; limit: number; newestFirst?: boolean },
): Promise<VersionRecord[]> {
  const rows = page.newestFirst
    ? await db<VersionRow[]>`
        SELECT ${db.unsafe(VERSION_COLUMNS)} FROM endpoint_versions v
        WHERE v.endpoint_id = ${endpointId} AND v.version_index < ${page.afterIndex}
        ORDER BY v.version_index DESC LIMIT ${page.limit}`
    : await db<VersionRow[]>`
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

/**
 * Marks a version's rollout (and the model it resolved to) while `owner` holds the endpoint's lease (its row
 * share-locked): a controller that lost the lease while it decided writes nothing. False when nothing was written.
 */
export async function setVersionRollout(
  db: Queryable,
  owner: string,
  endpointId: string,
  versionIndex: number,
  change: { rolloutState: RolloutState; model?: unknown },
): Promise<boolean> {
  const rows = await db`
    UPDATE endpoint_versions SET rollout_state = ${change.rolloutState},
      model = coalesce(${change.model === undefined ? null : db.json(change.model as never)}, model)
    WHERE endpoint_id = ${endpointId} AND version_index = ${versionIndex}
      AND EXISTS (SELECT 1 FROM endpoint_leases l
        WHERE l.endpoint_id = ${endpointId} AND l.owner = ${owner} AND l.expires_at > now() FOR SHARE)
    RETURNING version_index`;
  return rows.length === 1;
}
