/**
 * The controller: in every gateway process, a loop compares each endpoint's
 * desired state in Postgres with the replicas that actually run, and acts to
 * close the gap. Its parts:
 *
 * - reconcile-loop.ts: the loop, pokes, and the per-endpoint leases that make
 *   one process act on an endpoint at a time (another adopts the endpoints of
 *   a process that dies);
 * - endpoint-writes.ts: every write re-checks the lease and the endpoint under
 *   its row lock, so a step acting on a stale snapshot becomes a no-op;
 *   statuses are written only as src/domain/lifecycle.ts's
 *   `controllerTransition` answers;
 * - crash-watch.ts: dead and abandoned replicas, and the crash policy;
 * - replica-starter.ts (with model-preparer.ts) and start-errors.ts:
 *   starting replicas, the first one's phases, and what a failed start
 *   shows;
 * - rollout.ts: replacing the replicas of an older version;
 * - scaling.ts: the autoscaler's inputs and acting on its decision;
 * - replica-stopper.ts: draining and stopping replicas, reaping orphans.
 *
 * This file decides, per pass, which of these an endpoint needs. No pass
 * waits for a replica to start: the runtime places it (`ensure`), and each
 * later pass reads what the runtime observes of it and takes the next step;
 * the runtime's changes and a step that ends bring the endpoint's next pass
 * at once.
 */
import { DEFAULTS } from '../defaults.js';
import { sharedEngineClient, type EngineClient } from '../engine-client/engine-client.js';
import { randomUUID } from 'node:crypto';
import { servesAlike } from '../domain/endpoint-spec.js';
import { holdsNoReplicas } from '../domain/lifecycle.js';
import type { ModelStore } from '../models/model-store.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import { markEndpointCleaned } from '../storage/endpoints-repository.js';
import type { PassState } from '../storage/pass-reads.js';
import { QUEUE_DEPTH_STALE_MS } from '../storage/queue-depth-repository.js';
import { StatementBatches } from '../storage/statement-batches.js';
import { findVersion } from '../storage/versions-repository.js';
import { DEFAULT_CRASH_POLICY, type CrashPolicy } from './crash-policy.js';
import { CrashWatch } from './crash-watch.js';
import { EndpointWrites, StaleError } from './endpoint-writes.js';
import { ReconcileLoop } from './reconcile-loop.js';
import { ReplicaStarter } from './replica-starter.js';
import { ReplicaStopper } from './replica-stopper.js';
import { needsRollout, Rollout } from './rollout.js';
import { Scaling } from './scaling.js';
import { failureMessage, isGatewayOutage, startErrorCode, startErrorMessage, type StartFailure } from './start-errors.js';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { SHARDED_POOL_SUFFIX } from '../storage/leases-repository.js';

export interface ControllerOptions {
  sql: Sql;
  runtime: Runtime;
  models: ModelStore;
  /** Whether the built-in engine runs replicas (then models must be GGUF files whose settings are checked). */
  builtInEngine: boolean;
  /** Without GPUs: the host memory one CPU-backed slot may fill. */
  hostMemoryPerSlotBytes?: number;
  /** @default 500 */
  intervalMs?: number;
  /** @default 10000 */
  leaseTtlMs?: number;
  /** How often an endpoint at rest, unchanged, is passed over. @default 10 x intervalMs */
  restIntervalMs?: number;
  /** How long a sleeping or scaled-down replica may take to finish its requests. @default 30000 */
  drainTimeoutMs?: number;
  /** How often the replicas no endpoint owns are looked for and stopped, after the start's. @default 60000 */
  orphanReapIntervalMs?: number;
  /** SIGTERM to SIGKILL. @default 10000 */
  stopGraceMs?: number;
  /** A draining engine that answers no health check for this long is stopped. @default 10000 */
  drainSilenceMs?: number;
  /** The first wait of an endpoint's placements after an outage (placement-backoff.ts). @default 1000 */
  placementBackoffBaseMs?: number;
  /** Replacement back-off and the deaths within a window that mark the endpoint FAILED. @default DEFAULT_CRASH_POLICY */
  crashLoop?: Partial<CrashPolicy>;
  log?: (message: string, error?: unknown) => void;
  /** The client the warm-up generation goes through. @default the process's (sharedEngineClient) */
  engines?: EngineClient;
}

export class Controller {
  /** This process, as lease holder (its OS process id, then a random part). */
  readonly owner = `gw-${process.pid}-${randomUUID()}`;
  private readonly sql: Sql;
  private readonly batches: StatementBatches;
  private readonly runtime: Runtime;
  private readonly drainTimeoutMs: number;
  private readonly loop: ReconcileLoop;
  private readonly writes: EndpointWrites;
  private readonly stopper: ReplicaStopper;
  private readonly crashes: CrashWatch;
  private readonly starter: ReplicaStarter;
  private readonly rollout: Rollout;
  private readonly scaling: Scaling;
  private readonly log: (message: string, error?: unknown) => void;
  private readonly orphanReapIntervalMs: number;
  private reaper: NodeJS.Timeout | undefined;
  /** The reap under way, if any (one at a time; waited for by `stop`). */
  private reaping: Promise<void> | undefined;

  constructor(options: ControllerOptions) {
    const { sql, runtime, models, builtInEngine } = options;
    const log = options.log ?? ((message, error) => console.error(`[controller] ${message}`, error ?? ''));
    const drainTimeoutMs = options.drainTimeoutMs ?? DEFAULTS.drainTimeoutMs;
    // The passes' reads, the replicas' moves and the counts' refreshes, each kind coalesced over the passes and steps of one turn.
    const batches = new StatementBatches(sql, QUEUE_DEPTH_STALE_MS);
    const writes = new EndpointWrites(sql, this.owner, (id, desired, cause) => batches.refreshCounts(id, desired, cause));
    const stopper = new ReplicaStopper(
      sql,
      batches,
      runtime,
      options.stopGraceMs ?? DEFAULTS.stopGraceMs,
      log,
      options.drainSilenceMs ?? DEFAULTS.drainSilenceMs,
    );
    const starter = new ReplicaStarter({
      sql,
      batches,
      runtime,
      models,
      writes,
      builtInEngine,
      engines: options.engines ?? sharedEngineClient(),
      ...(options.hostMemoryPerSlotBytes !== undefined ? { hostMemoryPerSlotBytes: options.hostMemoryPerSlotBytes } : {}),
      poke: (endpointId) => this.loop.poke(endpointId, { internal: true }),
      holds: (endpointId) => this.loop.holds(endpointId),
      evictedByNode: (endpointId) => this.crashes.evictedByNode(endpointId),
      placementBackoffBaseMs: options.placementBackoffBaseMs ?? DEFAULTS.placementBackoffBaseMs,
      log,
    });
    const policy = { ...DEFAULT_CRASH_POLICY, ...options.crashLoop };
    const intervalMs = options.intervalMs ?? DEFAULTS.controllerIntervalMs;
    // A health answer stands for half an interval: an idle endpoint's passes (one per interval) each ask anew.
    const crashes = new CrashWatch(sql, batches, runtime, writes, stopper, policy, starter, log, intervalMs / 2, drainTimeoutMs);
    this.sql = sql;
    this.batches = batches;
    this.runtime = runtime;
    this.log = log;
    this.drainTimeoutMs = drainTimeoutMs;
    this.orphanReapIntervalMs = options.orphanReapIntervalMs ?? DEFAULTS.orphanReapIntervalMs;
    this.writes = writes;
    this.stopper = stopper;
    this.starter = starter;
    this.crashes = crashes;
    this.rollout = new Rollout(sql, writes, starter, stopper, drainTimeoutMs, (endpointId) =>
      this.loop.poke(endpointId, { internal: true }),
    );
    this.scaling = new Scaling({ sql, runtime, writes, starter, stopper, crashes, drainTimeoutMs });
    this.loop = new ReconcileLoop({
      sql,
      owner: this.owner,
      // A runtime whose replicas no other gateway can adopt makes this process a pool of its own: it hands nothing over.
      // Gateways that divide shards are a pool apart from those that share by count (an earlier version's, in a rolling
      // update): each counts the other as another pool, so neither hands endpoints to the other, and the shards are
      // divided between the gateways that take their endpoints (see reconcile-loop.ts).
      pool: runtime.adoptablePool
        ? `${runtime.adoptablePool}${runtime.watchShards ? SHARDED_POOL_SUFFIX : ''}`
        : `${runtime.name}:${runtime.node}:${this.owner}`,
      node: runtime.node,
      intervalMs,
      leaseTtlMs: options.leaseTtlMs ?? DEFAULTS.leaseTtlMs,
      reconcile: (id) => this.reconcile(id),
      busy: (id) => this.starter.busy(id),
      ...(runtime.watchShards ? { watchShards: (shards: ReadonlySet<number>) => runtime.watchShards!(shards) } : {}),
      forget: (ids) => {
        for (const id of ids) for (const part of [this.crashes, this.scaling, this.starter]) part.forget(id);
      },
      ...(options.restIntervalMs !== undefined ? { restIntervalMs: options.restIntervalMs } : {}),
      log,
    });
    // What the runtime sees change in a replica (a pod scheduled, an engine ready) is read by the endpoint's next pass,
    // now, when this process holds the endpoint (a gateway may see pods of endpoints it does not hold: those of a
    // shard it still follows, another gateway's pods before the shards are divided).
    runtime.onChange((endpointId) => this.loop.poke(endpointId, { heldOnly: true, internal: true }));
  }

  /**
   * Reaps replicas no endpoint owns, then reconciles every interval (and at once on `poke`). Orphans are reaped every
   * `orphanReapIntervalMs` too: one can appear later (a pod create that committed after its gateway died, or was
   * answered as failed; a start-up whose pod cache could not sync yet, when the first reap sees nothing).
   */
  async start(): Promise<void> {
    await this.stopper.reapOrphans();
    this.loop.start();
    const reap = () => {
      this.reaping ??= this.stopper
        .reapOrphans()
        .catch((error: unknown) => this.log('reaping orphaned replicas failed', error))
        .finally(() => (this.reaping = undefined));
    };
    this.reaper = setInterval(reap, this.orphanReapIntervalMs);
    this.reaper.unref();
  }

  /**
   * Asks for a reconcile pass now (after an API action), instead of at the
   * next interval: of that endpoint alone when one is named, else of all.
   */
  poke(endpointId?: string): void {
    this.loop.poke(endpointId);
  }

  /**
   * Stops the loop and waits for passes in flight. Replicas keep running, and
   * the leases are released, with this process's membership, so another
   * gateway (or this one, restarted) adopts the endpoints at its next
   * interval's pass.
   */
  async stop(): Promise<void> {
    clearInterval(this.reaper);
    await this.reaping;
    await this.loop.stop();
    await this.starter.stop();
  }

  /**
   * One pass over one endpoint whose lease this process holds. Answers the endpoint's stamp, as read, when it found
   * the endpoint at rest, with nothing to do until something changes: asleep, terminated or failed with nothing left to stop; serving with every replica
   * ready and current and no demand; or waiting for replicas that start (the runtime tells each of their steps). The
   * loop then passes over it less often while it stays unchanged (see reconcile-loop.ts).
   */
  private async reconcile(id: string): Promise<string | undefined> {
    // The endpoint, its live replicas and the requests queued for it, in one read.
    const state = await this.batches.readPassState(id);
    if (!state) return undefined;
    return (await this.act(state)) ? state.stamp : undefined;
  }

  /** What one pass does with what it read; true when the endpoint is at rest (see `reconcile`). */
  private async act(state: PassState): Promise<boolean> {
    const { writes, stopper } = this;
    const { endpoint } = state;
    const id = endpoint.id;
    // A start's failure kept for a pass is told only while the endpoint wants to run: one from before a sleep, a
    // terminate or a delete (its replica stopped by it), or from before the endpoint failed, must not fail the
    // next wake or restart.
    if (endpoint.deleted || endpoint.desiredState !== 'RUNNING' || endpoint.status === 'FAILED') {
      this.starter.dropFailures(id);
      this.starter.cancel(id, 'no longer wanted: the endpoint stopped wanting to run');
    }
    const replicas = await this.crashes.observe(endpoint, state.replicas);
    if (replicas === 'failed') {
      this.starter.dropFailures(id);
      return false;
    }

    if (endpoint.deleted) {
      await stopper.stopAll(replicas, 0);
      await writes.refreshCounts(id, 0, 'controller:delete');
      await this.runtime.forgetEndpoint?.(id);
      await markEndpointCleaned(this.sql, id);
      return false;
    }
    switch (endpoint.desiredState) {
      case 'DELETED':
      case 'TERMINATED':
        if (replicas.length > 0 || endpoint.status === 'TERMINATING') {
          await stopper.stopAll(replicas, 0);
          await writes.refreshCounts(id, 0, 'controller:terminate');
          await writes.transition(id, endpoint, { type: 'terminate-done' }, { cause: 'controller:terminated' });
          return false;
        }
        return true;
      case 'SLEEPING':
        if (replicas.length > 0 || endpoint.status === 'STOPPING') {
          await stopper.stopAll(replicas, this.drainTimeoutMs);
          await writes.refreshCounts(id, 0, 'controller:sleep');
          await writes.transition(id, endpoint, { type: 'sleep-done' }, { cause: 'controller:slept' });
          return false;
        }
        return true;
      case 'RUNNING': {
        if (endpoint.status === 'FAILED') return replicas.length === 0;
        if (holdsNoReplicas(endpoint)) {
          // Of the version read: an update since (a maxReplica raised again) is the next pass's.
          const changed = await writes.transition(
            id,
            endpoint,
            { type: 'held-at-zero' },
            { cause: 'controller:max-replica-0', ofVersion: endpoint.current.versionIndex },
          );
          return changed === null && replicas.length === 0;
        }
        const serving = replicas.filter((r) => r.state === 'READY');
        const seen = await this.starter.advance(
          endpoint,
          replicas.filter((r) => r.state === 'STARTING'),
          serving.length,
        );
        const { starting } = seen;
        if (await this.tellFailures(endpoint, serving, seen.failed)) return false;
        // A start whose state this runtime cannot tell yet (its cache not synced) is neither followed nor replaced by
        // another: the endpoint waits for a pass that can tell.
        if (seen.unknown) return false;
        if (serving.length === 0) {
          // The first replica is on its way (the runtime tells each of its steps: the pass that acts on it comes then),
          // or waits out its back-off; else it begins.
          if (starting.length > 0) return true;
          if (await this.crashes.backingOff(endpoint)) return false;
          // A model that cannot be had (found out before a wait for capacity) fails the start at once.
          await this.starter.begin(endpoint, endpoint.current, true).catch(async (error: unknown) => {
            if (error instanceof StaleError || isGatewayOutage(error)) throw error;
            await this.tellFailures(endpoint, serving, [{ replicaId: '', versionIndex: endpoint.current.versionIndex, error }]);
          });
        } else if (needsRollout(serving, endpoint.current)) {
          await this.rollout.step(endpoint, serving, starting, seen.waitingForNode);
        } else {
          // Its counts go with the status (a pass can read the first replica READY before its warm-up has shown it).
          const changed = await writes.transition(
            id,
            endpoint,
            { type: 'all-replicas-current' },
            {
              cause: 'controller:serving',
              desiredReplicas: Math.max(endpoint.desiredReplicaCnt, serving.length),
              // Every replica is of the version read: an update since makes this no longer true.
              ofVersion: endpoint.current.versionIndex,
            },
          );
          const steady = await this.scaling.autoscale(endpoint, state.queued, serving, starting, seen.waitingForNode);
          return steady && changed === null && !replicas.some((r) => r.state === 'DRAINING');
        }
        return false;
      }
    }
  }

  /**
   * Tells the endpoint of starts that failed, as its state calls for: with no replica serving, its start failed
   * (FAILED, with the failure's code); a replica of the version being rolled out, the rollout failed (the old
   * replicas serve on); a scale-out's, logged (the autoscaler tries again). True when the endpoint changed (the
   * pass ends: the next reads it anew).
   */
  /**
   * Whether a failed start of `versionIndex` is of a version the endpoint no longer wants: an older one that served
   * otherwise (an update of its name or autoscaling alone changes nothing the start did: its failure is the current's).
   */
  private async superseded(endpoint: EndpointRecord, versionIndex: number): Promise<boolean> {
    if (versionIndex === endpoint.current.versionIndex) return false;
    const from = await findVersion(this.sql, endpoint.id, versionIndex);
    return !from || !servesAlike(from.spec, endpoint.current.spec);
  }

  private async tellFailures(
    endpoint: EndpointRecord,
    serving: readonly ReplicaRecord[],
    failed: readonly StartFailure[],
  ): Promise<boolean> {
    const id = endpoint.id;
    for (const { replicaId, versionIndex, error } of failed) {
      const errorCode = startErrorCode(error);
      if (serving.length === 0 && (await this.superseded(endpoint, versionIndex))) {
        // A version the endpoint no longer wants (an update came during its start): the pass starts the current one.
        this.log(`starting ${id}: replica ${replicaId} of a superseded version (${versionIndex}) did not start`, error);
        continue;
      }
      if (serving.length === 0) {
        this.log(`starting ${id} failed with ${errorCode}`, error);
        await this.writes.refreshCounts(id, 0, 'controller:start-failed');
        await this.writes.transition(
          id,
          endpoint,
          { type: 'start-failed', errorCode },
          {
            cause: 'controller:start-failed',
            detail: { message: startErrorMessage(error) },
            errorMessage: failureMessage(error),
            ofVersion: endpoint.current.versionIndex,
          },
        );
        return true;
      }
      if (versionIndex === endpoint.current.versionIndex && needsRollout(serving, endpoint.current)) {
        await this.rollout.fail(endpoint, error);
        return true;
      }
      this.log(`scaling ${id} up failed: replica ${replicaId} did not start`, error);
    }
    return false;
  }
}
