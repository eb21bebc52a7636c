/**
 * Where replicas run. The controller asks a runtime to start an engine for
 * one replica, to stop it, and whether it is still alive; it never spawns
 * processes itself. The local runtime (child processes on this machine) is
 * the default; others (a cluster scheduler) would implement the same shape.
 */
import type { GpuType } from '../domain/instance-catalog.js';
import type { EndpointErrorCode } from '../domain/lifecycle.js';

/** What one replica's engine needs to start. */
export interface ReplicaLaunch {
  replicaId: string;
  endpointId: string;
  /** Local model file (GGUF) when one was downloaded. */
  modelPath: string | null;
  /** The hub repository and commit, for engines that fetch models themselves. */
  modelRepo: string;
  modelRevision: string | null;
  gpuType: GpuType;
  numGpu: number;
  maxBatchSize: number;
  /** Tokens of context per sequence: the endpoint's max_token_count. */
  contextSize: number;
  maxInputLength: number;
  addSpecialTokens: boolean;
  skipSpecialTokens: boolean;
}

/** A running replica, as stored in the replicas table so that any process can find it. */
export interface ReplicaHandle {
  replicaId: string;
  /** Base URL of its OpenAI-compatible server, e.g. http://127.0.0.1:41234 */
  address: string;
  pid: number;
  node: string;
  /** The engine's token, sent as a bearer token on every call (engines started before tokens have none). */
  token?: string;
}

/** The Authorization header of every call to an engine (its token, passed at spawn as ENGINE_TOKEN). */
export function engineAuthHeaders(token: string | null | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** The engine's own account of its load, from GET /health. */
export interface EngineHealth {
  status: string;
  active: number;
  queued: number;
  maxBatchSize?: number;
  /** Sequences the engine decodes at once, when fewer than maxBatchSize (the built-in engine: at most 256). */
  sequences?: number;
  totalRequests?: number;
  lastRequestAt?: string | null;
}

/** A failure to start, with the code the endpoint reports. */
export class ReplicaStartError extends Error {
  constructor(
    readonly code: EndpointErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ReplicaStartError';
  }
}

export interface Runtime {
  readonly name: string;
  /** The machine this runtime starts replicas on. */
  readonly node: string;
  /** GPUs (or CPU-backed slots) of each kind this runtime offers. */
  capacity(): Partial<Record<GpuType, number>>;
  /**
   * Starts the engine and resolves once it answers its health check; throws
   * ReplicaStartError. `onSpawned` runs as soon as the process exists (before
   * the model loads), so that its pid can be recorded where another gateway
   * finds it should this one die mid-start; if it throws, the engine is stopped.
   */
  start(launch: ReplicaLaunch, signal?: AbortSignal, onSpawned?: (handle: ReplicaHandle) => Promise<void>): Promise<ReplicaHandle>;
  /** Stops gracefully (SIGTERM, in-flight requests drain), then forcefully after `graceMs`. */
  stop(handle: ReplicaHandle, graceMs: number): Promise<void>;
  isAlive(handle: ReplicaHandle): boolean;
  health(handle: ReplicaHandle, timeoutMs?: number): Promise<EngineHealth | undefined>;
  /** The last lines the replica wrote, for diagnosing a failure (never shown to users). */
  logTail(replicaId: string): Promise<string>;
  /** Stops replicas this runtime knows of on this node that are not in `keep`. */
  reapOrphans(keep: ReadonlySet<string>): Promise<string[]>;
}
