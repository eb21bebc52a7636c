/**
 * Stopping replicas: one drains its requests in flight first (no new request
 * is routed to a DRAINING replica), then its engine is stopped; and the
 * engines on this node that no live replica owns are reaped.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ReplicaRecord } from '../domain/replica.js';
import type { ReplicaRef, Runtime } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import { liveReplicaIdsOnNode } from '../storage/replicas-repository.js';
import type { StatementBatches } from '../storage/statement-batches.js';

/** How the runtime finds the replica a row records. */
export const refOf = (r: ReplicaRecord): ReplicaRef => ({
  replicaId: r.id,
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
  ) {}

  /**
   * Stops `replicas` together: the READY ones are all marked DRAINING first, then `draining` runs (the caller
   * shows the counts without them), then each finishes its answers in flight and is stopped.
   */
  async stopAll(replicas: readonly ReplicaRecord[], drainMs: number, draining?: () => Promise<void>): Promise<void> {
    const drained = new Set(drainMs > 0 ? replicas.filter((r) => r.state === 'READY').map((r) => r.id) : []);
    await Promise.all([...drained].map((id) => this.batches.markReplica(id, { state: 'DRAINING' })));
    await draining?.();
    await Promise.all(replicas.map((r) => this.finish(r, drained.has(r.id) ? drainMs : 0)));
  }

  /** Drains (no new requests are routed to a DRAINING replica; in-flight ones finish), then stops. */
  async stop(replica: ReplicaRecord, drainMs: number): Promise<void> {
    await this.stopAll([replica], drainMs);
  }

  private async finish(replica: ReplicaRecord, drainMs: number): Promise<void> {
    const handle = refOf(replica);
    const deadline = Date.now() + drainMs;
    while (Date.now() < deadline && this.runtime.liveness(handle).kind === 'alive') {
      const health = await this.runtime.health(handle, 1000);
      if (!health || health.active + health.queued === 0) break;
      await sleep(100);
    }
    await this.runtime.stop(handle, this.stopGraceMs);
    await this.batches.markReplica(replica.id, { state: 'STOPPED' });
  }

  /** Stops the replicas of the runtime's pool that no live replica row owns (the runtime finds them by its own records). */
  async reapOrphans(): Promise<void> {
    const keep = new Set(await liveReplicaIdsOnNode(this.sql, this.runtime.node));
    const reaped = await this.runtime.reapOrphans(keep);
    if (reaped.length > 0) this.log(`stopped ${reaped.length} orphaned replica(s): ${reaped.join(', ')}`);
  }
}
