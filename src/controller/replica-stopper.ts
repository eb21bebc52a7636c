/**
 * Stopping replicas: one drains its requests in flight first (no new request
 * is routed to a DRAINING replica), then its engine is stopped; and the
 * engines on this node that no live replica owns are reaped.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS } from '../defaults.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { ReplicaRef, Runtime } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import { liveReplicaIdsOnNode } from '../storage/replicas-repository.js';
import type { StatementBatches } from '../storage/statement-batches.js';

/** How the runtime finds the replica a row records. */
export const refOf = (r: ReplicaRecord): ReplicaRef => ({
  replicaId: r.id,
  endpointId: r.endpointId,
  address: r.address,
  locator: r.locator,
  node: r.node,
  ...(r.token ? { token: r.token } : {}),
});

export class ReplicaStopper {
  constructor(
    private readonly sql: Sql,
    /** The replicas' moves go through it (with the other moves of the same turn). */
    private readonly batches: StatementBatches,
    private readonly runtime: Runtime,
    /** SIGTERM to SIGKILL. */
    private readonly stopGraceMs: number,
    private readonly log: (message: string, error?: unknown) => void,
    /** A draining engine silent this long (no health check answered) is stopped; shorter silences are waited out. */
    private readonly silenceMs: number = DEFAULTS.drainSilenceMs,
  ) {}

  /**
   * Stops `replicas` together: the READY ones are all marked DRAINING first, then `draining` runs (the caller
   * shows the counts without them), then each (those already DRAINING too) finishes its answers in flight and is
   * stopped.
   */
  async stopAll(replicas: readonly ReplicaRecord[], drainMs: number, draining?: () => Promise<void>): Promise<void> {
    // A DRAINING one (its drain begun by a gateway that stopped) is drained again from here.
    const drained = new Set(drainMs > 0 ? replicas.filter((r) => r.state === 'READY' || r.state === 'DRAINING').map((r) => r.id) : []);
    await Promise.all(
      replicas.filter((r) => r.state === 'READY' && drained.has(r.id)).map((r) => this.batches.markReplica(r.id, { state: 'DRAINING' })),
    );
    await draining?.();
    await Promise.all(replicas.map((r) => this.finish(r, drained.has(r.id) ? drainMs : 0)));
  }

  /** Drains (no new requests are routed to a DRAINING replica; in-flight ones finish), then stops. */
  async stop(replica: ReplicaRecord, drainMs: number): Promise<void> {
    await this.stopAll([replica], drainMs);
  }

  private async finish(replica: ReplicaRecord, drainMs: number): Promise<void> {
    const handle = refOf(replica);
    const cut = drainMs > 0 ? await this.drain(handle, drainMs) : undefined;
    if (cut) this.log(`replica ${replica.id} ${cut}: stopping it`);
    await this.runtime.stop(handle, this.stopGraceMs);
    await this.batches.markReplica(replica.id, { state: 'STOPPED' });
  }

  /**
   * Waits until the engine reports no request in flight or queued, or its process is gone (or this runtime cannot
   * tell): undefined. A health check it does not answer (a busy machine, a paused process) does not end the wait;
   * `drainMs` passing, or `silenceMs` without an answer (a hung engine serves nothing), does: then why.
   */
  private async drain(handle: ReplicaRef, drainMs: number): Promise<string | undefined> {
    const started = performance.now();
    let answered = started;
    let busy: number | undefined;
    while (this.runtime.liveness(handle).kind === 'alive') {
      const now = performance.now();
      if (now - started >= drainMs) {
        const last = busy === undefined ? 'answered no health check' : `last reported ${busy} request(s) in flight or queued`;
        return `${last} at the end of its drain (${drainMs} ms)`;
      }
      if (now - answered >= this.silenceMs) return `answered no health check for ${this.silenceMs} ms while it drained`;
      const health = await this.runtime.health(handle, Math.max(1, Math.min(1000, started + drainMs - now)));
      if (health) {
        answered = performance.now();
        busy = health.active + health.queued;
        if (busy === 0) return undefined;
      }
      await sleep(100);
    }
    return undefined;
  }

  /** Stops the replicas of the runtime's pool that no live replica row owns (the runtime finds them by its own records). */
  async reapOrphans(): Promise<void> {
    const reaped = await this.runtime.reapOrphans(async () => new Set(await liveReplicaIdsOnNode(this.sql, this.runtime.node)));
    if (reaped.length > 0) this.log(`stopped ${reaped.length} orphaned replica(s): ${reaped.join(', ')}`);
  }
}
