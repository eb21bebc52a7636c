/**
 * What an endpoint is, as every layer sees it: the endpoint with its current
 * version, its versions, and the events of its append-only log. Storage maps
 * rows to these types; the surfaces map them to their wire shapes.
 */
import type { EndpointSpec } from './endpoint-spec.js';
import type { DesiredState, EndpointErrorCode, EndpointPhase, EndpointStatus } from './lifecycle.js';

/** RECORDED: not applied yet; ROLLED_OUT: replicas ran it; FAILED: its rollout failed. */
export const ROLLOUT_STATES = ['RECORDED', 'ROLLED_OUT', 'FAILED'] as const;
export type RolloutState = (typeof ROLLOUT_STATES)[number];

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

/** Bytes of the model downloaded so far (a type, not an interface: it is stored as JSON). */
export type DownloadProgress = { bytesDone: number; bytesTotal: number };

/** The replica counts an endpoint shows. */
export interface ReplicaCounts {
  currReplicaCnt: number;
  desiredReplicaCnt: number;
  updatedReplicaCnt: number;
}

export interface EndpointRecord extends ReplicaCounts {
  id: string;
  seq: number;
  projectId: string;
  teamId: string;
  creatorId: string;
  status: EndpointStatus;
  phase: EndpointPhase | null;
  errorCode: EndpointErrorCode | null;
  /** What went wrong and what to do, while errorCode is set (see statusMessage in failure-advice.ts). */
  errorMessage?: string | null;
  /** Why it waits, while its phase is REQUESTING_VIRTUAL_MACHINE (no machine free, or a scheduler's message). */
  waitReason?: string | null;
  desiredState: DesiredState;
  createdAt: Date;
  updatedAt: Date;
  /** Download progress while in DOWNLOADING_MODEL. */
  progress: DownloadProgress | null;
  lastRequestAt: Date | null;
  deleted: boolean;
  /** The newest version. */
  current: VersionRecord;
}

/** RETRYING: a hub or registry call (or download) failed transiently and is retried; `detail` says which attempt, when and why. */
export const ENDPOINT_EVENT_TYPES = ['CREATED', 'STATUS_CHANGED', 'VERSION_ADDED', 'REPLICAS_CHANGED', 'DELETED', 'RETRYING'] as const;
export type EndpointEventType = (typeof ENDPOINT_EVENT_TYPES)[number];

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

/** Whose events: one endpoint's, or every endpoint's of a project. */
export type EventScope = { endpointId: string } | { projectId: string };

/** The largest event id: endpoint_events.id is a bigint. */
const MAX_EVENT_ID = 2n ** 63n - 1n;
export const EVENT_ID_RULE = `must be an event id: decimal digits, from 0 to ${MAX_EVENT_ID}`;

/** An event id a client sent (a subscription's `after`) in its canonical form, or undefined when it is none. */
export function parseEventId(text: string): string | undefined {
  if (!/^\d{1,19}$/.test(text)) return undefined;
  const id = BigInt(text);
  return id <= MAX_EVENT_ID ? id.toString() : undefined;
}
