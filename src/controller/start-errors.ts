/**
 * Why a replica could not be started, as the endpoint shows it: each error a
 * start can throw maps to an endpoint error code, and to a message that is
 * safe to show a user (our own errors carry user-safe text; anything else,
 * such as a database or programming error, is not shown).
 */
import { failureAdvice, ROLLOUT_FAILURE_ADVICE } from '../domain/failure-advice.js';
import type { EndpointErrorCode } from '../domain/lifecycle.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { ModelSourceError } from '../models/errors.js';
import { SettingsError } from '../models/model-store.js';
import { EngineCommandError } from '../runtime/engine-command.js';
import { ReplicaStartError, RuntimeUnavailableError } from '../runtime/runtime.js';
import { isDatabaseUnavailable } from '../storage/database-errors.js';

/** The replica's engine started but its warm-up generation failed. */
export class WarmupError extends Error {}

/**
 * A start (or rollout) that failed because this gateway lost its database connection (a restart, a failover) or
 * its runtime's control plane (a Kubernetes API server down) did not fail because of the endpoint: it is not
 * recorded as the endpoint's failure, and the next pass starts again (or resumes the replica it had placed).
 * A bare socket error counts: a start's other calls (hub, registry, engine) wrap theirs in the errors above.
 */
export function isGatewayOutage(error: unknown): boolean {
  return error instanceof RuntimeUnavailableError || isDatabaseUnavailable(error);
}

/**
 * What a start ended by an interruption (its endpoint changed meanwhile: a StaleError; an outage before it was
 * placed) records as the replica's last error, shown to the endpoint's team: our own errors' words, never a database
 * driver's (which name the database's host and port).
 */
export function interruptionMessage(error: unknown): string {
  if (isDatabaseUnavailable(error)) return 'interrupted: the gateway lost its database connection for a moment; another replica is started';
  return error instanceof Error ? error.message : 'interrupted';
}

export function startErrorCode(error: unknown): EndpointErrorCode {
  if (error instanceof ModelSourceError) return error.code;
  if (error instanceof SettingsError) return 'WORKLOAD_INIT_SETTINGS_ERROR';
  if (error instanceof ReplicaStartError) return error.code;
  if (error instanceof EngineCommandError) return 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR';
  if (error instanceof WarmupError) return 'INFERENCE_ENGINE_UNKNOWN_ERROR';
  return 'WORKLOAD_INIT_UNKNOWN_ERROR';
}

/** Whether a start failed for a reason the user can read (a wrong repository, settings, the engine), not a fault of ours. */
export function isKnownStartError(error: unknown): boolean {
  return (
    error instanceof ModelSourceError ||
    error instanceof SettingsError ||
    error instanceof ReplicaStartError ||
    error instanceof WarmupError ||
    error instanceof EngineCommandError
  );
}

/** A message for the event log and the replica's row. */
export function startErrorMessage(error: unknown): string {
  if (isKnownStartError(error)) return (error as Error).message;
  return 'the replica could not be started';
}

/**
 * The endpoint's status message after a failed start: what went wrong and what
 * to do, e.g. "max_token_count (4096) is larger than the model's context (2048
 * tokens): lower max_token_count to at most 2048 with an update, then restart
 * the endpoint." Safe to show, as startErrorMessage is.
 */
export function failureMessage(error: unknown, during: 'start' | 'rollout' = 'start'): string {
  const what = startErrorMessage(error).replace(/[.\s]+$/, '');
  if (during === 'rollout') return `${what}: ${ROLLOUT_FAILURE_ADVICE}.`;
  const advice = error instanceof SettingsError && error.advice ? error.advice : failureAdvice(startErrorCode(error));
  return `${what}: ${advice}.`;
}

/** A start that failed, for the next pass to tell the endpoint. */
export interface StartFailure {
  replicaId: string;
  versionIndex: number;
  error: unknown;
}

/** What a pass learns of the endpoint's starting replicas. */
export interface StartsSeen {
  /** A starting replica whose state the runtime cannot tell: the endpoint waits for a pass that can. */
  unknown: boolean;
  /** Starts that failed since the last pass. */
  failed: StartFailure[];
  /**
   * Placed replicas that wait for a machine (a Pod no node can take yet: the cluster is full, or an autoscaler adds
   * a node). They wait as the first one does, up to the runtime's deadline, and count as starting.
   */
  waitingForNode: string[];
  /** The starting replicas still on their way after this pass (not failed, not given up). */
  starting: ReplicaRecord[];
}
