/** SQL for the replicas one machine runs: what a stopping gateway leaves running, and what `npm run stop-engines` stops. */
import type { ReplicaState } from '../domain/replica.js';
import type { Queryable } from './database.js';
import { LIVE_STATES } from './replica-states-sql.js';

/** A live replica (STARTING, READY or DRAINING) on a node, with what it takes to reach and stop its engine. */
export interface NodeReplica {
  id: string;
  endpointId: string;
  state: ReplicaState;
  address: string | null;
  /** Where its runtime placed it (a local engine's process id: see pidOf in local-runtime.ts). */
  locator: string | null;
  token: string | null;
}

interface NodeReplicaRow {
  id: string;
  endpoint_id: string;
  state: ReplicaState;
  address: string | null;
  locator: string | null;
  engine_token: string | null;
}

export async function liveReplicasOnNode(db: Queryable, node: string): Promise<NodeReplica[]> {
  const rows = await db<NodeReplicaRow[]>`
    SELECT id, endpoint_id, state, address, locator, engine_token FROM replicas
    WHERE node = ${node} AND state IN ${db.unsafe(LIVE_STATES)} ORDER BY endpoint_id, created_at, id`;
  return rows.map((r) => ({
    id: r.id,
    endpointId: r.endpoint_id,
    state: r.state,
    address: r.address,
    locator: r.locator,
    token: r.engine_token,
  }));
}

/** Live replicas on other nodes: a gateway on this machine neither lists nor stops them. */
export async function liveReplicasElsewhere(db: Queryable, node: string): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM replicas WHERE node <> ${node} AND state IN ${db.unsafe(LIVE_STATES)}`;
  return row!.n;
}

/** Gateway processes holding an endpoint lease that has not expired: a running gateway would restart stopped engines. */
export async function activeLeaseHolders(db: Queryable): Promise<string[]> {
  const rows = await db<{ owner: string }[]>`SELECT DISTINCT owner FROM endpoint_leases WHERE expires_at > now() ORDER BY owner`;
  return rows.map((r) => r.owner);
}

/**
 * Marks a live replica as the stop proceeds: DRAINING (no new request is
 * routed to it), then STOPPED. A replica some other writer already moved
 * out of the live states (a controller stopped it, or found it dead) is left
 * as that writer put it.
 */
export async function markNodeReplica(db: Queryable, id: string, state: 'DRAINING' | 'STOPPED', lastError?: string): Promise<void> {
  await db`
    UPDATE replicas SET
      state = ${state},
      last_error = coalesce(${lastError ?? null}, last_error),
      stopped_at = CASE WHEN ${state} = 'STOPPED' THEN now() ELSE stopped_at END
    WHERE id = ${id} AND state IN ${db.unsafe(LIVE_STATES)}`;
}
