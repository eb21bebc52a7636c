/**
 * A start's model step: the version's model resolved (the hub's metadata, or
 * the registry's), and, where the runtime does not fetch models itself (the
 * local runtime), downloaded to this machine's cache and checked against the
 * version's settings (the built-in engine's GGUF). Each retry of a hub call is
 * an event, and the download's progress is written to the endpoint as it goes.
 */
import type { EndpointRecord, VersionRecord } from '../domain/endpoint.js';
import { findInstanceOption } from '../domain/instance-catalog.js';
import { ModelSourceError } from '../models/errors.js';
import { checkModelSettings, type ModelStore, type PreparedModel, type ResolvedModel } from '../models/model-store.js';
import type { RetryNotice } from '../models/retry.js';
import type { TokenLimits } from '../models/token-limits.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import { setProgress } from '../storage/endpoints-repository.js';
import { insertEvent } from '../storage/events-repository.js';
import { recordResolvedLimits } from './start-steps.js';

export interface ModelPreparerOptions {
  sql: Sql;
  runtime: Runtime;
  models: ModelStore;
  /** Whether the built-in engine runs replicas (then models must be GGUF files whose settings are checked). */
  builtInEngine: boolean;
  /** Without GPUs: the host memory one CPU-backed slot may fill (bounds the token limits that follow the model). */
  hostMemoryPerSlotBytes?: number;
}

export const versionKey = (version: Pick<VersionRecord, 'endpointId' | 'versionIndex'>) => `${version.endpointId}:${version.versionIndex}`;

export class ModelPreparer {
  /** Versions resolved in this process (before their first start, or by it), by endpoint and version. */
  private readonly resolved = new Map<string, ResolvedModel>();

  constructor(private readonly options: ModelPreparerOptions) {}

  /** The version's model as resolved: recorded in the version, or resolved by this process. */
  known(version: Pick<VersionRecord, 'endpointId' | 'versionIndex' | 'model'>): ResolvedModel | null {
    return (version.model as ResolvedModel | null) ?? this.resolved.get(versionKey(version)) ?? null;
  }

  private remember(version: VersionRecord, model: ResolvedModel | null): void {
    if (!model) return;
    this.resolved.set(versionKey(version), model);
    if (this.resolved.size > 10_000) this.resolved.delete(this.resolved.keys().next().value!);
  }

  /**
   * Resolves a version's model (the hub's metadata, no download) once per version and process, when its start must
   * wait for capacity: a misspelled repository fails the start at once instead of after the wait for a machine.
   */
  async resolveEarly(version: VersionRecord): Promise<void> {
    if (version.model || version.spec.model.source !== 'hf' || this.resolved.has(versionKey(version))) return;
    const { resolved } = await this.options.models.resolveVersion(version.spec, null);
    this.remember(version, resolved);
  }

  /** The version's model, from the cache when this version resolved it before, else from the hub; and its limits. */
  async prepare(
    endpoint: EndpointRecord,
    version: VersionRecord,
    options: { signal: AbortSignal; onDownloadStart?: () => Promise<void> },
  ): Promise<{ model: PreparedModel; limits: TokenLimits }> {
    const { sql, models, builtInEngine, runtime } = this.options;
    const endpointId = endpoint.id;
    let lastWrite = 0;
    const hooks = {
      ...(options.onDownloadStart ? { onDownloadStart: options.onDownloadStart } : {}),
      signal: options.signal,
      // Each retry of a hub or registry call is an event: the phase it happened in, the attempt that comes next.
      onRetry: (retry: RetryNotice) =>
        insertEvent(sql, {
          endpointId,
          projectId: endpoint.projectId,
          teamId: endpoint.teamId,
          type: 'RETRYING',
          status: null,
          phase: 'DOWNLOADING_MODEL',
          errorCode: null,
          versionIndex: version.versionIndex,
          cause: 'controller:retry',
          actorId: null,
          detail: {
            message: `${retry.reason} Attempt ${retry.attempt} of ${retry.maxAttempts} in ${retry.delayMs} ms (${retry.operation}).`,
            ...retry,
          },
        }).then(() => undefined),
      onProgress: (progress: { bytesDone: number; bytesTotal: number }) => {
        const now = Date.now();
        if (now - lastWrite < 250 && progress.bytesDone < progress.bytesTotal) return;
        lastWrite = now;
        setProgress(sql, endpointId, progress).catch(() => {});
      },
    };
    const known = this.known(version);
    const model = runtime.provisionsModels
      ? await models.resolveVersion(version.spec, known, hooks)
      : await models.prepareVersion(version.spec, known, hooks);
    this.remember(version, model.resolved);
    const own = { maxTokenCount: version.spec.advanced.maxTokenCount, maxInputLength: version.spec.advanced.maxInputLength };
    // Fetched where the replica runs, or run by another engine: the limits are the version's own.
    if (!builtInEngine || runtime.provisionsModels) return { model, limits: own };
    if (!model.path) {
      throw new ModelSourceError(
        'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
        'the built-in engine runs GGUF models only; set ENGINE_COMMAND to use another engine',
      );
    }
    const limits = await checkModelSettings(model.path, version.spec, this.memoryBytes(version));
    await recordResolvedLimits(sql, version, limits);
    return { model, limits };
  }

  /** The memory one replica of `version` may fill: the instance's, and at most a CPU slot's share of this host's on CPU. */
  private memoryBytes(version: VersionRecord): number | undefined {
    const option = findInstanceOption(version.spec.instanceId);
    if (!option) return undefined;
    const instance = option.gpuMemoryGb * option.numGpu * 2 ** 30;
    const host = this.options.hostMemoryPerSlotBytes;
    return host === undefined ? instance : Math.min(instance, host * option.numGpu);
  }
}
