/**
 * Steps of a replica's start that need nothing of the starter's state: the
 * limits a model's first start records in its version, and the warm-up
 * generation that makes a replica ready.
 */
import type { VersionRecord } from '../domain/endpoint.js';
import { EngineStatusError, type EngineClient } from '../engine-client/engine-client.js';
import type { TokenLimits } from '../models/token-limits.js';
import type { ReplicaRef } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
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
