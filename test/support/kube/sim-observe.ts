/**
 * What the Kubernetes simulation through the controller (test/runtime/kubernetes-sim-controller.test.ts) reads to
 * tell what the controller did, without asking it: the replica rows in PostgreSQL, the pods in the stand-in, and the
 * stand-in's request counts.
 */
import type { Sql } from '../../../src/storage/database.js';
import type { KubeStandInProcess } from './process.js';

/** API calls other than the informers' watches (which stay open, one each). */
export const apiCalls = (counts: Record<string, number>) =>
  Object.entries(counts)
    .filter(([key]) => !key.startsWith('WATCH'))
    .reduce((sum, [, n]) => sum + n, 0);

/** Reads of a collection (a list): a GET whose path ends with the resource's plural name. */
export const lists = (counts: Record<string, number>) => Object.keys(counts).filter((key) => /^GET \S*\/(pods|secrets|nodes)$/.test(key));

export interface ReplicaRow {
  id: string;
  endpoint_id: string;
  state: string;
  address: string | null;
}

const LIVE = ['STARTING', 'READY', 'DRAINING'];

/** Every replica row, live or not, oldest first. */
export const allReplicas = (sql: Sql) => sql<ReplicaRow[]>`SELECT id, endpoint_id, state, address FROM replicas ORDER BY created_at, id`;

/**
 * The replica rows no longer live, as `STATE: last error`, one entry a row.
 */
export async function endedReplicas(sql: Sql): Promise<string[]> {
  const rows = await sql<{ state: string; last_error: string | null; n: number }[]>`
    SELECT state, last_error, count(*)::int AS n FROM replicas
    WHERE state <> ALL(${LIVE}) GROUP BY 1, 2 ORDER BY 1, 2`;
  return rows.flatMap((r) => Array<string>(r.n).fill(`${r.state}: ${r.last_error}`));
}

/** The READY replicas, once every endpoint is RUNNING with exactly the replicas it wants READY and nothing else live. */
export async function convergedReplicas(sql: Sql, wanted: ReadonlyMap<string, number>): Promise<ReplicaRow[] | undefined> {
  // Counted first (the probe runs every 200 ms, beside the gateway it measures): the rows are read once they add up.
  const [counts] = await sql<{ other: number; moving: number; ready: number }[]>`
    SELECT (SELECT count(*) FROM endpoints WHERE status <> 'RUNNING')::int AS other,
      count(*) FILTER (WHERE state IN ('STARTING', 'DRAINING'))::int AS moving, count(*) FILTER (WHERE state = 'READY')::int AS ready
    FROM replicas`;
  const total = [...wanted.values()].reduce((a, b) => a + b, 0);
  if (counts!.other > 0 || counts!.moving > 0 || counts!.ready !== total) return undefined;
  const statuses = await sql<{ status: string }[]>`SELECT status FROM endpoints`;
  if (statuses.some((e) => e.status !== 'RUNNING')) return undefined;
  const rows = (await allReplicas(sql)).filter((r) => LIVE.includes(r.state));
  if (rows.some((r) => r.state !== 'READY')) return undefined;
  const ready = new Map<string, number>();
  for (const r of rows) ready.set(r.endpoint_id, (ready.get(r.endpoint_id) ?? 0) + 1);
  return [...wanted].every(([id, n]) => ready.get(id) === n) ? rows : undefined;
}

/** The stand-in's live pods (not being deleted) in `namespace`: replica (our label) → the IPs of its pods. */
export async function livePods(kube: Pick<KubeStandInProcess, 'pods'>, namespace: string): Promise<Map<string, string[]>> {
  const pods = new Map<string, string[]>();
  for (const pod of await kube.pods(namespace)) {
    const meta = pod.metadata as { labels?: Record<string, string>; deletionTimestamp?: string };
    if (meta.deletionTimestamp) continue;
    const replica = meta.labels?.['dedicated-endpoints.io/replica'] ?? '?';
    pods.set(replica, [...(pods.get(replica) ?? []), (pod.status as { podIP?: string } | undefined)?.podIP ?? '']);
  }
  return pods;
}
