/**
 * The REST wire shapes: the documented error body, and the status and spec
 * objects of the contract, built from the stored records.
 */
import type { ServerResponse } from 'node:http';
import { hubModelOf } from '../../domain/endpoint-spec.js';
import { findInstanceOption } from '../../domain/instance-catalog.js';
import type { DomainError } from '../../domain/result.js';
import { reportedStatus, reportsPhase, type LifecycleAction } from '../../domain/lifecycle.js';
import type { EndpointRecord, VersionRecord } from '../../storage/endpoints-repository.js';

export type ErrorCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'INVALID_ARGUMENT'
  | 'INVALID_TRANSITION'
  | 'CONFLICT'
  | 'RESOURCE_EXHAUSTED'
  /** 503 with Retry-After: a dependency (the database) cannot be reached; the request did nothing. */
  | 'UNAVAILABLE'
  | 'INTERNAL';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export function httpErrorOf(error: DomainError): HttpError {
  switch (error.type) {
    case 'UNAUTHENTICATED':
      return new HttpError(401, 'UNAUTHENTICATED', error.message, undefined, { 'www-authenticate': 'Bearer' });
    case 'FORBIDDEN':
      return new HttpError(403, 'FORBIDDEN', error.message);
    case 'NOT_FOUND':
      return new HttpError(404, 'NOT_FOUND', error.message);
    case 'INVALID_ARGUMENT':
      return new HttpError(400, 'INVALID_ARGUMENT', error.message, { fields: error.fields });
    case 'INVALID_TRANSITION':
      return new HttpError(409, 'INVALID_TRANSITION', error.message, { status: error.status, action: error.action });
    case 'CONFLICT':
      return new HttpError(409, 'CONFLICT', error.message);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

export function sendError(res: ServerResponse, error: HttpError): void {
  const body = { error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) } };
  sendJson(res, error.status, body, error.headers);
}

/**
 * The status object of an endpoint, as the answer to `action`: `phase` is left
 * out of the sleep and terminate answers, as documented. While the model
 * downloads, `progress` (ext) carries the bytes done and total.
 */
export function statusObject(endpoint: EndpointRecord, action: LifecycleAction | 'create' | 'status' = 'status') {
  return {
    endpointId: endpoint.id,
    status: reportedStatus(action, endpoint.status),
    ...(reportsPhase(action) ? { phase: endpoint.phase } : {}),
    ...(endpoint.phase === 'DOWNLOADING_MODEL' && endpoint.progress ? { progress: endpoint.progress } : {}),
    errorCode: endpoint.errorCode,
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
    currReplicaCnt: endpoint.currReplicaCnt,
    desiredReplicaCnt: endpoint.desiredReplicaCnt,
    updatedReplicaCnt: endpoint.updatedReplicaCnt,
    endpointId: endpoint.id,
    hfModelRepo: hubModelOf(spec).repo,
    hfModelRepoRevision: hubModelOf(spec).revision,
    versionIndex: version.versionIndex,
    versionComment: version.comment,
    createdAt: version.createdAt.toISOString(),
  };
}
