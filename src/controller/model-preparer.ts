/**
 * A start's model step, as the runtime runs it (`ModelSteps`): the version's
 * model resolved (the hub's metadata, or the registry's), and, for a runtime
 * whose engines read this machine's disk (the local runtime), downloaded to
 * this machine's cache and checked against the version's settings (the
 * built-in engine's GGUF). Each retry of a hub call is an event, and the
 * download's progress is written to the endpoint as it goes.
 */
import type { EndpointRecord, VersionRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { findInstanceOption } from '../domain/instance-catalog.js';
import { ModelSourceError } from '../models/errors.js';
import {
  checkModelSettings,
  pinnedRevision,
  type ModelStore,
  type PrepareHooks,
  type PreparedModel,
  type ResolvedModel,
} from '../models/model-store.js';
import type { RetryNotice } from '../models/retry.js';
import { givenTokenLimits, type TokenLimits } from '../models/token-limits.js';
import type { LaunchModel, ModelSteps } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import { setProgress } from '../storage/endpoints-repository.js';
import { insertEvent } from '../storage/events-repository.js';
import { replicaState } from '../storage/replicas-repository.js';
import { recordResolvedLimits } from './start-steps.js';

export interface ModelPreparerOptions {
  sql: Sql;
  models: ModelStore;
  /** Whether the built-in engine runs replicas (then models must be GGUF files whose settings are checked). */
  builtInEngine: boolean;
  /** Without GPUs: the host memory one CPU-backed slot may fill (bounds the token limits that follow the model). */
  hostMemoryPerSlotBytes?: number;
}

/** How long a pass waits for the early resolution of a model (resolveEarly) before it leaves that to the start. */
const RESOLVE_EARLY_MS = 20_000;

export const versionKey = (version: Pick<VersionRecord, 'endpointId' | 'versionIndex'>) => `${version.endpointId}:${version.versionIndex}`;

export class ModelPreparer {
  /** Versions resolved in this process (before their first start, or by it), by endpoint and version. */
  private readonly resolved = new Map<string, ResolvedModel>();

  constructor(private readonly options: ModelPreparerOptions) {}

  /** Versions whose replicas another version took over as they were (`carry`): the one each took them from. */
  private readonly carried = new Map<string, string>();

  /** The version's model as resolved: recorded in the version, or resolved by this process (for it, or for the version it took its replicas from). */
  known(version: Pick<VersionRecord, 'endpointId' | 'versionIndex' | 'model'>): ResolvedModel | null {
    const key = versionKey(version);
    const from = this.carried.get(key);
    return (version.model as ResolvedModel | null) ?? this.resolved.get(key) ?? (from ? this.resolved.get(from) : undefined) ?? null;
  }

  /** `to` took a starting replica of `from` as it was: the model that replica's step resolves (or resolved) is `to`'s too. */
  carry(from: Pick<VersionRecord, 'endpointId' | 'versionIndex' | 'model'>, to: Pick<VersionRecord, 'endpointId' | 'versionIndex'>): void {
    const model = this.known(from);
    if (model) this.resolved.set(versionKey(to), model);
    else this.carried.set(versionKey(to), versionKey(from));
    if (this.carried.size > 10_000) this.carried.delete(this.carried.keys().next().value!);
  }

  /**
   * The model a replica's start resolved, as its row records it (written with its placement): a replica this process
   * adopts mid-start (another gateway placed it) gives its version that model, recorded once it serves.
   */
  learn(replica: Pick<ReplicaRecord, 'endpointId' | 'versionIndex' | 'model'>): void {
    if (replica.model && !this.resolved.has(versionKey(replica))) this.remember(replica, replica.model as ResolvedModel);
  }

  private remember(version: Pick<VersionRecord, 'endpointId' | 'versionIndex'>, model: ResolvedModel | null): void {
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
    // Within a pass: a hub that does not answer in time leaves the check to the start (the pass goes on).
    const signal = AbortSignal.timeout(RESOLVE_EARLY_MS);
    try {
      const { resolved } = await this.options.models.resolveVersion(version.spec, null, { signal });
      this.remember(version, resolved);
    } catch (error) {
      if (!signal.aborted) throw error;
    }
  }

  /**
   * The model step of a replica of `version`, for its runtime to run: `resolve` (metadata only) where the model is
   * fetched where the replica runs, `download` (into this machine's cache, then checked) where engines read this
   * machine's disk. `signal` ends the placing (the gateway stops); a download is also cut when the runtime stops
   * the replica.
   */
  steps(endpoint: EndpointRecord, version: VersionRecord, replicaId: string, signal: AbortSignal): ModelSteps {
    const { sql, models, builtInEngine } = this.options;
    const spec = version.spec;
    // Where the model is not read here (another engine, or fetched where the replica runs), the version's own limits,
    // checked before anything is fetched or started.
    const own = () => givenTokenLimits(spec.advanced);
    const launchModel = (model: PreparedModel, limits: TokenLimits): LaunchModel => {
      this.remember(version, model.resolved);
      const { resolved } = model;
      return {
        modelPath: model.path,
        modelRepo: spec.model.source === 'hf' ? spec.model.repo : spec.model.artifact,
        modelRevision: pinnedRevision(resolved) ?? (spec.model.source === 'hf' ? spec.model.revision : null),
        modelFile: resolved ? { path: resolved.file, sha256: resolved.sha256, size: resolved.size } : undefined,
        contextSize: limits.maxTokenCount,
        maxInputLength: limits.maxInputLength,
      };
    };
    return {
      // Fetched where the replica runs: the limits are the version's own.
      resolve: async () => {
        const limits = own();
        return launchModel(await models.resolveVersion(spec, this.known(version), this.hooks(endpoint, version, { signal })), limits);
      },
      download: async (cut, onDownloadStart) => {
        const given = builtInEngine ? undefined : own();
        const hooks = this.hooks(endpoint, version, { signal: AbortSignal.any([signal, cut]), onDownloadStart });
        const model = await models.prepareVersion(spec, this.known(version), hooks);
        // Run by another engine, the limits are the version's own; the built-in engine's follow its GGUF.
        const limits = given ?? (await this.check(model, version));
        // Its row ended meanwhile (another gateway took the endpoint over and stopped it): no engine is spawned.
        if ((await replicaState(sql, replicaId)) !== 'STARTING') return null;
        return launchModel(model, limits);
      },
    };
  }

  /** Each retry of a hub or registry call is an event; the download's progress is written to the endpoint as it goes. */
  private hooks(
    endpoint: EndpointRecord,
    version: VersionRecord,
    options: { signal: AbortSignal; onDownloadStart?: () => void },
  ): PrepareHooks {
    const { sql } = this.options;
    const endpointId = endpoint.id;
    let lastWrite = 0;
    return {
      ...(options.onDownloadStart ? { onDownloadStart: options.onDownloadStart } : {}),
      signal: options.signal,
      // The phase it happened in, the attempt that comes next.
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
  }

  /** The built-in engine runs GGUF files whose settings fit: the limits it runs with, recorded in the version. */
  private async check(model: PreparedModel, version: VersionRecord): Promise<TokenLimits> {
    if (!model.path) {
      throw new ModelSourceError(
        'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
        'the built-in engine runs GGUF models only; set ENGINE_COMMAND to use another engine',
      );
    }
    const limits = await checkModelSettings(model.path, version.spec, this.memoryBytes(version));
    await recordResolvedLimits(this.options.sql, version, limits);
    return limits;
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
