/**
 * The one way an endpoint's status changes: the new status, phase and error
 * code are written together with a STATUS_CHANGED event, in the caller's
 * transaction. The API actions and the controller both come through here.
 */
import type { DesiredState, EndpointErrorCode, EndpointPhase, EndpointStatus } from '../domain/lifecycle.js';
import type { EndpointEventInput, EndpointRecord, ReplicaCounts } from '../domain/endpoint.js';
import type { Queryable } from '../storage/database.js';
import { updateEndpointState } from '../storage/endpoints-repository.js';
import { insertEvent } from '../storage/events-repository.js';

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

/** Writes the change; appends an event when status, phase or error code changed. Returns whether it did. */
export async function writeStatus(db: Queryable, endpoint: EndpointRecord, change: StatusChange): Promise<boolean> {
  const event = await writeStatusRow(db, endpoint, change);
  if (event) await insertEvent(db, event);
  return event !== undefined;
}

/**
 * writeStatus in two parts: writes the row now, and answers its event (when status, phase or error code changed) for
 * the caller to append later in the same transaction (last, so that the event order lock is held the shortest).
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
