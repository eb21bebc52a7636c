/**
 * Starting replicas: capacity is reserved, the model prepared (from the cache
 * or the hub), the engine started, and one warm-up generation run before the
 * replica is marked READY. `bringUp` starts an endpoint's first replica and
 * reports each step as the endpoint's phase; a failure to start fails the
 * endpoint with the error's code (start-errors.ts).
 */
import type { EndpointRecord, VersionRecord } from '../domain/endpoint.js';
import { newId } from '../domain/ids.js';
import { findInstanceOption } from '../domain/instance-catalog.js';
import type { ControllerEvent, LifecycleState } from '../domain/lifecycle.js';
import { ModelSourceError } from '../models/errors.js';
import { checkModelSettings, pinnedRevision, type ModelStore, type PreparedModel, type ResolvedModel } from '../models/model-store.js';
import type { TokenLimits } from '../models/token-limits.js';
import type { EngineClient } from '../engine-client/engine-client.js';
import { NoCapacityError, type ReplicaRef, type Runtime, type StartProgress } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import { setProgress } from '../storage/endpoints-repository.js';
import { insertEvent } from '../storage/events-repository.js';
import type { RetryNotice } from '../models/retry.js';
import { markReplica, reserveReplica } from '../storage/replicas-repository.js';
import { setVersionRollout } from '../storage/versions-repository.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { StaleError, type EndpointWrites } from './endpoint-writes.js';
import { refOf } from './replica-stopper.js';
import { failureMessage, isGatewayOutage, startErrorCode, startErrorMessage } from './start-errors.js';
import { capacityWait, recordResolvedLimits, warmUp } from './start-steps.js';

/** Called as a start reaches each step (the first replica's steps are the endpoint's phases). */
export interface StartHooks {
  /** No capacity: the reservation found none free, or the runtime waits for a machine (with the reason it gives). */
  onNoCapacity?: (reason?: string) => Promise<void>;
  onResolving?: () => Promise<void>;
  onDownloadStart?: () => Promise<void>;
  onEngineStart?: () => Promise<void>;
  /** Runs while the warm-up generation does; both must succeed. */
  onWarmup?: () => Promise<unknown>;
  /** Whether to wait for a machine the runtime finds none free for (RuntimeHooks.waitForCapacity). @default false */
  waitForCapacity?: boolean;
}

export interface ReplicaStarterOptions {
  sql: Sql;
  runtime: Runtime;
  models: ModelStore;
  writes: EndpointWrites;
  /** Whether the built-in engine runs replicas (then models must be GGUF files whose settings are checked). */
  builtInEngine: boolean;
  /** The client of the replicas' engines (the warm-up generation). */
  engines: EngineClient;
  /** Without GPUs: the host memory one CPU-backed slot may fill (bounds the token limits that follow the model). */
  hostMemoryPerSlotBytes?: number;
  log: (message: string, error?: unknown) => void;
}

export class ReplicaStarter {
  /** Replicas this process is starting right now (any other STARTING replica was abandoned). */
  private readonly starting = new Set<string>();
  /** Versions resolved before their first start (resolveEarly), by endpoint and version. */
  private readonly resolved = new Map<string, ResolvedModel>();
  /** Models being prepared (resolved, downloaded) for a start, by endpoint: the version, and how to abandon it. */
  private readonly preparing = new Map<string, { versionIndex: number; abort: AbortController }>();

  constructor(private readonly options: ReplicaStarterOptions) {}

  isStarting(replicaId: string): boolean {
    return this.starting.has(replicaId);
  }

  /**
   * Resolves a version's model (the hub's metadata, no download) once per version and process, when its start must
   * wait for capacity: a misspelled repository fails the start at once instead of after the wait for a machine.
   */
  private async resolveEarly(version: VersionRecord): Promise<void> {
    const key = versionKey(version);
    if (version.model || version.spec.model.source !== 'hf' || this.resolved.has(key)) return;
    const { resolved } = await this.options.models.resolveVersion(version.spec, null);
    if (resolved) this.resolved.set(key, resolved);
    if (this.resolved.size > 10_000) this.resolved.delete(this.resolved.keys().next().value!);
  }

  /** The version whose model is being prepared for the endpoint now, if one is. */
  preparingVersion(endpointId: string): number | undefined {
    return this.preparing.get(endpointId)?.versionIndex;
  }

  /** Abandons the model being prepared for the endpoint (a download is cut; what it wrote resumes later). */
  abandonPreparation(endpointId: string): void {
    this.preparing.get(endpointId)?.abort.abort(new StaleError(`${endpointId} no longer wants the model being prepared`));
  }

  /**
   * Brings up the first replica: capacity, model, engine, warm-up. While the
   * endpoint is INITIALIZING or AWAKING, each step is reported as its phase;
   * a replacement for a RUNNING endpoint whose replicas died runs the same
   * steps without changing the status (the lifecycle decides which). With
   * `resume`, the replica a gateway that stopped had placed is followed
   * instead of a new one started.
   */
  async bringUp(endpoint: EndpointRecord, resume?: ReplicaRecord): Promise<void> {
    const { writes } = this.options;
    const id = endpoint.id;
    // The state as last written (a wake writes AWAKING ENGINE_INITIALIZING itself): writing it again would change nothing.
    let shown: LifecycleState = { status: endpoint.status, phase: endpoint.phase, errorCode: endpoint.errorCode };
    const report = async (event: ControllerEvent, cause: string, reason?: string) => {
      shown = (await writes.transition(id, shown, event, { cause, ...(reason ? { detail: { message: reason } } : {}) })) ?? shown;
    };
    const desired = Math.max(endpoint.current.spec.autoscaling.minReplica, 1);
    try {
      const hooks: StartHooks = {
        onNoCapacity: async (reason) => {
          await report({ type: 'no-capacity' }, 'controller:requesting_virtual_machine', reason);
          if (reason) await writes.setWaitReason(id, reason);
        },
        onResolving: () => report({ type: 'resolving-model' }, 'controller:downloading_model'),
        onDownloadStart: () => report({ type: 'downloading-model' }, 'controller:downloading_model'),
        onEngineStart: () => report({ type: 'starting-engine' }, 'controller:engine_initializing'),
        onWarmup: () => writes.transition(id, shown, { type: 'warming-up' }, { cause: 'controller:warm-up' }),
        waitForCapacity: true,
      };
      const started = await (resume
        ? this.resume(endpoint, endpoint.current, resume, hooks)
        : this.start(endpoint, endpoint.current, hooks));
      if (!started) return; // no capacity yet: the next pass tries again
      // Counted first: whoever sees RUNNING also sees the replica that serves.
      await writes.refreshCounts(id, desired, 'controller:started');
      await writes.transition(id, endpoint, { type: 'replica-ready' }, { cause: 'controller:serving' });
    } catch (error) {
      // Stale: another wrote first. An outage of ours: the next pass tries again. Neither is the endpoint's failure.
      if (error instanceof StaleError || isGatewayOutage(error)) throw error;
      const errorCode = startErrorCode(error);
      this.options.log(`starting ${id} failed with ${errorCode}`, error);
      await writes.refreshCounts(id, 0, 'controller:start-failed');
      await writes.transition(
        id,
        endpoint,
        { type: 'start-failed', errorCode },
        { cause: 'controller:start-failed', detail: { message: startErrorMessage(error) }, errorMessage: failureMessage(error) },
      );
    }
  }

  /**
   * Starts one replica of `version` and marks it READY. Returns false when no
   * capacity is free. On failure, the replica is stopped and marked FAILED,
   * and the error is rethrown.
   */
  async start(endpoint: EndpointRecord, version: VersionRecord, hooks: StartHooks = {}): Promise<boolean> {
    const { sql, runtime, writes } = this.options;
    const spec = version.spec;
    const option = findInstanceOption(spec.instanceId)!;
    const replicaId = newId('rep');
    const capacity = runtime.capacity()[option.gpuType] ?? 0;
    const reserved = await writes.guarded(
      endpoint.id,
      (e) => e.desiredState === 'RUNNING',
      (tx) =>
        reserveReplica(
          tx,
          {
            id: replicaId,
            endpointId: endpoint.id,
            versionIndex: version.versionIndex,
            runtime: runtime.name,
            node: runtime.node,
            gpuType: option.gpuType,
            numGpu: option.numGpu,
          },
          capacity,
        ),
    );
    if (!reserved.reserved) {
      // A repository that does not exist (or holds nothing to run) is reported before any wait for capacity.
      await this.resolveEarly(version);
      await hooks.onNoCapacity?.(capacityWait(option, reserved.used, capacity));
      return false;
    }
    return this.bringToReady(replicaId, endpoint, version, hooks, async (placed) => {
      await hooks.onResolving?.();
      const { model, limits } = await this.prepareModel(endpoint, version, hooks.onDownloadStart);
      const resolved = model.resolved;
      const handle = await runtime.start(
        {
          replicaId,
          endpointId: endpoint.id,
          versionIndex: version.versionIndex,
          modelPath: model.path,
          modelRepo: spec.model.source === 'hf' ? spec.model.repo : spec.model.artifact,
          modelRevision: pinnedRevision(resolved) ?? (spec.model.source === 'hf' ? spec.model.revision : null),
          modelFile: resolved ? { path: resolved.file, sha256: resolved.sha256, size: resolved.size } : undefined,
          gpuType: option.gpuType,
          numGpu: option.numGpu,
          maxBatchSize: spec.advanced.maxBatchSize,
          contextSize: limits.maxTokenCount,
          maxInputLength: limits.maxInputLength,
          addSpecialTokens: spec.advanced.tokenizerAddSpecialTokens,
          skipSpecialTokens: spec.advanced.tokenizerSkipSpecialTokens,
        },
        {
          // Recorded once placed: a gateway that takes over after this one dies mid-start finds the replica by it.
          onPlaced: async (ref) => {
            placed(ref);
            await markReplica(sql, replicaId, {
              state: 'STARTING',
              address: ref.address,
              locator: ref.locator,
              ...(ref.token ? { token: ref.token } : {}),
            });
          },
          onProgress: (progress) => reportProgress(hooks, progress),
          waitForCapacity: hooks.waitForCapacity ?? false,
        },
      );
      return { handle, model: resolved };
    });
  }

  /**
   * Takes over a replica another process placed and did not see ready (it died, or lost the runtime's control
   * plane, mid-start): the runtime follows it until it is ready, then it warms up and is marked READY as if this
   * process had started it. Returns false when it found no room after all; throws as `start` does.
   */
  async resume(endpoint: EndpointRecord, version: VersionRecord, replica: ReplicaRecord, hooks: StartHooks = {}): Promise<boolean> {
    const ref = refOf(replica);
    this.options.log(`resuming the start of ${replica.id} of ${endpoint.id}, placed by a gateway that stopped`);
    return this.bringToReady(replica.id, endpoint, version, hooks, async (placed) => {
      placed(ref);
      const handle = await this.options.runtime.resume(ref, { onProgress: (progress) => reportProgress(hooks, progress) });
      return { handle, model: (version.model as ResolvedModel | null) ?? this.resolved.get(versionKey(version)) ?? null };
    });
  }

  /**
   * The part of a start after the reservation: `launch` places the replica (telling `placed` as soon as it is) and
   * resolves once its engine answers; then the warm-up, and READY. On failure the replica is stopped and marked,
   * except when this gateway lost its database or the runtime's control plane after placing it: then it is left
   * STARTING for the next pass to resume, or to find gone.
   */
  private async bringToReady(
    replicaId: string,
    endpoint: EndpointRecord,
    version: VersionRecord,
    hooks: StartHooks,
    launch: (placed: (ref: ReplicaRef) => void) => Promise<{ handle: ReplicaRef; model: ResolvedModel | null }>,
  ): Promise<boolean> {
    const { sql, runtime } = this.options;
    this.starting.add(replicaId);
    let handle: ReplicaRef | undefined;
    try {
      const launched = await launch((ref) => (handle = ref));
      const started = (handle = launched.handle);
      // The warm-up generation runs while the READY status is written; both must succeed.
      const [written, warmed] = await Promise.allSettled([hooks.onWarmup?.(), warmUp(this.options.engines, started)]);
      if (written.status === 'rejected') throw written.reason;
      if (warmed.status === 'rejected') throw warmed.reason;
      await markReplica(sql, replicaId, { state: 'READY', address: started.address, locator: started.locator });
      await setVersionRollout(sql, endpoint.id, version.versionIndex, {
        rolloutState: 'ROLLED_OUT',
        ...(launched.model ? { model: launched.model } : {}),
      });
      return true;
    } catch (error) {
      if (handle && isGatewayOutage(error)) throw error;
      if (handle) await runtime.stop(handle, 0);
      if (error instanceof NoCapacityError) {
        // Placed nowhere: as if the reservation had found no room (the caller retires an old replica or tries later).
        await markReplica(sql, replicaId, { state: 'STOPPED', lastError: `no machine could take it: ${error.reason}` });
        await hooks.onNoCapacity?.(error.reason);
        return false;
      }
      // Abandoned (its endpoint changed meanwhile), or an outage before it was placed: not a failure of the replica.
      const stopped = error instanceof StaleError || isGatewayOutage(error);
      await markReplica(
        sql,
        replicaId,
        stopped ? { state: 'STOPPED', lastError: (error as Error).message } : { state: 'FAILED', lastError: startErrorMessage(error) },
      );
      throw error;
    } finally {
      this.starting.delete(replicaId);
    }
  }

  /** The version's model file: from the cache when this version resolved it before, else from the hub. */
  private async prepareModel(
    endpoint: EndpointRecord,
    version: VersionRecord,
    onDownloadStart?: () => Promise<void>,
  ): Promise<{ model: PreparedModel; limits: TokenLimits }> {
    const { sql, models, builtInEngine } = this.options;
    const endpointId = endpoint.id;
    let lastWrite = 0;
    const hooks = {
      ...(onDownloadStart ? { onDownloadStart } : {}),
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
    const abort = new AbortController();
    this.preparing.set(endpointId, { versionIndex: version.versionIndex, abort });
    let model: PreparedModel;
    try {
      const known = (version.model as ResolvedModel | null) ?? this.resolved.get(versionKey(version)) ?? null;
      model = this.options.runtime.provisionsModels
        ? await models.resolveVersion(version.spec, known, { ...hooks, signal: abort.signal })
        : await models.prepareVersion(version.spec, known, { ...hooks, signal: abort.signal });
    } finally {
      this.preparing.delete(endpointId);
    }
    if (builtInEngine && this.options.runtime.provisionsModels) {
      // The model is fetched where the replica runs: the limits are the version's own (the engine checks the file).
      return {
        model,
        limits: { maxTokenCount: version.spec.advanced.maxTokenCount, maxInputLength: version.spec.advanced.maxInputLength },
      };
    }
    if (builtInEngine) {
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
    return { model, limits: { maxTokenCount: version.spec.advanced.maxTokenCount, maxInputLength: version.spec.advanced.maxInputLength } };
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

/** A step the runtime observed, as the start's hooks report it. */
async function reportProgress(hooks: StartHooks, progress: StartProgress): Promise<void> {
  switch (progress.phase) {
    case 'REQUESTING_VIRTUAL_MACHINE':
      return hooks.onNoCapacity?.(progress.reason);
    case 'DOWNLOADING_MODEL':
      return hooks.onDownloadStart?.();
    case 'ENGINE_INITIALIZING':
      return hooks.onEngineStart?.();
  }
}

const versionKey = (version: VersionRecord) => `${version.endpointId}:${version.versionIndex}`;
