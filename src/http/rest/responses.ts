/**
 * The REST wire shapes: the status and spec objects of the contract, built
 * from the stored records. (Errors: ./errors.ts.)
 */
import { hubModelOf } from '../../domain/endpoint-spec.js';
import { statusMessage } from '../../domain/failure-advice.js';
import { findInstanceOption } from '../../domain/instance-catalog.js';
import { reportedStatus, reportsPhase, type LifecycleAction } from '../../domain/lifecycle.js';
import type { EndpointRecord, VersionRecord } from '../../domain/endpoint.js';
import type { ResolvedModel } from '../../models/model-store.js';

/**
 * The status object of an endpoint, as the answer to `action`: `phase` is left
 * out of the sleep and terminate answers, as documented. While the model
 * downloads, `progress` (ext) carries the bytes done and total; `errorMessage`
 * (ext) explains errorCode.
 */
export function statusObject(endpoint: EndpointRecord, action: LifecycleAction | 'create' | 'status' = 'status') {
  return {
    endpointId: endpoint.id,
    status: reportedStatus(action, endpoint.status),
    ...(reportsPhase(action) ? { phase: endpoint.phase } : {}),
    ...(endpoint.phase === 'DOWNLOADING_MODEL' && endpoint.progress ? { progress: endpoint.progress } : {}),
    errorCode: endpoint.errorCode,
    // ext: what went wrong and what to do, only while errorCode is set.
    ...(endpoint.errorCode ? { errorMessage: statusMessage(endpoint) } : {}),
    // ext: why it waits for a machine, while the phase is REQUESTING_VIRTUAL_MACHINE.
    ...(endpoint.phase === 'REQUESTING_VIRTUAL_MACHINE' && endpoint.waitReason ? { waitReason: endpoint.waitReason } : {}),
    createdAt: endpoint.createdAt.toISOString(),
    updatedAt: endpoint.updatedAt.toISOString(),
  };
}

/** The spec object of one version of the endpoint (the current one by default). */
export function specObject(endpoint: EndpointRecord, version: VersionRecord = endpoint.current) {
  const { spec } = version;
  const option = findInstanceOption(spec.instanceId);
  return {
    name: spec.name,
    gpuType: option?.gpuType ?? null,
    numGpu: option?.numGpu ?? null,
    instanceId: spec.instanceId,
    projectId: endpoint.projectId,
    creatorId: endpoint.creatorId,
    teamId: endpoint.teamId,
    autoscalingMin: spec.autoscaling.minReplica,
    autoscalingMax: spec.autoscaling.maxReplica,
    autoscalingCooldown: spec.autoscaling.cooldownPeriod,
    maxBatchSize: spec.advanced.maxBatchSize,
    maxInputLength: spec.advanced.maxInputLength,
    tokenizerSkipSpecialTokens: spec.advanced.tokenizerSkipSpecialTokens,
    tokenizerAddSpecialTokens: spec.advanced.tokenizerAddSpecialTokens,
    // ext: the rest of `advanced`, so that versions differing only there differ here too.
    maxTokenCount: spec.advanced.maxTokenCount,
    // ext: max_token_count was left out and follows the model (a placeholder until the first start reads it).
    maxTokenCountFromModel: spec.advanced.maxTokenCountAuto === true,
    enableContentLogging: spec.advanced.enableContentLogging,
    currReplicaCnt: endpoint.currReplicaCnt,
    desiredReplicaCnt: endpoint.desiredReplicaCnt,
    updatedReplicaCnt: endpoint.updatedReplicaCnt,
    endpointId: endpoint.id,
    hfModelRepo: hubModelOf(spec).repo,
    hfModelRepoRevision: hubModelOf(spec).revision,
    // ext: the registry artifact, for an endpoint made from one (hfModelRepo is then null), as GraphQL's spec has it.
    wandbArtifact: wandbArtifactOf(version),
    versionIndex: version.versionIndex,
    versionComment: version.comment,
    createdAt: version.createdAt.toISOString(),
  };
}

/**
 * The W&B registry artifact a version serves (null for a hub model): as
 * requested, and once the version has started, the concrete version, digest
 * and file it resolved to (GraphQL's `EndpointSpec.wandbArtifact`).
 */
function wandbArtifactOf(version: VersionRecord) {
  const { model } = version.spec;
  if (model.source !== 'wandb') return null;
  const stored = version.model as ResolvedModel | null;
  const resolved = stored?.source === 'wandb' ? stored : null;
  return {
    name: model.artifact,
    version: resolved ? (resolved.artifact.split(':').pop() ?? null) : null,
    digest: resolved?.digest ?? null,
    file: resolved?.file ?? null,
  };
}

/**
 * One entry of the version history: the version's spec object, then (ext)
 * what GraphQL's `EndpointVersion` tells of the version itself, so that the
 * two surfaces hold the same data. `rolloutState` is how a client sees that a
 * rollout failed: the endpoint goes back to RUNNING with its errorCode set,
 * and the version it tried reads FAILED.
 */
export function versionEntry(endpoint: EndpointRecord, version: VersionRecord) {
  return {
    ...specObject(endpoint, version),
    // ext: RECORDED (not applied yet), ROLLED_OUT (replicas ran it) or FAILED (its rollout or start failed).
    rolloutState: version.rolloutState,
    // ext: for a rollback, the version it copies.
    rolledBackFrom: version.rolledBackFrom,
    // ext: who made this version (creatorId is the endpoint's creator).
    versionCreatorId: version.creatorId,
  };
}
