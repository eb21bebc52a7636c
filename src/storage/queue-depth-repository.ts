/**
 * SQL for the requests waiting in gateway processes' admission queues: each
 * process publishes its own count per endpoint; the controller reads the
 * fresh total as demand with each pass (pass-reads.ts; see
 * db/20261123020000_gateway_queue_depth.sql).
 */
import type { Queryable } from './database.js';

/** Writes this process's queued counts; rows older than `staleMs` (of dead processes) are deleted on the way. */
export async function publishQueueDepths(
  db: Queryable,
  processId: string,
  depths: ReadonlyMap<string, number>,
  staleMs: number,
): Promise<void> {
  if (depths.size === 0) return;
  const endpointIds = [...depths.keys()];
  const counts = endpointIds.map((id) => depths.get(id)!);
  await db`
    INSERT INTO gateway_queue_depth (process_id, endpoint_id, queued, updated_at)
    SELECT ${processId}, d.endpoint_id, d.queued, now()
    FROM unnest(${endpointIds}::text[], ${counts}::int[]) AS d(endpoint_id, queued)
    JOIN endpoints e ON e.id = d.endpoint_id
    ON CONFLICT (endpoint_id, process_id) DO UPDATE SET queued = excluded.queued, updated_at = excluded.updated_at`;
  await db`DELETE FROM gateway_queue_depth WHERE updated_at < now() - ${staleMs} * interval '1 millisecond'`;
}

/** Removes a process's rows (it stops serving). */
export async function forgetQueueDepths(db: Queryable, processId: string): Promise<void> {
  await db`DELETE FROM gateway_queue_depth WHERE process_id = ${processId}`;
}

/** A process publishes a changed count at most this often. */
export const QUEUE_DEPTH_PUBLISH_MS = 250;
/** A count that is not zero is published again this often, so that it stays fresh. */
export const QUEUE_DEPTH_REFRESH_MS = 1000;
/** Rows older than this are a dead process's: ignored, then deleted. */
export const QUEUE_DEPTH_STALE_MS = 3000;
