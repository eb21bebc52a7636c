/**
 * Rolling out a new version: the serving replicas are replaced one by one
 * with replicas of the newest version; a new one starts and warms up before
 * an old one drains (each pass takes the step that what it observes calls
 * for: no pass waits for a replica to start). A version that changes nothing a replica runs (only the
 * name, the autoscaling policy or content logging) takes the serving replicas
 * as they are, without restarting them. If a new replica fails, the old ones keep serving, the
 * version is marked FAILED and the endpoint returns to RUNNING with the
 * failure's code.
 */
import type { EndpointRecord, VersionRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { Sql } from '../storage/database.js';
import { KEEP_DESIRED } from '../storage/endpoints-repository.js';
import { findVersion } from '../storage/versions-repository.js';
import { retagReplica } from '../storage/replicas-repository.js';
import { servesAlike } from '../domain/endpoint-spec.js';
import type { EndpointWrites } from './endpoint-writes.js';
import type { ReplicaStarter } from './replica-starter.js';
import type { ReplicaStopper } from './replica-stopper.js';
import { failureMessage, startErrorCode, startErrorMessage } from './start-errors.js';

/** The serving replicas that run another version than `target`. */
export function outdatedReplicas(serving: readonly ReplicaRecord[], target: VersionRecord): ReplicaRecord[] {
  return serving.filter((r) => r.versionIndex !== target.versionIndex);
}

/** Whether serving replicas run an older version that should be replaced (not once the target's rollout failed). */
export function needsRollout(serving: readonly ReplicaRecord[], target: VersionRecord): boolean {
  return outdatedReplicas(serving, target).length > 0 && target.rolloutState !== 'FAILED';
}

/**
 * What to do with the next old replica, while `serving` replicas serve:
 * 'retire' it alone when more serve than wanted (a process that died had
 * started its replacement but not retired it), else 'replace' it.
 */
export function rolloutStep(serving: number, desiredReplicas: number): 'retire' | 'replace' {
  return serving > Math.max(desiredReplicas, 1) ? 'retire' : 'replace';
}

export class Rollout {
  constructor(
    private readonly sql: Sql,
    private readonly writes: EndpointWrites,
    private readonly starter: ReplicaStarter,
    private readonly stopper: ReplicaStopper,
    /** How long a replaced replica may take to finish its requests. */
    private readonly drainTimeoutMs: number,
    /** Asks for the endpoint's next pass now (a step done, the next one due). */
    private readonly poke: (endpointId: string) => void,
  ) {}

  /**
   * One step of the rollout per pass, from what is observed: replicas of a version that serves alike are taken as
   * they are; while a new replica starts, the pass waits; once it serves (one more than wanted), an old one is
   * retired; else a new one begins. Without room for one more, an old replica is retired first: when the runtime
   * admits none now (a machine's slots), the new one begins in its place; when the new one's placement waits for a
   * machine (`waitingForNode`: a full cluster), it takes the room the old one leaves.
   */
  async step(
    endpoint: EndpointRecord,
    serving: readonly ReplicaRecord[],
    starting: readonly ReplicaRecord[],
    waitingForNode: readonly string[],
  ): Promise<void> {
    const id = endpoint.id;
    const target = endpoint.current;
    await this.writes.transition(id, endpoint, { type: 'rollout-started' }, { cause: 'controller:rollout' });
    const outdated: ReplicaRecord[] = [];
    const versions = new Map<number, Promise<VersionRecord | undefined>>();
    for (const old of outdatedReplicas(serving, target)) {
      // A version that changes only what the gateway reads (name, scaling, content logging) takes the replica as it is.
      if (!versions.has(old.versionIndex)) versions.set(old.versionIndex, findVersion(this.sql, id, old.versionIndex));
      const from = await versions.get(old.versionIndex);
      if (from && servesAlike(from.spec, target.spec) && (await retagReplica(this.sql, old.id, old.versionIndex, target.versionIndex))) {
        await this.writes.setRollout(id, target.versionIndex, { rolloutState: 'ROLLED_OUT', model: target.model ?? from.model });
        await this.writes.refreshCounts(id, KEEP_DESIRED, 'controller:rollout');
      } else outdated.push(old);
    }
    const [old] = outdated;
    if (!old) {
      await this.writes.transition(
        id,
        endpoint,
        { type: 'rollout-finished' },
        { cause: 'controller:rolled-out', ofVersion: target.versionIndex },
      );
      return;
    }
    const replacement = starting.find((r) => r.versionIndex === target.versionIndex);
    if (replacement) {
      // On its way; when no machine can take it, an old replica makes room (one: then fewer serve than wanted).
      if (waitingForNode.includes(replacement.id) && serving.length >= Math.max(endpoint.desiredReplicaCnt, 1)) {
        await this.retire(endpoint, old);
      }
      return;
    }
    if (rolloutStep(serving.length, endpoint.desiredReplicaCnt) === 'retire') {
      await this.retire(endpoint, old);
      return this.poke(id);
    }
    // The last placement met an outage: no start now, and no old replica retired for one (it would find none).
    if (this.starter.placementsWait(id)) return;
    // No room for one more: retire an old replica first, then start in its place.
    if (!(await this.starter.begin(endpoint, target, false))) {
      await this.retire(endpoint, old);
      await this.starter.begin(endpoint, target, false);
    }
  }

  private async retire(endpoint: EndpointRecord, old: ReplicaRecord): Promise<void> {
    await this.stopper.stop(old, this.drainTimeoutMs);
    await this.writes.refreshCounts(endpoint.id, KEEP_DESIRED, 'controller:rollout');
  }

  /** A replica of the version being rolled out failed to start: the version is marked FAILED, the old ones serve on. */
  async fail(endpoint: EndpointRecord, error: unknown): Promise<void> {
    const id = endpoint.id;
    const target = endpoint.current;
    const errorCode = startErrorCode(error);
    await this.writes.setRollout(id, target.versionIndex, { rolloutState: 'FAILED' });
    await this.writes.refreshCounts(id, KEEP_DESIRED, 'controller:rollout-failed');
    await this.writes.transition(
      id,
      endpoint,
      { type: 'rollout-failed', errorCode },
      {
        cause: 'controller:rollout-failed',
        detail: { message: startErrorMessage(error), versionIndex: target.versionIndex },
        errorMessage: failureMessage(error, 'rollout'),
        ofVersion: target.versionIndex,
      },
    );
  }
}
