/**
 * Starting replicas, driven by the passes: no pass waits for a download or an engine's load. A start goes through three steps:
 *
 * 1. `begin` (in a pass): the runtime admits the replica (the local runtime counts this machine's slots; on Kubernetes the
 *    scheduler decides later) and its row is written, STARTING; without room, the first replica of an endpoint shows why it waits.
 * 2. Placing (in the background, in this process): the runtime places the replica (`ensure`) with its model step (`ModelSteps`),
 *    which it runs as it provisions models: resolved before a pod is created, or downloaded and checked before the local engine
 *    is spawned (in the runtime's own background: the row records the engine's locator once it is known).
 * 3. `advance` (in each pass): what the runtime observes of each placed, starting replica. Its step is the endpoint's phase while
 *    no replica serves; ready, it warms up (one short generation, in the background) and is marked READY; dead, its start failed.
 *
 * A step that ends pokes the endpoint, so that its next pass comes at once. Failures are handed to the next pass (`advance`
 * answers them), which tells the endpoint in the way its state calls for (a failed start, a failed rollout, a scale-out that did
 * not happen).
 */
import type { EndpointRecord, VersionRecord } from '../domain/endpoint.js';
import { servesAlike } from '../domain/endpoint-spec.js';
import { findInstanceOption } from '../domain/instance-catalog.js';
import type { ControllerEvent, LifecycleState } from '../domain/lifecycle.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { EngineClient } from '../engine-client/engine-client.js';
import type { ModelStore } from '../models/model-store.js';
import { ReplicaStartError, type ReplicaRef, type Runtime } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import { KEEP_DESIRED } from '../storage/endpoints-repository.js';
import { retagReplica } from '../storage/replicas-repository.js';
import type { StatementBatches } from '../storage/statement-batches.js';
import { findVersion } from '../storage/versions-repository.js';
import { ignoreStale, StaleError, type EndpointWrites } from './endpoint-writes.js';
import { DISRUPTED } from './crash-watch.js';
import { ModelPreparer } from './model-preparer.js';
import { refOf } from './replica-stopper.js';
import { PlacementBackoff } from './placement-backoff.js';
import { interruptionMessage, isGatewayOutage, startErrorMessage, type StartFailure, type StartsSeen } from './start-errors.js';
import { showStep, warmUp } from './start-steps.js';
import { LaneQueue } from './lane-queue.js';

export interface ReplicaStarterOptions {
  sql: Sql;
  /** The replicas' moves go through it (with the other moves of the same turn). */
  batches: StatementBatches;
  runtime: Runtime;
  models: ModelStore;
  writes: EndpointWrites;
  /** Whether the built-in engine runs replicas (then models must be GGUF files whose settings are checked). */
  builtInEngine: boolean;
  /** The client of the replicas' engines (the warm-up generation). */
  engines: EngineClient;
  /** Without GPUs: the host memory one CPU-backed slot may fill (bounds the token limits that follow the model). */
  hostMemoryPerSlotBytes?: number;
  /** Asks for the endpoint's next pass now (a step ended). */
  poke: (endpointId: string) => void;
  /** Whether this process holds the endpoint (a step that ends for one it no longer holds leaves nothing kept). */
  holds?: (endpointId: string) => boolean;
  /** A starting replica's node evicted it under its own pressure: the crash watch's back-off (CrashWatch.evictedByNode). */
  evictedByNode?: (endpointId: string) => void;
  /** The first wait of an endpoint's placements after an outage (placement-backoff.ts). @default 1000 */
  placementBackoffBaseMs?: number;
  log: (message: string, error?: unknown) => void;
}

/** A step of a start running in this process: the placement, or the warm-up. */
interface Job {
  endpointId: string;
  abort: AbortController;
  done: Promise<void>;
}

/** Why a job was aborted: the gateway stops (the replica is left as it is, for the next gateway). */
class GatewayStopping extends Error {}

export class ReplicaStarter {
  private readonly jobs = new Map<string, Job>();
  /** Placed starting replicas this process follows (placed here, or taken over from a gateway that stopped): their endpoints. */
  private readonly followed = new Map<string, string>();
  /** Failed starts not yet told, by endpoint. */
  private readonly failures = new Map<string, StartFailure[]>();
  /** Replicas whose warm-up ended here (marked READY), by id: their endpoints. A pass that read one STARTING before does not warm it again. */
  private readonly warmed = new Map<string, string>();
  /** Endpoints whose last placements met an outage wait before the next. */
  private readonly outages: PlacementBackoff;
  private readonly preparer: ModelPreparer;
  /**
   * Steps that run at once (downloads, placements, warm-ups); the others wait their turn, already counted as starting:
   * the placements of endpoints' first replicas and the warm-ups first (an endpoint serves once one replica has been
   * placed and warmed up), in the order queued, then the placements of the others (BENCHMARKS.md, session 27).
   */
  private readonly steps = new LaneQueue(32, 2);

  constructor(private readonly options: ReplicaStarterOptions) {
    this.preparer = new ModelPreparer(options);
    this.outages = new PlacementBackoff(options.placementBackoffBaseMs);
  }

  /** Whether the endpoint's next placement waits out the back-off of an outage (placement-backoff.ts): `begin` places none. */
  placementsWait(endpointId: string): boolean {
    return this.outages.waiting(endpointId);
  }

  /** Whether this process drives the replica's start (any other STARTING replica was abandoned by a gateway that stopped). */
  isStarting(replicaId: string): boolean {
    return this.jobs.has(replicaId) || this.followed.has(replicaId);
  }

  /** Follows from now on a start whose placement's write was lost, adopted before its engine was placed (crash-watch.ts). */
  follow(replicaId: string, endpointId: string): void {
    this.followed.set(replicaId, endpointId);
  }

  /** This process no longer holds the endpoint: the starts it followed and the failures it kept for it go (not its jobs). */
  forget(endpointId: string): void {
    this.failures.delete(endpointId);
    this.outages.clear(endpointId);
    for (const map of [this.followed, this.warmed]) for (const [id, of] of map) if (of === endpointId && !this.jobs.has(id)) map.delete(id);
  }

  /** The endpoint's failed starts not told yet are dropped: it no longer wants to run (asleep, terminated, failed). */
  dropFailures = (endpointId: string) => void this.failures.delete(endpointId);

  /**
   * Ends the steps of the endpoint's starts that run in this process (it no longer wants to run: a sleep, a terminate,
   * a delete): a placement waiting on a model source that does not answer is cut now, not when its deadline comes, and
   * what it placed goes (as for any start found stale).
   */
  cancel(endpointId: string, why: string): void {
    for (const job of this.jobs.values()) {
      if (job.endpointId === endpointId && !job.abort.signal.aborted) job.abort.abort(new StaleError(why));
    }
  }

  /** Whether a step of one of the endpoint's starts (a placement, a warm-up) runs in this process. */
  busy = (endpointId: string) => [...this.jobs.values()].some((job) => job.endpointId === endpointId);

  /** Ends this process's steps (the gateway stops): replicas are left as they are, for the next gateway to follow. */
  async stop(): Promise<void> {
    for (const job of this.jobs.values()) job.abort.abort(new GatewayStopping('the gateway stops'));
    await Promise.allSettled([...this.jobs.values()].map((job) => job.done));
  }

  /**
   * Asks the runtime for room for `count` replicas of `version` (their rows are written with the answers:
   * EndpointWrites.admitReplicas) and begins placing those admitted, in the background. Answers how many began:
   * fewer when the runtime has no room now; then the first replica of an endpoint (`first`) shows why it waits.
   */
  async begin(endpoint: EndpointRecord, version: VersionRecord, first: boolean, count = 1): Promise<number> {
    const { runtime, writes } = this.options;
    // The runtime was out (its API server down, a quota full) at the last placement: the next waits its back-off.
    if (this.outages.waiting(endpoint.id)) return 0;
    const option = findInstanceOption(version.spec.instanceId)!;
    const { begun, refusal } = await writes.admitReplicas(endpoint.id, runtime, option, version.versionIndex, count);
    if (begun.length === 0 && refusal !== undefined && first) {
      // A repository that does not exist (or holds nothing to run) is reported before any wait for capacity.
      await this.preparer.resolveEarly(version);
      await showStep(this.options.writes, endpoint.id, endpoint, { phase: 'REQUESTING_VIRTUAL_MACHINE', reason: refusal });
    }
    for (const id of begun) {
      this.run(id, endpoint.id, first ? STEP.firstPlacement : STEP.placement, (signal) => this.place(id, endpoint, version, first, signal));
    }
    return begun.length;
  }

  /** Runs a step in the background; when it ends, the endpoint's next pass comes at once. */
  private run(replicaId: string, endpointId: string, lane: number, work: (signal: AbortSignal) => Promise<void>) {
    const abort = new AbortController();
    const job = { abort, endpointId } as Job;
    this.jobs.set(replicaId, job);
    // A step still queued when the gateway stops is skipped: its replica is left as it is, for the next gateway.
    job.done = this.steps
      .add(replicaId, lane, () => (abort.signal.aborted ? Promise.resolve() : work(abort.signal)))
      .catch((error: unknown) => this.options.log(`a start step of ${replicaId} failed`, error))
      .finally(() => {
        this.jobs.delete(replicaId);
        if (this.options.holds?.(endpointId) === false) this.forget(endpointId);
        this.options.poke(endpointId);
      });
  }

  /** The placement, with the model's step for the runtime to run; the row records where the replica runs. */
  private async place(replicaId: string, endpoint: EndpointRecord, version: VersionRecord, first: boolean, signal: AbortSignal) {
    const { batches, runtime } = this.options;
    const spec = version.spec;
    const option = findInstanceOption(spec.instanceId)!;
    let shown: LifecycleState = endpoint;
    // The phase is shown while it is this process's to show; a report found stale (the lease lost for a moment, the
    // endpoint changed) does not end the start: the passes and the row's own guard decide whether it is still wanted.
    const report = async (event: ControllerEvent, cause: string) => {
      if (!first) return;
      shown = (await this.options.writes.transition(endpoint.id, shown, event, { cause }).catch(ignoreStale)) ?? shown;
    };
    let ref: ReplicaRef | undefined;
    try {
      await report({ type: 'resolving-model' }, 'controller:downloading_model');
      // The model step runs as the runtime provisions models (resolved before a pod is created; downloaded here
      // before the local engine is spawned): the runtime reports its steps.
      ref = await runtime.ensure({
        replicaId,
        endpointId: endpoint.id,
        versionIndex: version.versionIndex,
        gpuType: option.gpuType,
        numGpu: option.numGpu,
        maxBatchSize: spec.advanced.maxBatchSize,
        addSpecialTokens: spec.advanced.tokenizerAddSpecialTokens,
        skipSpecialTokens: spec.advanced.tokenizerSkipSpecialTokens,
        model: this.preparer.steps(endpoint, version, replicaId, signal),
      });
      const placed = {
        state: 'STARTING' as const,
        address: ref.address,
        locator: ref.locator,
        model: this.preparer.known(version),
        ...(ref.token ? { token: ref.token } : {}),
      };
      this.outages.clear(endpoint.id);
      // Stopped meanwhile (a sleep, a terminate): what was placed goes too.
      if (!(await batches.markReplica(replicaId, placed))) return void (await runtime.stop(ref, 0));
      this.followed.set(replicaId, endpoint.id);
      // Its step as the runtime sees it now; a step shown late (the endpoint changed) leaves the replica to the passes.
      const seen = runtime.observe(ref);
      if (first && seen.state === 'starting') await showStep(this.options.writes, endpoint.id, shown, seen).catch(ignoreStale);
    } catch (error) {
      const reason: unknown = signal.aborted ? signal.reason : error;
      // The gateway stops, or lost its database or the runtime after placing: the next pass (anyone's) follows it.
      if (reason instanceof GatewayStopping || (ref && isGatewayOutage(reason))) return;
      if (ref) await runtime.stop(ref, 0);
      // Abandoned (its endpoint changed meanwhile), or an outage before it was placed: not a failure of the replica.
      if (isGatewayOutage(reason)) this.outages.met(endpoint.id);
      if (reason instanceof StaleError || isGatewayOutage(reason)) {
        if (!(reason instanceof StaleError)) this.options.log(`the start of ${replicaId} was interrupted`, reason);
        await batches.markReplica(replicaId, { state: 'STOPPED', lastError: interruptionMessage(reason) });
        return;
      }
      await this.keepFailure(endpoint.id, { replicaId, versionIndex: version.versionIndex, error: reason });
    }
  }

  /** Marks the replica FAILED; true unless it had ended meanwhile (stopped by a sleep, a terminate). */
  private async fail(failure: StartFailure): Promise<boolean> {
    this.followed.delete(failure.replicaId);
    return this.options.batches.markReplica(failure.replicaId, { state: 'FAILED', lastError: startErrorMessage(failure.error) });
  }

  /** A step in the background failed: the replica is marked, and the failure kept for the endpoint's next pass. */
  private async keepFailure(endpointId: string, failure: StartFailure): Promise<void> {
    // Kept before the row changes: a pass that no longer sees the replica starting sees its failure.
    const list = this.failures.get(endpointId) ?? [];
    list.push(failure);
    this.failures.set(endpointId, list);
    if (!(await this.fail(failure)))
      this.failures.set(
        endpointId,
        (this.failures.get(endpointId) ?? []).filter((f) => f !== failure),
      );
  }

  /**
   * Reads what the runtime observes of the endpoint's starting replicas (`starting`: the live rows, STARTING)
   * while `serving` replicas serve: the first replica's step becomes the endpoint's phase; a ready one begins its
   * warm-up; a dead one's start failed; one that waits for a machine is named (a rollout makes room for it).
   */
  async advance(endpoint: EndpointRecord, starting: readonly ReplicaRecord[], serving: number): Promise<StartsSeen> {
    const { runtime, batches } = this.options;
    const failed = this.failures.get(endpoint.id) ?? [];
    this.failures.delete(endpoint.id);
    // Marked FAILED before they are told (a step kept its failure before its own write of the row).
    for (const failure of failed) await this.fail(failure);
    const seen: StartsSeen = { unknown: false, failed, waitingForNode: [], starting: [...starting] };
    const ended = (id: string) => (seen.starting = seen.starting.filter((r) => r.id !== id));
    // A start that ends here without failing: the runtime's part goes, and the row says why (unless it ended already).
    const drop = async (replica: ReplicaRecord, ref: ReplicaRef, lastError?: string) => {
      await runtime.stop(ref, 0);
      this.followed.delete(replica.id);
      if (lastError !== undefined) await batches.markReplica(replica.id, { state: 'STOPPED', lastError });
      ended(replica.id);
    };
    let reported = false;
    for (let replica of starting) {
      if (replica.runtime !== runtime.name || this.jobs.has(replica.id) || this.warmed.has(replica.id)) continue;
      // Not placed as this pass read it (its placing ended since: the next pass reads it placed), or placed without a
      // locator by a gateway that stopped (the crash watch judges it). A placed row has its engine's token or locator.
      if (replica.locator === null && (replica.token === null || !this.followed.has(replica.id))) continue;
      let ref = refOf(replica);
      // A version the endpoint no longer wants (updated while it started): stopped, not waited for; unless the update
      // changed only what the gateway reads (the name, the autoscaling policy): then it goes on as the new version's.
      if (replica.versionIndex !== endpoint.current.versionIndex && endpoint.current.rolloutState !== 'FAILED') {
        if (await this.carryOver(endpoint, replica)) {
          const carried: ReplicaRecord = { ...replica, versionIndex: endpoint.current.versionIndex };
          seen.starting = seen.starting.map((r) => (r.id === carried.id ? carried : r));
          replica = carried;
        } else {
          await drop(replica, ref, 'no longer wanted: the endpoint was updated');
          continue;
        }
      }
      const observed = runtime.observe(ref);
      if (observed.state === 'unknown') {
        seen.unknown = true;
        continue;
      }
      this.followed.set(replica.id, endpoint.id);
      this.preparer.learn(replica);
      if (observed.state !== 'dead' && observed.locator && observed.locator !== replica.locator) {
        // Its engine was spawned after its model step: the row records where.
        const placed = {
          locator: observed.locator,
          address: observed.address ?? replica.address,
          model: this.preparer.known({ ...replica, model: null }),
        };
        // Its row ended meanwhile (a sleep, a terminate): what was spawned goes too.
        if (!(await batches.markReplica(replica.id, { state: 'STARTING', ...placed }))) {
          await drop(replica, ref);
          continue;
        }
        replica = { ...replica, ...placed };
        ref = refOf(replica);
      }
      const first = serving === 0;
      if (observed.state === 'starting') {
        if (observed.phase === 'REQUESTING_VIRTUAL_MACHINE' && observed.reason !== undefined) seen.waitingForNode.push(replica.id);
        if (first && !reported) {
          reported = true;
          await showStep(this.options.writes, endpoint.id, endpoint, observed);
        }
      } else if (observed.state === 'ready') {
        const warming: boolean = first && !reported;
        reported ||= warming;
        this.run(replica.id, endpoint.id, STEP.warmUp, () => this.warm(endpoint, replica, observed.address, warming));
      } else if (isGatewayOutage(observed.cause)) {
        // Its model step lost our database: not the replica's failure (a later pass starts another).
        this.options.log(`the model step of ${replica.id} lost the database`, observed.cause);
        await drop(replica, ref, interruptionMessage(observed.cause));
      } else if (observed.disrupted) {
        // The cluster took its pod away (evicted, preempted, its node drained): not the start's failure either.
        await drop(replica, ref, `${DISRUPTED}: ${observed.reason ?? 'the cluster took it away'}`);
        if (observed.evictedByNode) this.options.evictedByNode?.(endpoint.id);
      } else {
        // What the runtime keeps of it goes (a failed pod's object; a process's state file).
        await runtime.stop(ref, 0);
        const error =
          observed.cause ??
          new ReplicaStartError(observed.code ?? 'WORKLOAD_INIT_GRPC_ERROR', observed.reason ?? 'the engine stopped before it was ready');
        const failure = { replicaId: replica.id, versionIndex: replica.versionIndex, error };
        if (await this.fail(failure)) failed.push(failure);
        ended(replica.id);
      }
    }
    // Forget the replicas of this endpoint that no longer start (stopped, or taken over by another gateway).
    for (const [id, endpointId] of this.followed) {
      if (endpointId === endpoint.id && !starting.some((r) => r.id === id)) this.followed.delete(id);
    }
    for (const [id, endpointId] of this.warmed) {
      if (endpointId === endpoint.id && !starting.some((r) => r.id === id)) this.warmed.delete(id);
    }
    return seen;
  }

  /** Hands a starting replica to the endpoint's current version when that version serves as the replica's does. */
  private async carryOver(endpoint: EndpointRecord, replica: ReplicaRecord): Promise<boolean> {
    const { sql } = this.options;
    const from = await findVersion(sql, endpoint.id, replica.versionIndex);
    if (!from || !servesAlike(from.spec, endpoint.current.spec)) return false;
    if (!(await retagReplica(sql, replica.id, from.versionIndex, endpoint.current.versionIndex, 'STARTING'))) return false;
    this.preparer.carry(from, endpoint.current);
    return true;
  }

  /**
   * The warm-up generation, then READY. The first replica of a start shows READY while it warms up (the lifecycle's
   * 'warming-up'), then RUNNING once it serves.
   */
  private async warm(endpoint: EndpointRecord, replica: ReplicaRecord, address: string, first: boolean): Promise<void> {
    const { batches, writes } = this.options;
    const ref = { ...refOf(replica), address };
    const id = endpoint.id;
    try {
      const [written, warmed] = await Promise.allSettled([
        first ? writes.transition(id, endpoint, { type: 'warming-up' }, { cause: 'controller:warm-up' }) : undefined,
        warmUp(this.options.engines, ref),
      ]);
      if (written.status === 'rejected') throw written.reason;
      if (warmed.status === 'rejected') throw warmed.reason;
      this.followed.delete(replica.id);
      if (!(await batches.markReplica(replica.id, { state: 'READY', address, locator: replica.locator }))) return;
      this.warmed.set(replica.id, id);
      // The version is marked rolled out (with the model it resolved to) by its first replica; the others find it so.
      const version = endpoint.current.versionIndex === replica.versionIndex ? endpoint.current : undefined;
      if (version?.rolloutState !== 'ROLLED_OUT' || !version.model) {
        const model = this.preparer.known({ endpointId: id, versionIndex: replica.versionIndex, model: version?.model ?? null });
        await writes.setRollout(id, replica.versionIndex, { rolloutState: 'ROLLED_OUT', ...(model ? { model } : {}) });
      }
      if (!first) return void (await writes.refreshCounts(id, KEEP_DESIRED, 'controller:replica-ready'));
      // Counted first: whoever sees RUNNING also sees the replica that serves.
      await writes.refreshCounts(id, { atLeast: Math.max(endpoint.current.spec.autoscaling.minReplica, 1) }, 'controller:started');
      // RUNNING for the version it serves: an update since (UPDATING) is left to its rollout.
      await writes.transition(id, endpoint, { type: 'replica-ready' }, { cause: 'controller:serving', ofVersion: replica.versionIndex });
    } catch (error) {
      // Stale: another wrote first. An outage of ours: the next pass warms it up again. Neither is the replica's failure.
      if (error instanceof StaleError || isGatewayOutage(error)) return;
      await this.options.runtime.stop(ref, 0);
      await this.keepFailure(id, { replicaId: replica.id, versionIndex: replica.versionIndex, error });
    }
  }
}

/** The start steps' lanes (LaneQueue), the first served first. */
const STEP = { warmUp: 0, firstPlacement: 0, placement: 1 } as const;
