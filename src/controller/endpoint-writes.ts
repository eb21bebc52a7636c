/**
 * The controller's writes to an endpoint. Each re-reads the endpoint under
 * its row lock and checks that the step still applies (this process holds
 * the endpoint's lease, and the lifecycle's `requires` still holds), so a
 * step acting on a stale snapshot becomes a no-op: it throws `StaleError`,
 * and the reconcile pass is abandoned quietly.
 *
 * Statuses are written only as `controllerTransition` (src/domain/lifecycle.ts)
 * answers for a controller event.
 */
import type { EndpointRecord, RolloutState } from '../domain/endpoint.js';
import { newId } from '../domain/ids.js';
import type { InstanceOption } from '../domain/instance-catalog.js';
import { controllerTransition, type ControllerEvent, type LifecycleState } from '../domain/lifecycle.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Queryable, Sql } from '../storage/database.js';
import { writeTransition } from '../storage/endpoint-transitions.js';
import { findEndpoints, mergeDesired, refreshReplicaCounts, type DesiredCount } from '../storage/endpoints-repository.js';
import { claimReplicas, insertReplicas, lockAndReadLeasedEndpoint, lockLeasedEndpoint } from '../storage/replicas-repository.js';
import { setVersionRollout } from '../storage/versions-repository.js';

/** Thrown inside a step when the endpoint changed under it; the step is abandoned quietly. */
export class StaleError extends Error {}

/** A controller write found stale changes nothing: undefined instead. */
export function ignoreStale(error: unknown): undefined {
  if (!(error instanceof StaleError)) throw error;
  return undefined;
}

/** The controller also sees deleted endpoints: it stops their replicas. */
export const WITH_DELETED = { includeDeleted: true } as const;

/** An endpoint's refresh of its counts running in this process, and the one asked for meanwhile. */
interface Refreshing {
  done: Promise<void>;
  next?: { args: { desiredReplicas: DesiredCount; cause: string }; done: Promise<void> };
}

export class EndpointWrites {
  private readonly refreshing = new Map<string, Refreshing>();

  constructor(
    private readonly sql: Sql,
    /** The lease holder that this process is. */
    private readonly owner: string,
    /** Refreshes an endpoint's counts as refreshReplicaCounts does (the controller's coalesces them: StatementBatches). */
    private readonly refresh: (id: string, desired: DesiredCount, cause: string) => Promise<boolean> = (id, desired, cause) =>
      refreshReplicaCounts(sql, id, desired, cause),
  ) {}

  /** Marks a version's rollout (setVersionRollout) while this process holds the endpoint's lease; StaleError otherwise. */
  async setRollout(id: string, versionIndex: number, change: { rolloutState: RolloutState; model?: unknown }): Promise<void> {
    if (!(await setVersionRollout(this.sql, this.owner, id, versionIndex, change))) {
      throw new StaleError(`the rollout of ${id}'s version ${versionIndex} was not marked: its lease is lost, or it is gone`);
    }
  }

  /**
   * Runs `write` on the freshly locked endpoint when this process still holds
   * its lease and `applies` still holds; otherwise the step is stale.
   */
  async guarded<T>(id: string, applies: (e: EndpointRecord) => boolean, write: (tx: Sql, e: EndpointRecord) => Promise<T>): Promise<T> {
    return this.sql.begin(async (tx) => {
      const endpoint = await this.lockLeased(tx, id);
      if (!endpoint || !applies(endpoint)) throw new StaleError(`${id} changed`);
      return write(tx as unknown as Sql, endpoint);
    }) as Promise<T>;
  }

  /**
   * Asks the runtime for room for `count` replicas of `option` (of version `versionIndex`) and writes the rows of those
   * admitted, STARTING, while this process holds the endpoint's lease and the endpoint wants to run; otherwise the step
   * is stale. A runtime that counts its room in the database (`admit`: a machine's slots, under its lock) is asked in
   * the transaction that writes the rows, so that the next admission counts them; one without admits every replica,
   * and their rows are written in one statement. `refusal`: why fewer were admitted than asked.
   */
  async admitReplicas(
    id: string,
    runtime: Pick<Runtime, 'name' | 'node' | 'admit'>,
    option: InstanceOption,
    versionIndex: number,
    count: number,
  ): Promise<{ begun: string[]; refusal?: string | undefined }> {
    if (count <= 0) return { begun: [] };
    const row = { endpointId: id, versionIndex, runtime: runtime.name, gpuType: option.gpuType, numGpu: option.numGpu };
    const newIds = (n: number) => Array.from({ length: n }, () => newId('rep'));
    const { admit } = runtime;
    if (!admit) {
      const begun = newIds(count);
      if ((await claimReplicas(this.sql, this.owner, { node: runtime.node, ...row }, begun)).length === 0)
        throw new StaleError(`${id} changed, or its lease is lost`);
      return { begun };
    }
    return this.guarded(
      id,
      (e) => e.desiredState === 'RUNNING',
      async (tx) => {
        const { admitted, node, reason } = await admit.call(runtime, tx, option, count);
        const begun = newIds(admitted);
        await insertReplicas(
          tx,
          begun.map((replicaId) => ({ id: replicaId, node, ...row })),
        );
        return { begun, refusal: reason };
      },
    );
  }

  /**
   * Locks the endpoint under this process's lease and reads it, most often in one statement; when that finds nothing
   * (the lease lost, or the row changed while the lock was awaited: its re-check cannot see a version written since
   * the statement began), the lock alone, then a fresh read. Throws StaleError when the lease is lost.
   */
  private async lockLeased(tx: Queryable, id: string): Promise<EndpointRecord | undefined> {
    const endpoint = await lockAndReadLeasedEndpoint(tx, id, this.owner);
    if (endpoint) return endpoint;
    if (!(await lockLeasedEndpoint(tx, id, this.owner))) throw new StaleError(`lease on ${id} lost, or ${id} gone`);
    return (await findEndpoints(tx, [id], WITH_DELETED))[0];
  }

  /**
   * Asks the lifecycle what `event` changes for an endpoint last seen as
   * `current`, and writes it (one statement: src/storage/endpoint-transitions.ts). Returns the state written, or null
   * when the event changes nothing; throws StaleError when the endpoint, as locked, no longer allows it (or the lease
   * is lost).
   */
  async transition(
    id: string,
    current: LifecycleState,
    event: ControllerEvent,
    log: {
      cause: string;
      detail?: Record<string, unknown>;
      errorMessage?: string;
      /** Written only while this is still the endpoint's newest version (a rollout's end: an update since starts another). */
      ofVersion?: number;
      /**
       * The replica counts, wanting this many, are written with the status, in its statement, their event before its
       * event: whoever sees the status sees the replicas it describes.
       */
      desiredReplicas?: number;
    },
  ): Promise<LifecycleState | null> {
    const next = controllerTransition(event, current);
    if (!next) return null;
    const { status, phase, errorCode, requires } = next;
    const written = await writeTransition(this.sql, {
      id,
      owner: this.owner,
      requires: { ...requires, ...(log.ofVersion !== undefined ? { currentVersion: log.ofVersion } : {}) },
      status,
      phase,
      errorCode,
      desiredState: next.desiredState ?? requires.desiredState,
      errorMessage: log.errorMessage ?? null,
      ...(log.desiredReplicas !== undefined ? { desiredReplicas: log.desiredReplicas } : {}),
      cause: log.cause,
      ...(log.detail ? { detail: log.detail } : {}),
    });
    if (!written) throw new StaleError(`${id} changed, or its lease was lost`);
    return { status, phase, errorCode };
  }

  /** Records why the endpoint waits for a machine, while its phase says it does (a newer phase clears it). */
  async setWaitReason(id: string, reason: string): Promise<void> {
    await this.guarded(
      id,
      (e) => e.phase === 'REQUESTING_VIRTUAL_MACHINE',
      async (tx, e) => {
        if (e.waitReason !== reason) await tx`UPDATE endpoints SET wait_reason = ${reason} WHERE id = ${id}`;
      },
    ).catch((error: unknown) => {
      if (!(error instanceof StaleError)) throw error;
    });
  }

  /**
   * Recomputes the replica counts from the replicas table. Asked again for an endpoint while its refresh runs (its
   * replicas became ready together), the asks that came meanwhile share one more refresh, which begins after the
   * running one: their desired counts merged (mergeDesired), with the cause of the ask whose count is written. Each
   * caller's counts are refreshed after it asked.
   */
  async refreshCounts(id: string, desiredReplicas: DesiredCount, cause: string): Promise<void> {
    const running = this.refreshing.get(id);
    if (!running) return this.runRefresh(id, { desiredReplicas, cause });
    // It runs after the one running, whether that one succeeded or not.
    const pending = running.next?.args;
    running.next ??= {
      args: { desiredReplicas, cause },
      done: running.done.catch(() => undefined).then(() => this.runRefresh(id, running.next!.args)),
    };
    if (pending) {
      const merged = mergeDesired(pending.desiredReplicas, desiredReplicas);
      // The event names the ask whose count is written: a scale-out's 3 merged with a later floor is the scale-out's.
      const kept = typeof pending.desiredReplicas === 'number' && merged === pending.desiredReplicas;
      running.next.args = { desiredReplicas: merged, cause: kept ? pending.cause : cause };
    }
    return running.next.done;
  }

  /** Runs one refresh as the endpoint's running one; it is forgotten when it ends, unless another was asked meanwhile. */
  private async runRefresh(id: string, args: { desiredReplicas: DesiredCount; cause: string }): Promise<void> {
    const entry: Refreshing = { done: this.refreshOnce(id, args.desiredReplicas, args.cause) };
    this.refreshing.set(id, entry);
    await entry.done.finally(() => {
      if (this.refreshing.get(id) === entry && !entry.next) this.refreshing.delete(id);
    });
  }

  private async refreshOnce(id: string, desiredReplicas: DesiredCount, cause: string): Promise<void> {
    // One statement (shared with other endpoints' refreshes): most often the counts are as shown already, and it writes nothing.
    await this.refresh(id, desiredReplicas, cause);
  }
}
