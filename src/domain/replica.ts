/** A replica: one running copy of an endpoint's version, on one node's GPUs (its moves: replica-transitions.ts). */
import type { GpuType } from './instance-catalog.js';

export const REPLICA_STATES = ['STARTING', 'READY', 'DRAINING', 'STOPPED', 'FAILED'] as const;
export type ReplicaState = (typeof REPLICA_STATES)[number];

/** The states in which a replica holds its GPUs. */
export const LIVE_REPLICA_STATES: readonly ReplicaState[] = ['STARTING', 'READY', 'DRAINING'];

export interface ReplicaRecord {
  id: string;
  endpointId: string;
  versionIndex: number;
  runtime: string;
  node: string;
  gpuType: GpuType;
  numGpu: number;
  state: ReplicaState;
  address: string | null;
  /** Where its runtime placed it, in the runtime's own terms (a process id, a pod's name). */
  locator: string | null;
  /** The engine's own token (ENGINE_TOKEN at spawn): calls to the replica carry it as a bearer token. */
  token: string | null;
  lastError: string | null;
  createdAt: Date;
  readyAt: Date | null;
  /**
   * What its start resolved the version's model to (see ModelStore), written with its placement; read by the
   * controller's passes while it starts (null elsewhere), so that a gateway that adopts it records that model.
   */
  model?: unknown;
}
