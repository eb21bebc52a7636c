/**
 * Steps of a replica's start that need nothing of the starter's state: the
 * limits a model's first start records in its version, the warm-up
 * generation that makes a replica ready, and a step shown as the endpoint's
 * phase.
 */
import type { VersionRecord } from '../domain/endpoint.js';
import type { ControllerEvent, LifecycleState } from '../domain/lifecycle.js';
import { EngineStatusError, type EngineClient } from '../engine-client/engine-client.js';
import type { TokenLimits } from '../models/token-limits.js';
import type { ReplicaRef, StartProgress } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import type { EndpointWrites } from './endpoint-writes.js';
import { WarmupError } from './start-errors.js';

/**
 * Limits that follow the model are written into the version once resolved, so
 * that the spec shows them and requests are checked against them (the flags
 * stay set: a version copied to another model resolves again).
 */
export async function recordResolvedLimits(sql: Sql, version: VersionRecord, limits: TokenLimits): Promise<void> {
  const { advanced } = version.spec;
  if (!advanced.maxTokenCountAuto && !advanced.maxInputLengthAuto) return;
  if (limits.maxTokenCount === advanced.maxTokenCount && limits.maxInputLength === advanced.maxInputLength) return;
  await sql`
    UPDATE endpoint_versions SET max_token_count = ${limits.maxTokenCount}, max_input_length = ${limits.maxInputLength}
    WHERE endpoint_id = ${version.endpointId} AND version_index = ${version.versionIndex}`;
}

/** One short generation before traffic is admitted; a replica that cannot generate is not ready. */
export async function warmUp(engines: EngineClient, handle: ReplicaRef): Promise<void> {
  try {
    await engines.warmUp(handle);
  } catch (error) {
    throw new WarmupError(
      error instanceof EngineStatusError
        ? `the warm-up generation failed with HTTP ${error.status}`
        : 'the warm-up generation did not complete',
    );
  }
}

/** The lifecycle's event for each step of a start the runtime reports. */
const STEP_EVENTS = {
  REQUESTING_VIRTUAL_MACHINE: 'no-capacity',
  RESOLVING_MODEL: 'resolving-model',
  DOWNLOADING_MODEL: 'downloading-model',
  ENGINE_INITIALIZING: 'starting-engine',
} as const satisfies Record<StartProgress['phase'], ControllerEvent['type']>;

/** Shows a starting replica's step as the endpoint's phase (the lifecycle shows it only while a start is under way). */
export async function showStep(writes: EndpointWrites, endpointId: string, shown: LifecycleState, progress: StartProgress): Promise<void> {
  const event: ControllerEvent = { type: STEP_EVENTS[progress.phase] };
  // Resolving the model shows as downloading it (the phase a first start shows meanwhile).
  const cause = `controller:${(progress.phase === 'RESOLVING_MODEL' ? 'DOWNLOADING_MODEL' : progress.phase).toLowerCase()}`;
  await writes.transition(endpointId, shown, event, { cause, ...(progress.reason ? { detail: { message: progress.reason } } : {}) });
  if (progress.phase === 'REQUESTING_VIRTUAL_MACHINE' && progress.reason) await writes.setWaitReason(endpointId, progress.reason);
}
