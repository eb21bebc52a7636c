/**
 * Why a replica could not be started, as the endpoint shows it: each error a
 * start can throw maps to an endpoint error code, and to a message that is
 * safe to show a user (our own errors carry user-safe text; anything else,
 * such as a database or programming error, is not shown).
 */
import type { EndpointErrorCode } from '../domain/lifecycle.js';
import { ModelSourceError } from '../models/errors.js';
import { SettingsError } from '../models/model-store.js';
import { EngineCommandError } from '../runtime/engine-command.js';
import { ReplicaStartError } from '../runtime/runtime.js';

/** The replica's engine started but its warm-up generation failed. */
export class WarmupError extends Error {}

export function startErrorCode(error: unknown): EndpointErrorCode {
  if (error instanceof ModelSourceError) return error.code;
  if (error instanceof SettingsError) return 'WORKLOAD_INIT_SETTINGS_ERROR';
  if (error instanceof ReplicaStartError) return error.code;
  if (error instanceof EngineCommandError) return 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR';
  if (error instanceof WarmupError) return 'INFERENCE_ENGINE_UNKNOWN_ERROR';
  return 'WORKLOAD_INIT_UNKNOWN_ERROR';
}

/** A message for the event log and the replica's row. */
export function startErrorMessage(error: unknown): string {
  if (
    error instanceof ModelSourceError ||
    error instanceof SettingsError ||
    error instanceof ReplicaStartError ||
    error instanceof WarmupError ||
    error instanceof EngineCommandError
  ) {
    return error.message;
  }
  return 'the replica could not be started';
}
