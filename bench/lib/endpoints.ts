/** Creating a running endpoint through the REST API, finding its replicas, and tearing it down. */
import { readFileSync } from 'node:fs';
import type { Sql } from '../../src/storage/database.js';
import { api, killGroup, waitFor } from './env.js';
import { pidOf } from '../../src/runtime/local-processes.js';

export const H100_X1 = 'TwD5AqnBSVN0';

export async function createEndpoint(baseUrl: string, body: Record<string, unknown>): Promise<string> {
  const created = await api<{ endpointId?: string }>(baseUrl, 'POST', '/dedicated/beta/endpoint', body);
  if (created.status !== 200 || !created.body.endpointId)
    throw new Error(`creating the endpoint failed (${created.status}): ${JSON.stringify(created.body)}`);
  return created.body.endpointId;
}

/** Polls the REST status until `status`; a FAILED endpoint throws with its error code. */
export async function waitForStatus(
  baseUrl: string,
  id: string,
  status: string,
  timeoutMs: number,
): Promise<{ status: string; phase: string | null; errorCode: string | null }> {
  return waitFor(
    `${id} to be ${status}`,
    async () => {
      const { body } = await api<{ status: string; phase: string | null; errorCode: string | null }>(
        baseUrl,
        'GET',
        `/dedicated/beta/endpoint/${id}/status`,
      );
      if (body.status === 'FAILED' && status !== 'FAILED') throw new Error(`endpoint ${id} FAILED (${body.errorCode})`);
      return body.status === status ? body : undefined;
    },
    timeoutMs,
    50,
  );
}

export interface LiveReplica {
  id: string;
  address: string;
  pid: number;
  state: string;
  /** The engine's token: direct calls to the replica carry it. */
  token: string | null;
}

export async function liveReplicas(sql: Sql, endpointId: string): Promise<LiveReplica[]> {
  // The local runtime's locator is the engine's pid.
  const rows = await sql<(Omit<LiveReplica, 'pid'> & { locator: string | null })[]>`
    SELECT id, address, locator, state, engine_token AS token FROM replicas
    WHERE endpoint_id = ${endpointId} AND state IN ('STARTING', 'READY', 'DRAINING') ORDER BY created_at`;
  return rows.map(({ locator, ...row }) => ({ ...row, pid: pidOf({ locator }) ?? 0 }));
}

/** Deletes the endpoint (the controller stops its replicas); any engine still alive after that is stopped here. */
export async function deleteEndpoint(baseUrl: string, sql: Sql, endpointId: string): Promise<void> {
  const rows = await sql<{ locator: string | null }[]>`SELECT locator FROM replicas WHERE endpoint_id = ${endpointId}`;
  const pids = rows.map((row) => pidOf(row)).filter((pid): pid is number => pid !== null);
  await api(baseUrl, 'DELETE', `/dedicated/beta/endpoint/${endpointId}`).catch(() => undefined);
  await waitFor('replicas to stop', async () => (await liveReplicas(sql, endpointId).catch(() => [])).length === 0, 15_000).catch(
    () => undefined,
  );
  // Only processes that are still our engines (a pid may have been reused since).
  await Promise.all(pids.filter((pid) => commandLine(pid).includes('engine')).map((pid) => killGroup(pid, 2000)));
}

export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}
