/**
 * The controller: in every gateway process, a loop compares each endpoint's
 * desired state in Postgres with the replicas that actually run, and acts to
 * close the gap. A lease row per endpoint makes exactly one process act on an
 * endpoint at a time; a process that dies loses its leases when they expire,
 * and another adopts its endpoints and their replicas.
 *
 * Every write re-reads the endpoint under its row lock and checks that the
 * step still applies (the lease is held, the desired state is unchanged), so
 * a step acting on a stale snapshot becomes a no-op.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EndpointSpec } from '../domain/endpoint-spec.js';
import { newId } from '../domain/ids.js';
import { findInstanceOption } from '../domain/instance-catalog.js';
import type { DesiredState, EndpointErrorCode, EndpointPhase, EndpointStatus } from '../domain/lifecycle.js';
import { ModelSourceError } from '../models/errors.js';
import {
  checkModelSettings,
  pinnedRevision,
  SettingsError,
  type ModelStore,
  type PreparedModel,
  type ResolvedModel,
} from '../models/model-store.js';
import { EngineCommandError } from '../runtime/engine-command.js';
import { ReplicaStartError, type ReplicaHandle, type Runtime } from '../runtime/runtime.js';
import { showsCounts, writeReplicaCounts, writeStatus } from '../services/endpoint-state.js';
import type { Sql } from '../storage/database.js';
import {
  findEndpoints,
  lockEndpoint,
  markEndpointCleaned,
  setProgress,
  setVersionRollout,
  type EndpointRecord,
  type VersionRecord,
} from '../storage/endpoints-repository.js';
import {
  acquireLease,
  failuresSince,
  endpointsToReconcile,
  holdsLease,
  liveReplicaIdsOnNode,
  liveReplicas,
  markReplica,
  releaseLeases,
  renewLeases,
  reserveReplica,
  type ReplicaRecord,
} from '../storage/replicas-repository.js';
import { queuedDemand, QUEUE_DEPTH_STALE_MS } from '../storage/queue-depth-repository.js';
import { Nudge } from '../util/nudge.js';
import { decideScale, replicaCapacity } from './autoscaler.js';
import { decideAfterDeaths, DEFAULT_CRASH_POLICY, type CrashPolicy, type RecentDeaths } from './crash-policy.js';

/** The last error of a replica whose engine died while it ran (a death, as the crash policy counts them). */
const ENGINE_EXITED = 'the engine process exited';

export interface ControllerOptions {
  sql: Sql;
  runtime: Runtime;
  models: ModelStore;
  /** Whether the built-in engine runs replicas (then models must be GGUF files whose settings are checked). */
  builtInEngine: boolean;
  /** @default 500 */
  intervalMs?: number;
  /** @default 10000 */
  leaseTtlMs?: number;
  /** How long a sleeping or scaled-down replica may take to finish its requests. @default 30000 */
  drainTimeoutMs?: number;
  /** SIGTERM to SIGKILL. @default 10000 */
  stopGraceMs?: number;
  /** Replacement back-off and the deaths within a window that mark the endpoint FAILED. @default DEFAULT_CRASH_POLICY */
  crashLoop?: Partial<CrashPolicy>;
  log?: (message: string, error?: unknown) => void;
}

/** Thrown inside a step when the endpoint changed under it; the step is abandoned quietly. */
class StaleError extends Error {}

class WarmupError extends Error {}

function errorCodeOf(error: unknown): EndpointErrorCode {
  if (error instanceof ModelSourceError) return error.code;
  if (error instanceof SettingsError) return 'WORKLOAD_INIT_SETTINGS_ERROR';
  if (error instanceof ReplicaStartError) return error.code;
  if (error instanceof EngineCommandError) return 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR';
  if (error instanceof WarmupError) return 'INFERENCE_ENGINE_UNKNOWN_ERROR';
  return 'WORKLOAD_INIT_UNKNOWN_ERROR';
}

/** A message for the event log: our own errors carry user-safe text; anything else is not shown. */
function safeMessage(error: unknown): string {
  if (
    error instanceof ModelSourceError ||
    error instanceof SettingsError ||
    error instanceof ReplicaStartError ||
    error instanceof WarmupError
  ) {
    return error.message;
  }
  if (error instanceof EngineCommandError) return error.message;
  return 'the replica could not be started';
}

/** The controller also sees deleted endpoints: it stops their replicas. */
const WITH_DELETED = { includeDeleted: true } as const;

const handleOf = (r: ReplicaRecord): ReplicaHandle => ({ replicaId: r.id, address: r.address ?? '', pid: r.pid ?? 0, node: r.node });

export class Controller {
  /** This process, as lease holder (its OS process id, then a random part). */
  readonly owner = `gw-${process.pid}-${randomUUID()}`;
  private readonly sql: Sql;
  private readonly runtime: Runtime;
  private readonly models: ModelStore;
  private readonly intervalMs: number;
  private readonly leaseTtlMs: number;
  private readonly drainTimeoutMs: number;
  private readonly stopGraceMs: number;
  private readonly crashLoop: CrashPolicy;
  private readonly log: (message: string, error?: unknown) => void;
  /** Endpoints with a reconcile pass running in this process. */
  private readonly running = new Map<string, Promise<void>>();
  /** Replicas this process is starting right now (any other STARTING replica was abandoned). */
  private readonly starting = new Set<string>();
  private readonly lastScaleUp = new Map<string, number>();
  /** Per endpoint, the last pass whose demand needed every serving replica (scale-in waits a cooldown after it). */
  private readonly lastBusy = new Map<string, number>();
  private stopped = false;
  private ticking: Promise<void> | undefined;
  /** Ends the wait between ticks; a poke during a tick makes the next tick start at once. */
  private readonly nudge = new Nudge();
  /** Endpoints poked since the last tick began: the next tick reconciles these alone, unless a full pass is due. */
  private readonly poked = new Set<string>();
  /** A poke without an endpoint: the next tick is a full pass. */
  private fullPassAsked = false;

  constructor(private readonly options: ControllerOptions) {
    this.sql = options.sql;
    this.runtime = options.runtime;
    this.models = options.models;
    this.intervalMs = options.intervalMs ?? 500;
    this.leaseTtlMs = options.leaseTtlMs ?? 10_000;
    this.drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
    this.stopGraceMs = options.stopGraceMs ?? 10_000;
    this.crashLoop = { ...DEFAULT_CRASH_POLICY, ...options.crashLoop };
    this.log = options.log ?? ((message, error) => console.error(`[controller] ${message}`, error ?? ''));
  }

  /** Reaps replicas no endpoint owns, then reconciles every interval (and at once on `poke`). */
  async start(): Promise<void> {
    await this.reapOrphans();
    void this.loop();
  }

  /** Stops the engines on this node that no live replica owns (the runtime finds them by its own records, pids included). */
  private async reapOrphans(): Promise<void> {
    const keep = new Set(await liveReplicaIdsOnNode(this.sql, this.runtime.node));
    const reaped = await this.runtime.reapOrphans(keep);
    if (reaped.length > 0) this.log(`stopped ${reaped.length} orphaned replica(s): ${reaped.join(', ')}`);
  }

  /**
   * Asks for a reconcile pass now (after an API action), instead of at the
   * next interval: of that endpoint alone when one is named, else of all.
   */
  poke(endpointId?: string): void {
    if (endpointId === undefined) this.fullPassAsked = true;
    else this.poked.add(endpointId);
    this.nudge.poke();
  }

  /**
   * A full pass (every endpoint, lease renewal) every interval; between
   * them, a poke reconciles just the endpoints poked, so that a burst of API
   * writes does not make a pass over every endpoint for each.
   */
  private async loop(): Promise<void> {
    let nextFullPass = 0;
    while (!this.stopped) {
      this.nudge.clear();
      const full = this.fullPassAsked || performance.now() >= nextFullPass;
      if (full) {
        this.fullPassAsked = false;
        nextFullPass = performance.now() + this.intervalMs;
      }
      this.ticking = this.tick(full).catch((error: unknown) => this.log('tick failed', error));
      await this.ticking;
      // A poke during the tick may concern an endpoint the tick had already passed: the wait then ends at once.
      if (!this.stopped) await this.nudge.wait(Math.max(0, nextFullPass - performance.now()));
    }
  }

  private async tick(full: boolean): Promise<void> {
    const poked = new Set(this.poked);
    this.poked.clear();
    let ids: Iterable<string> = poked;
    if (full) {
      await renewLeases(this.sql, this.owner, this.leaseTtlMs);
      ids = await endpointsToReconcile(this.sql);
    }
    for (const id of ids) {
      if (this.stopped) return;
      if (this.running.has(id)) {
        // Its pass may have read the endpoint before the change: one more pass follows it.
        if (poked.has(id)) this.poked.add(id);
        continue;
      }
      if (!(await acquireLease(this.sql, id, this.owner, this.leaseTtlMs))) continue;
      const pass = this.reconcile(id)
        .catch((error: unknown) => {
          if (!(error instanceof StaleError)) this.log(`reconciling ${id} failed`, error);
        })
        .finally(() => {
          this.running.delete(id);
          if (this.poked.has(id)) this.nudge.poke();
        });
      this.running.set(id, pass);
    }
  }

  /**
   * Stops the loop and waits for passes in flight. Replicas keep running, and
   * the leases are released, so another gateway (or this one, restarted)
   * adopts the endpoints at once.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.nudge.poke();
    await this.ticking;
    await Promise.allSettled([...this.running.values()]);
    await releaseLeases(this.sql, this.owner).catch(() => {});
  }

  // ---------------------------------------------------------------- writes

  /**
   * Runs `write` on the freshly locked endpoint when this process still holds
   * its lease and `applies` still holds; otherwise the step is stale.
   */
  private async guarded<T>(
    id: string,
    applies: (e: EndpointRecord) => boolean,
    write: (tx: Sql, e: EndpointRecord) => Promise<T>,
  ): Promise<T> {
    return this.sql.begin(async (tx) => {
      if (!(await holdsLease(tx, id, this.owner))) throw new StaleError(`lease on ${id} lost`);
      const endpoint = await lockEndpoint(tx, id, WITH_DELETED);
      if (!endpoint || !applies(endpoint)) throw new StaleError(`${id} changed`);
      return write(tx as unknown as Sql, endpoint);
    }) as Promise<T>;
  }

  private async setStatus(
    id: string,
    expected: { desired: DesiredState; statuses?: readonly EndpointStatus[] },
    change: {
      status: EndpointStatus;
      phase: EndpointPhase | null;
      errorCode: EndpointErrorCode | null;
      desiredState?: DesiredState;
      cause: string;
      detail?: Record<string, unknown>;
    },
  ): Promise<void> {
    await this.guarded(
      id,
      (e) => e.desiredState === expected.desired && (!expected.statuses || expected.statuses.includes(e.status)),
      async (tx, e) => {
        await writeStatus(tx, e, { ...change, actorId: null });
        if (change.phase !== 'DOWNLOADING_MODEL') await setProgress(tx, id, null);
      },
    );
  }

  /** Recomputes the replica counts from the replicas table. */
  private async refreshCounts(id: string, desiredReplicas: number, cause: string): Promise<void> {
    await this.sql.begin(async (tx) => {
      const endpoint = await lockEndpoint(tx, id, WITH_DELETED);
      if (!endpoint) return;
      const live = await liveReplicas(tx, id);
      await writeReplicaCounts(
        tx,
        endpoint,
        countsOf(
          endpoint,
          live.filter((r) => r.state === 'READY'),
          desiredReplicas,
        ),
        cause,
      );
    });
  }

  // ---------------------------------------------------------------- reconcile

  private async reconcile(id: string): Promise<void> {
    const [endpoint] = await findEndpoints(this.sql, [id], WITH_DELETED);
    if (!endpoint) return;
    const replicas = await this.observe(endpoint);
    if (replicas === 'failed') return;

    if (endpoint.deleted) {
      await this.stopReplicas(replicas, 0);
      await this.refreshCounts(id, 0, 'controller:delete');
      await markEndpointCleaned(this.sql, id);
      return;
    }
    switch (endpoint.desiredState) {
      case 'DELETED':
      case 'TERMINATED':
        if (replicas.length > 0 || endpoint.status === 'TERMINATING') {
          await this.stopReplicas(replicas, 0);
          await this.refreshCounts(id, 0, 'controller:terminate');
          if (endpoint.status !== 'FAILED') {
            await this.setStatus(
              id,
              { desired: 'TERMINATED' },
              { status: 'TERMINATED', phase: null, errorCode: endpoint.errorCode, cause: 'controller:terminated' },
            );
          }
        }
        return;
      case 'SLEEPING':
        if (replicas.length > 0 || endpoint.status === 'STOPPING') {
          await this.stopReplicas(replicas, this.drainTimeoutMs);
          await this.refreshCounts(id, 0, 'controller:sleep');
          await this.setStatus(
            id,
            { desired: 'SLEEPING' },
            { status: 'SLEEPING', phase: null, errorCode: endpoint.errorCode, cause: 'controller:slept' },
          );
        }
        return;
      case 'RUNNING': {
        if (endpoint.status === 'FAILED') return;
        const serving = replicas.filter((r) => r.state === 'READY');
        const target = endpoint.current;
        if (serving.length === 0) {
          if (await this.backingOff(endpoint)) return;
          await this.startUp(endpoint);
        } else if (serving.some((r) => r.versionIndex !== target.versionIndex) && target.rolloutState !== 'FAILED') {
          await this.rollOut(endpoint, serving);
        } else {
          if (endpoint.status === 'UPDATING' || endpoint.status === 'READY' || endpoint.status === 'UNKNOWN') {
            await this.setStatus(
              id,
              { desired: 'RUNNING' },
              { status: 'RUNNING', phase: null, errorCode: endpoint.errorCode, cause: 'controller:serving' },
            );
          }
          await this.autoscale(endpoint, serving);
        }
        return;
      }
    }
  }

  /**
   * Looks at the endpoint's replicas: dead ones are marked FAILED, and ones
   * left STARTING or DRAINING by a process that died are stopped. An endpoint
   * whose replicas keep dying is marked FAILED.
   */
  private async observe(endpoint: EndpointRecord): Promise<ReplicaRecord[] | 'failed'> {
    const live: ReplicaRecord[] = [];
    let died = 0;
    let pidUnknown = false;
    for (const replica of await liveReplicas(this.sql, endpoint.id)) {
      if (replica.node !== this.runtime.node) {
        live.push(replica); // another machine's replica: its own gateway observes it
        continue;
      }
      const abandoned = (replica.state === 'STARTING' && !this.starting.has(replica.id)) || replica.state === 'DRAINING';
      if (abandoned) {
        // A replica abandoned before its engine answered has no pid in its row, but its engine may run: it is reaped below.
        if (replica.pid === null) pidUnknown = true;
        else await this.runtime.stop(handleOf(replica), 0);
        await markReplica(this.sql, replica.id, { state: 'STOPPED', lastError: 'abandoned by a gateway that stopped' });
        continue;
      }
      if (replica.state === 'READY' && !this.runtime.isAlive(handleOf(replica))) {
        const tail = await this.runtime.logTail(replica.id);
        this.log(`replica ${replica.id} of ${endpoint.id} died; last output:\n${tail.slice(-2000)}`);
        await markReplica(this.sql, replica.id, { state: 'FAILED', lastError: ENGINE_EXITED });
        died++;
        continue;
      }
      live.push(replica);
    }
    if (pidUnknown) await this.reapOrphans();
    if (died === 0) return live;

    await this.refreshCounts(endpoint.id, endpoint.desiredReplicaCnt, 'controller:replica-died');
    if (
      endpoint.desiredState === 'RUNNING' &&
      decideAfterDeaths(this.crashLoop, await this.recentDeaths(endpoint.id), Date.now()).kind === 'fail'
    ) {
      await this.stopReplicas(live, 0);
      await this.refreshCounts(endpoint.id, 0, 'controller:crash-loop');
      await this.setStatus(
        endpoint.id,
        { desired: 'RUNNING' },
        {
          status: 'FAILED',
          phase: null,
          errorCode: 'INFERENCE_ENGINE_UNKNOWN_ERROR',
          desiredState: 'TERMINATED',
          cause: 'controller:crash-loop',
          detail: {
            message: `the engine exited ${this.crashLoop.failures} times within ${Math.round(this.crashLoop.windowMs / 1000)} seconds`,
          },
        },
      );
      return 'failed';
    }
    return live;
  }

  /** Deaths of the endpoint's engines within the crash window. */
  private recentDeaths(endpointId: string): Promise<RecentDeaths> {
    return failuresSince(this.sql, endpointId, new Date(Date.now() - this.crashLoop.windowMs), ENGINE_EXITED);
  }

  /**
   * Whether a replacement for an engine that died must wait out its back-off
   * (the next pass after it starts it). Only a serving endpoint's replacements
   * wait: a start, wake or restart asked for by a user goes at once.
   */
  private async backingOff(endpoint: EndpointRecord): Promise<boolean> {
    if (endpoint.status !== 'RUNNING' && endpoint.status !== 'UPDATING') return false;
    const decision = decideAfterDeaths(this.crashLoop, await this.recentDeaths(endpoint.id), Date.now());
    return decision.kind === 'wait';
  }

  private async stopReplicas(replicas: ReplicaRecord[], drainMs: number): Promise<void> {
    await Promise.all(replicas.map((r) => this.stopReplica(r, drainMs)));
  }

  /** Drains (no new requests are routed to a DRAINING replica; in-flight ones finish), then stops. */
  private async stopReplica(replica: ReplicaRecord, drainMs: number): Promise<void> {
    const handle = handleOf(replica);
    if (drainMs > 0 && replica.state === 'READY') {
      await markReplica(this.sql, replica.id, { state: 'DRAINING' });
      const deadline = Date.now() + drainMs;
      while (Date.now() < deadline && this.runtime.isAlive(handle)) {
        const health = await this.runtime.health(handle, 1000);
        if (!health || health.active + health.queued === 0) break;
        await sleep(100);
      }
    }
    await this.runtime.stop(handle, this.stopGraceMs);
    await markReplica(this.sql, replica.id, { state: 'STOPPED' });
  }

  // ---------------------------------------------------------------- starting

  /**
   * Brings up the first replica: capacity, model, engine, warm-up. While the
   * endpoint is INITIALIZING or AWAKING, each step is reported as its phase;
   * a replacement for a RUNNING endpoint whose replicas died runs the same
   * steps without changing the status.
   */
  private async startUp(endpoint: EndpointRecord): Promise<void> {
    const id = endpoint.id;
    const startingStatus = endpoint.status === 'INITIALIZING' || endpoint.status === 'AWAKING' ? endpoint.status : undefined;
    // The phase as last written (a wake writes AWAKING ENGINE_INITIALIZING itself): writing it again would change nothing.
    let shown = { phase: endpoint.phase, errorCode: endpoint.errorCode };
    const reportPhase = async (phase: EndpointPhase) => {
      if (!startingStatus || (shown.phase === phase && shown.errorCode === null)) return;
      await this.setStatus(
        id,
        { desired: 'RUNNING', statuses: [startingStatus] },
        { status: startingStatus, phase, errorCode: null, cause: `controller:${phase.toLowerCase()}` },
      );
      shown = { phase, errorCode: null };
    };
    const desired = Math.max(endpoint.current.spec.autoscaling.minReplica, 1);
    try {
      const started = await this.startReplica(endpoint, endpoint.current, {
        onNoCapacity: () => reportPhase('REQUESTING_VIRTUAL_MACHINE'),
        onDownloadStart: () => reportPhase('DOWNLOADING_MODEL'),
        onResolving: startingStatus === 'INITIALIZING' ? () => reportPhase('DOWNLOADING_MODEL') : undefined,
        onEngineStart: () => reportPhase('ENGINE_INITIALIZING'),
        onWarmup: startingStatus
          ? () =>
              this.setStatus(
                id,
                { desired: 'RUNNING', statuses: [startingStatus] },
                { status: 'READY', phase: null, errorCode: null, cause: 'controller:warm-up' },
              )
          : undefined,
      });
      if (!started) return; // no capacity yet: the next pass tries again
      // Counted first: whoever sees RUNNING also sees the replica that serves.
      await this.refreshCounts(id, desired, 'controller:started');
      await this.setStatus(id, { desired: 'RUNNING' }, { status: 'RUNNING', phase: null, errorCode: null, cause: 'controller:serving' });
    } catch (error) {
      if (error instanceof StaleError) throw error;
      const code = errorCodeOf(error);
      this.log(`starting ${id} failed with ${code}`, error);
      await this.refreshCounts(id, 0, 'controller:start-failed');
      await this.setStatus(
        id,
        { desired: 'RUNNING' },
        {
          status: 'FAILED',
          phase: null,
          errorCode: code,
          desiredState: 'TERMINATED',
          cause: 'controller:start-failed',
          detail: { message: safeMessage(error) },
        },
      );
    }
  }

  /**
   * Starts one replica of `version` and marks it READY. Returns false when no
   * capacity is free. On failure, the replica is stopped and marked FAILED,
   * and the error is rethrown.
   */
  private async startReplica(
    endpoint: EndpointRecord,
    version: VersionRecord,
    hooks: {
      onNoCapacity?: () => Promise<void>;
      onResolving?: (() => Promise<void>) | undefined;
      onDownloadStart?: () => Promise<void>;
      onEngineStart?: () => Promise<void>;
      onWarmup?: (() => Promise<void>) | undefined;
    } = {},
  ): Promise<boolean> {
    const spec = version.spec;
    const option = findInstanceOption(spec.instanceId)!;
    const replicaId = newId('rep');
    const capacity = this.runtime.capacity()[option.gpuType] ?? 0;
    const reserved = await this.guarded(
      endpoint.id,
      (e) => e.desiredState === 'RUNNING',
      (tx) =>
        reserveReplica(
          tx,
          {
            id: replicaId,
            endpointId: endpoint.id,
            versionIndex: version.versionIndex,
            runtime: this.runtime.name,
            node: this.runtime.node,
            gpuType: option.gpuType,
            numGpu: option.numGpu,
          },
          capacity,
        ),
    );
    if (!reserved) {
      await hooks.onNoCapacity?.();
      return false;
    }
    this.starting.add(replicaId);
    let handle: ReplicaHandle | undefined;
    try {
      await hooks.onResolving?.();
      const model = await this.prepareModel(endpoint.id, version, hooks.onDownloadStart);
      await hooks.onEngineStart?.();
      handle = await this.runtime.start(
        {
          replicaId,
          endpointId: endpoint.id,
          modelPath: model.path,
          modelRepo: spec.model.source === 'hf' ? spec.model.repo : spec.model.artifact,
          modelRevision: pinnedRevision(model.resolved) ?? (spec.model.source === 'hf' ? spec.model.revision : null),
          gpuType: option.gpuType,
          numGpu: option.numGpu,
          maxBatchSize: spec.advanced.maxBatchSize,
          contextSize: spec.advanced.maxTokenCount,
          maxInputLength: spec.advanced.maxInputLength,
          addSpecialTokens: spec.advanced.tokenizerAddSpecialTokens,
          skipSpecialTokens: spec.advanced.tokenizerSkipSpecialTokens,
        },
        undefined,
        // Recorded at spawn: a gateway that takes over after this one dies mid-start can stop the engine by its pid.
        (spawned) => markReplica(this.sql, replicaId, { state: 'STARTING', address: spawned.address, pid: spawned.pid }),
      );
      // The warm-up generation runs while the READY status is written; both must succeed.
      const started = handle;
      const [written, warmed] = await Promise.allSettled([hooks.onWarmup?.(), this.warmUp(started)]);
      if (written.status === 'rejected') throw written.reason;
      if (warmed.status === 'rejected') throw warmed.reason;
      await markReplica(this.sql, replicaId, { state: 'READY' });
      if (model.resolved)
        await setVersionRollout(this.sql, endpoint.id, version.versionIndex, { rolloutState: 'ROLLED_OUT', model: model.resolved });
      return true;
    } catch (error) {
      if (handle) await this.runtime.stop(handle, 0);
      await markReplica(this.sql, replicaId, { state: 'FAILED', lastError: safeMessage(error) });
      throw error;
    } finally {
      this.starting.delete(replicaId);
    }
  }

  /** The version's model file: from the cache when this version resolved it before, else from the hub. */
  private async prepareModel(endpointId: string, version: VersionRecord, onDownloadStart?: () => Promise<void>): Promise<PreparedModel> {
    let lastWrite = 0;
    const hooks = {
      ...(onDownloadStart ? { onDownloadStart } : {}),
      onProgress: (progress: { bytesDone: number; bytesTotal: number }) => {
        const now = Date.now();
        if (now - lastWrite < 250 && progress.bytesDone < progress.bytesTotal) return;
        lastWrite = now;
        setProgress(this.sql, endpointId, progress).catch(() => {});
      },
    };
    const model = await this.models.prepareVersion(version.spec, version.model as ResolvedModel | null, hooks);
    if (this.options.builtInEngine) {
      if (!model.path) {
        throw new ModelSourceError(
          'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
          'the built-in engine runs GGUF models only; set ENGINE_COMMAND to use another engine',
        );
      }
      await checkModelSettings(model.path, version.spec);
    }
    return model;
  }

  /** One short generation before traffic is admitted; a replica that cannot generate is not ready. */
  private async warmUp(handle: ReplicaHandle): Promise<void> {
    try {
      const response = await fetch(`${handle.address}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1, temperature: 0 }),
        signal: AbortSignal.timeout(120_000),
      });
      if (!response.ok) throw new WarmupError(`the warm-up generation failed with HTTP ${response.status}`);
      await response.arrayBuffer();
    } catch (error) {
      if (error instanceof WarmupError) throw error;
      throw new WarmupError('the warm-up generation did not complete');
    }
  }

  // ---------------------------------------------------------------- rollout and scaling

  /**
   * Replaces the serving replicas one by one with replicas of the newest
   * version: a new one starts and warms up before an old one drains. If a new
   * replica fails, the old ones keep serving, the version is marked FAILED and
   * the endpoint returns to RUNNING with the failure's code.
   */
  private async rollOut(endpoint: EndpointRecord, serving: ReplicaRecord[]): Promise<void> {
    const id = endpoint.id;
    const target = endpoint.current;
    if (endpoint.status !== 'UPDATING') {
      await this.setStatus(id, { desired: 'RUNNING' }, { status: 'UPDATING', phase: null, errorCode: null, cause: 'controller:rollout' });
    }
    let count = serving.length;
    for (const old of serving.filter((r) => r.versionIndex !== target.versionIndex)) {
      try {
        if (count > Math.max(endpoint.desiredReplicaCnt, 1)) {
          // More serve than wanted (a process that died had started this one's replacement but not retired it): retire it alone.
          await this.stopReplica(old, this.drainTimeoutMs);
          count--;
          await this.refreshCounts(id, endpoint.desiredReplicaCnt, 'controller:rollout');
          continue;
        }
        let started = await this.startReplica(endpoint, target);
        if (!started) {
          // No room for one more: retire the old replica first, then start in its place.
          await this.stopReplica(old, this.drainTimeoutMs);
          started = await this.startReplica(endpoint, target);
          if (!started) return;
        } else {
          await this.stopReplica(old, this.drainTimeoutMs);
        }
        await this.refreshCounts(id, endpoint.desiredReplicaCnt, 'controller:rollout');
      } catch (error) {
        if (error instanceof StaleError) throw error;
        const code = errorCodeOf(error);
        await setVersionRollout(this.sql, id, target.versionIndex, { rolloutState: 'FAILED' });
        await this.refreshCounts(id, endpoint.desiredReplicaCnt, 'controller:rollout-failed');
        await this.setStatus(
          id,
          { desired: 'RUNNING' },
          {
            status: 'RUNNING',
            phase: null,
            errorCode: code,
            cause: 'controller:rollout-failed',
            detail: { message: safeMessage(error), versionIndex: target.versionIndex },
          },
        );
        return;
      }
    }
    await this.setStatus(id, { desired: 'RUNNING' }, { status: 'RUNNING', phase: null, errorCode: null, cause: 'controller:rolled-out' });
  }

  private async autoscale(endpoint: EndpointRecord, serving: ReplicaRecord[]): Promise<void> {
    const id = endpoint.id;
    const spec: EndpointSpec = endpoint.current.spec;
    const healths = await Promise.all(serving.map((r) => this.runtime.health(handleOf(r), 1500)));
    const load = healths.reduce((sum, h) => sum + (h ? h.active + h.queued : 0), 0);
    // Requests the engines do not see yet: those waiting in every gateway process's admission queue.
    const waiting = await queuedDemand(this.sql, id, QUEUE_DEPTH_STALE_MS);
    const activity = [
      endpoint.lastRequestAt?.getTime() ?? 0,
      ...healths.map((h) => (h?.lastRequestAt ? Date.parse(h.lastRequestAt) : 0)),
      ...serving.map((r) => r.readyAt?.getTime() ?? 0),
    ];
    const now = Date.now();
    const capacity = replicaCapacity(spec.advanced.maxBatchSize, healths);
    // First seen by this process (a start, a takeover): counted as busy now, so that nothing scales in before a cooldown.
    if (!this.lastBusy.has(id) || load + waiting > (serving.length - 1) * capacity) this.lastBusy.set(id, now);
    const decision = decideScale({
      minReplica: spec.autoscaling.minReplica,
      maxReplica: spec.autoscaling.maxReplica,
      cooldownMs: spec.autoscaling.cooldownPeriod * 1000,
      maxBatchSize: capacity,
      current: serving.length,
      load,
      waiting,
      lastActivityAt: Math.max(...activity),
      lastScaleUpAt: this.lastScaleUp.get(id) ?? 0,
      lastBusyAt: this.lastBusy.get(id)!,
      now,
    });
    if (decision.sleep) {
      await this.setStatus(
        id,
        { desired: 'RUNNING', statuses: ['RUNNING'] },
        { status: 'STOPPING', phase: null, errorCode: endpoint.errorCode, desiredState: 'SLEEPING', cause: 'controller:idle' },
      );
      return;
    }
    if (decision.replicas > serving.length) {
      if (await this.backingOff(endpoint)) return;
      this.lastScaleUp.set(id, now);
      await this.refreshCounts(id, decision.replicas, 'controller:scale-up');
      const missing = decision.replicas - serving.length;
      await Promise.all(
        Array.from({ length: missing }, () =>
          this.startReplica(endpoint, endpoint.current).catch((error: unknown) => {
            if (error instanceof StaleError) throw error;
            this.log(`scaling ${id} up failed`, error);
            return false;
          }),
        ),
      );
      await this.refreshCounts(id, decision.replicas, 'controller:scale-up');
    } else if (decision.replicas < serving.length) {
      await this.refreshCounts(id, decision.replicas, 'controller:scale-down');
      const newestFirst = [...serving].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
      await this.stopReplicas(newestFirst.slice(0, serving.length - decision.replicas), this.drainTimeoutMs);
      await this.refreshCounts(id, decision.replicas, 'controller:scale-down');
    } else if (!showsCounts(endpoint, countsOf(endpoint, serving, decision.replicas))) {
      // Steady: the counts are rewritten (under the row lock) only when this pass saw them drift.
      await this.refreshCounts(id, decision.replicas, 'controller:steady');
    }
  }
}

/** The counts an endpoint shows for its ready replicas. */
function countsOf(endpoint: EndpointRecord, ready: readonly ReplicaRecord[], desiredReplicas: number) {
  return {
    currReplicaCnt: ready.length,
    desiredReplicaCnt: desiredReplicas,
    updatedReplicaCnt: ready.filter((r) => r.versionIndex === endpoint.current.versionIndex).length,
  };
}
