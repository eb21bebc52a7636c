/**
 * What one reconcile pass reads of an endpoint, in one statement: the
 * endpoint with its current version, its live replicas, and the requests
 * waiting for it in every gateway process's admission queue (the demand the
 * autoscaler adds to the engines' load). One round trip per pass, not three.
 */
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { Queryable } from './database.js';
import { CURRENT_VERSION_JOIN, ENDPOINT_COLUMNS, toEndpoint, type EndpointRow } from './endpoint-rows.js';
import { REPLICA_COLUMNS, toReplica, type ReplicaRow } from './replicas-repository.js';

export interface PassState {
  /** Deleted ones too: the controller stops their replicas. */
  endpoint: EndpointRecord;
  /** STARTING, READY and DRAINING, the oldest first. */
  replicas: ReplicaRecord[];
  /** Requests queued for it over every gateway process that published within the stale window. */
  queued: number;
}

/** The replica's columns under an `r_` prefix, beside the endpoint's. */
const PREFIXED_REPLICA_COLUMNS = REPLICA_COLUMNS.split(',')
  .map((column) => `r.${column.trim()} AS r_${column.trim()}`)
  .join(', ');

type PrefixedReplicaRow = { [K in keyof ReplicaRow as `r_${K}`]: ReplicaRow[K] | null };

/** The replica of a joined row, from its `r_` columns (none of the endpoint's columns begins so). */
function replicaOf(row: object): ReplicaRecord {
  const columns = Object.entries(row).filter(([key]) => key.startsWith('r_'));
  return toReplica(Object.fromEntries(columns.map(([key, value]) => [key.slice(2), value])) as unknown as ReplicaRow);
}

/** The endpoint's pass state, or undefined when it does not exist. `staleMs`: queue counts older than this are a dead process's. */
export async function readPassState(db: Queryable, endpointId: string, staleMs: number): Promise<PassState | undefined> {
  const rows = await db<(EndpointRow & PrefixedReplicaRow & { queued_demand: number })[]>`
    SELECT ${db.unsafe(ENDPOINT_COLUMNS)}, ${db.unsafe(PREFIXED_REPLICA_COLUMNS)},
      (SELECT coalesce(sum(q.queued), 0)::int FROM gateway_queue_depth q
        WHERE q.endpoint_id = e.id AND q.updated_at > now() - ${staleMs} * interval '1 millisecond') AS queued_demand
    FROM endpoints e ${db.unsafe(CURRENT_VERSION_JOIN)}
    LEFT JOIN replicas r ON r.endpoint_id = e.id AND r.state IN ('STARTING', 'READY', 'DRAINING')
    WHERE e.id = ${endpointId}
    ORDER BY r.created_at, r.id`;
  const first = rows[0];
  if (!first) return undefined;
  return {
    endpoint: toEndpoint(first),
    replicas: rows.filter((row) => row.r_id !== null).map(replicaOf),
    queued: first.queued_demand,
  };
}
