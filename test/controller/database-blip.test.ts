/**
 * The gateway's database connection dropped in the middle of a start (a database restart or failover; here
 * pg_terminate_backend on the controller's connection while it waits for the capacity lock): the endpoint is not
 * failed for it, and the next pass starts it.
 */
import { expect, test } from 'vitest';
import { startTestApp, statusTrail, TINY_REPO, waitFor, waitForStatus } from '../support/app.js';

test('a start cut by a dropped database connection is tried again, not recorded as the endpoint failing', async () => {
  const app = await startTestApp();
  const user = await app.seed.user();
  const project = await user.project();
  const { node } = app.app.runtime;
  // Held from a connection of the test's own: the controller's reservation waits on it.
  const held = await app.sql.reserve();
  try {
    await held`SELECT pg_advisory_lock(hashtext(${`capacity:${node}:H100`}))`;
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    const waiting = await waitFor('the controller to wait for the capacity lock', async () => {
      // Only this file's gateway: its own database (other files run beside it in the same server) and the app's connections.
      const rows = await app.sql<{ pid: number }[]>`
        SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'dedicated-endpoints' AND pid <> pg_backend_pid()
          AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'`;
      return rows.length === 1 ? rows[0]!.pid : undefined;
    });
    const [terminated] = await app.sql<{ ok: boolean }[]>`
      SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE pid = ${waiting} AND datname = current_database()`;
    expect(terminated?.ok).toBe(true);
    await held`SELECT pg_advisory_unlock_all()`;
    await waitForStatus(app.sql, id, 'RUNNING', 30_000).catch(async (e: unknown) => {
      throw new Error(`${String(e)}: ${(await statusTrail(app.sql, id)).join(' | ')}`);
    });
    expect(await statusTrail(app.sql, id)).not.toContain('FAILED');
  } finally {
    held.release();
  }
}, 90_000);
