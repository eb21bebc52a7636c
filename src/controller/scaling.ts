/**
 * Autoscaling, around the pure decision of autoscaler.ts: this module reads
 * what it needs (the engines' load, the last activity; the requests waiting
 * in every gateway's admission queue come with the pass's read), remembers per endpoint when it last
 * scaled up and last needed every replica, and acts on the decision: start
 * replicas, drain the newest ones, or put an idle endpoint to sleep.
 */
import type { EndpointRecord, VersionRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { EngineHealth, Runtime } from '../runtime/runtime.js';
import { showsCounts } from '../services/endpoint-state.js';
import type { Sql } from '../storage/database.js';
import { countsOf } from '../storage/endpoints-repository.js';
import { findVersion } from '../storage/versions-repository.js';
import { decideScale, replicaCapacity } from './autoscaler.js';
import type { CrashWatch } from './crash-watch.js';
import type { EndpointWrites } from './endpoint-writes.js';
import type { ReplicaStarter } from './replica-starter.js';
import { refOf, type ReplicaStopper } from './replica-stopper.js';

/** The last request (the endpoint's or an engine's), or when a replica became ready if later. */
export function lastActivityAt(
  endpoint: Pick<EndpointRecord, 'lastRequestAt'>,
  healths: readonly (Pick<EngineHealth, 'lastRequestAt'> | undefined)[],
  serving: readonly Pick<ReplicaRecord, 'readyAt'>[],
): number {
  return Math.max(
    endpoint.lastRequestAt?.getTime() ?? 0,
    ...healths.map((h) => (h?.lastRequestAt ? Date.parse(h.lastRequestAt) : 0)),
    ...serving.map((r) => r.readyAt?.getTime() ?? 0),
  );
}

/** Whether the demand needs every serving replica (one fewer could not take it). */
export function needsEveryReplica(demand: number, serving: number, capacity: number): boolean {
  return demand > (serving - 1) * capacity;
}

/** The replicas a scale-in removes: the newest first. */
export function scaleInVictims<R extends Pick<ReplicaRecord, 'createdAt'>>(serving: readonly R[], remove: number): R[] {
  return [...serving].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime()).slice(0, remove);
}

export class Scaling {
  private readonly lastScaleUp = new Map<string, number>();
  /** Per endpoint, the last pass whose demand needed every serving replica (scale-in waits a cooldown after it). */
  private readonly lastBusy = new Map<string, number>();

  constructor(
    private readonly options: {
      sql: Sql;
      runtime: Runtime;
      writes: EndpointWrites;
      starter: ReplicaStarter;
      stopper: ReplicaStopper;
      crashes: CrashWatch;
      /** How long a scaled-down replica may take to finish its requests. */
      drainTimeoutMs: number;
    },
  ) {}

  /** This process no longer holds the endpoint: its timers go (a process that takes it again counts it busy, as new). */
  forget(endpointId: string): void {
    this.lastScaleUp.delete(endpointId);
    this.lastBusy.delete(endpointId);
  }

  /**
   * The version a scale-out starts: the current one, unless its rollout failed (the endpoint serves on with the
   * version before it): then the newest version that serves, rather than a version known to fail, on every pass.
   */
  private async versionToAdd(endpoint: EndpointRecord, serving: readonly ReplicaRecord[]): Promise<VersionRecord | undefined> {
    if (endpoint.current.rolloutState !== 'FAILED') return endpoint.current;
    const newest = Math.max(...serving.map((r) => r.versionIndex));
    return Number.isFinite(newest) ? findVersion(this.options.sql, endpoint.id, newest) : undefined;
  }

  /**
   * Acts on the autoscaler's decision for the `serving` replicas, counting those `starting` as on their way (of which
   * those in `waitingForNode` wait for a machine: a Pod no node has taken yet). `waiting`: the requests the engines do
   * not see yet, those in every gateway process's admission queue (read with the pass's endpoint, see pass-reads.ts).
   * True when the endpoint is at rest: no demand, every engine answered its health check, the replicas and the counts
   * shown are as wanted (or those missing all started), nothing was done, and no scale-in or sleep waits for its
   * cooldown to pass.
   */
  async autoscale(
    endpoint: EndpointRecord,
    waiting: number,
    serving: readonly ReplicaRecord[],
    starting: readonly ReplicaRecord[],
    waitingForNode: readonly string[] = [],
  ): Promise<boolean> {
    const { runtime, writes, starter, stopper, crashes, drainTimeoutMs } = this.options;
    const id = endpoint.id;
    const spec = endpoint.current.spec;
    // The answers crash-watch had in this pass, else (a replica it did not check) asked now.
    const healths = await Promise.all(
      serving.map((r) => {
        const taken = crashes.takeHealth(id, r.id);
        return taken ? taken.health : runtime.health(refOf(r), 1500);
      }),
    );
    const load = healths.reduce((sum, h) => sum + (h ? h.active + h.queued : 0), 0);
    const now = Date.now();
    const capacity = replicaCapacity(spec.advanced.maxBatchSize, healths);
    // First seen by this process (a start, a takeover): counted as busy now, so that nothing scales in before a cooldown.
    if (!this.lastBusy.has(id) || needsEveryReplica(load + waiting, serving.length, capacity)) this.lastBusy.set(id, now);
    const decision = decideScale({
      minReplica: spec.autoscaling.minReplica,
      maxReplica: spec.autoscaling.maxReplica,
      cooldownMs: spec.autoscaling.cooldownPeriod * 1000,
      maxBatchSize: capacity,
      current: serving.length,
      load,
      waiting,
      lastActivityAt: lastActivityAt(endpoint, healths, serving),
      lastScaleUpAt: this.lastScaleUp.get(id) ?? 0,
      lastBusyAt: this.lastBusy.get(id)!,
      now,
    });
    if (decision.sleep) {
      await writes.transition(id, endpoint, { type: 'scaled-to-zero' }, { cause: 'controller:idle' });
      return false;
    }
    // A replica that still waits for a machine and is no longer wanted (the load passed, the policy was lowered) is
    // stopped now: it holds no machine yet, and would otherwise start only to be scaled in.
    const unplaced = starting.filter((r) => waitingForNode.includes(r.id));
    const stillWanted = Math.max(0, decision.replicas - serving.length - (starting.length - unplaced.length));
    const unwanted = scaleInVictims(unplaced, Math.max(0, unplaced.length - stillWanted));
    if (unwanted.length > 0) {
      await stopper.stopAll(unwanted, 0);
      starting = starting.filter((r) => !unwanted.includes(r));
    }
    // Nothing asked of this pass: no demand, every engine answered, nothing stopped above.
    const quiet = unwanted.length === 0 && load + waiting === 0 && healths.every((h) => h !== undefined);
    if (decision.replicas > serving.length) {
      // Replicas already starting count: each pass begins only those still missing.
      const missing = decision.replicas - serving.length - starting.length;
      // All those wanted are on their way: nothing to do until one of them changes (the runtime tells), or the demand.
      if (missing <= 0) return quiet;
      if (await crashes.backingOff(endpoint)) return false;
      const version = await this.versionToAdd(endpoint, serving);
      if (!version) return false;
      this.lastScaleUp.set(id, now);
      await writes.refreshCounts(id, decision.replicas, 'controller:scale-up');
      await starter.begin(endpoint, version, false, missing);
      return false;
    } else if (decision.replicas < serving.length) {
      // The counts drop as soon as the victims leave routing, not when their answers in flight have ended.
      await stopper.stopAll(scaleInVictims(serving, serving.length - decision.replicas), drainTimeoutMs, () =>
        writes.refreshCounts(id, decision.replicas, 'controller:scale-down'),
      );
      return false;
    }
    // Steady: the counts are rewritten (under the row lock) only when this pass saw them drift. Replicas a scale-out
    // began are still wanted while they start (the load that asked for them may have passed: scale-in comes later).
    const desired = Math.max(decision.replicas, serving.length + starting.length);
    if (!showsCounts(endpoint, countsOf(endpoint, serving, desired))) {
      await writes.refreshCounts(id, desired, 'controller:steady');
      return false;
    }
    // No decision waits on a timer: neither a scale-in nor a sleep after the cooldown (those passes come each interval).
    const settled = spec.autoscaling.minReplica > 0 && serving.length <= Math.max(spec.autoscaling.minReplica, 1);
    return settled && quiet && starting.length === 0;
  }
}
