/**
 * The one way the API changes an endpoint's status: the new status, phase and
 * error code are written with a STATUS_CHANGED event, in the caller's
 * transaction (the controller's transitions are one statement of their own:
 * storage/endpoint-transitions.ts).
 */
import type { DesiredState, EndpointErrorCode, EndpointPhase, EndpointStatus } from '../domain/lifecycle.js';
import type { EndpointEventInput, EndpointRecord, ReplicaCounts } from '../domain/endpoint.js';
import type { Queryable } from '../storage/database.js';
import { updateEndpointState } from '../storage/endpoints-repository.js';

export interface StatusChange {
  status: EndpointStatus;
  phase: EndpointPhase | null;
  errorCode: EndpointErrorCode | null;
  desiredState?: DesiredState;
  currentVersion?: number;
  /** `api:<action>` or `controller:<step>`. */
  cause: string;
  actorId: string | null;
  detail?: Record<string, unknown>;
}

/**
 * Writes the row now, and answers its event (when status, phase or error code changed) for the caller to append at
 * the end of the same transaction (last, with the commit: the event order lock held the shortest).
 */
export async function writeStatusRow(
  db: Queryable,
  endpoint: EndpointRecord,
  change: StatusChange,
): Promise<EndpointEventInput | undefined> {
  await updateEndpointState(db, endpoint.id, {
    status: change.status,
    phase: change.phase,
    errorCode: change.errorCode,
    desiredState: change.desiredState ?? endpoint.desiredState,
    ...(change.currentVersion !== undefined ? { currentVersion: change.currentVersion } : {}),
  });
  const changed = change.status !== endpoint.status || change.phase !== endpoint.phase || change.errorCode !== endpoint.errorCode;
  if (!changed) return undefined;
  return {
    endpointId: endpoint.id,
    projectId: endpoint.projectId,
    teamId: endpoint.teamId,
    type: 'STATUS_CHANGED',
    status: change.status,
    phase: change.phase,
    errorCode: change.errorCode,
    versionIndex: change.currentVersion ?? null,
    cause: change.cause,
    actorId: change.actorId,
    detail: change.detail ?? null,
  };
}

/** Whether the endpoint already shows these counts. */
export function showsCounts(endpoint: EndpointRecord, counts: ReplicaCounts): boolean {
  return (
    counts.currReplicaCnt === endpoint.currReplicaCnt &&
    counts.desiredReplicaCnt === endpoint.desiredReplicaCnt &&
    counts.updatedReplicaCnt === endpoint.updatedReplicaCnt
  );
}
