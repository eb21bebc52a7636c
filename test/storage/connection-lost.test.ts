/**
 * postgres.js 3.4.9 threw from an immediate (an uncaught TypeError that ends the process) when a query was written to
 * a connection whose backend had gone: a database restart or failover during a transaction, or on a reserved
 * connection (porsager/postgres#1208). patches/postgres+3.4.9.patch (applied by `npm ci`) makes it a
 * CONNECTION_CLOSED rejection, which the gateway handles as an outage. Vitest fails a run on an uncaught exception.
 */
import { expect, test } from 'vitest';
import { isDatabaseUnavailable } from '../../src/storage/database-errors.js';
import { createTestDatabase } from '../support/database.js';

test('a query on a connection whose backend was terminated rejects, and the pool serves on', async () => {
  const db = await createTestDatabase();
  try {
    const reserved = await db.sql.reserve();
    const [row] = await reserved<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    const pid = row!.pid;
    await db.sql`SELECT pg_terminate_backend(${pid})`;
    // Written before or after postgres.js saw the close: ECONNRESET, or (patched) CONNECTION_CLOSED instead of a crash.
    // (A second query on the same reserved connection then waits forever in postgres.js; the gateway reserves none.)
    const first = await reserved`SELECT 1`.catch((e: unknown) => e);
    expect(isDatabaseUnavailable(first), String(first)).toBe(true);
    reserved.release();
    expect(await db.sql`SELECT 1 AS one`).toEqual([{ one: 1 }]);
  } finally {
    await db.close();
  }
});

test('a transaction whose backend is terminated while it waits: the callers get CONNECTION_CLOSED', async () => {
  const db = await createTestDatabase();
  try {
    const holder = await db.sql.reserve();
    await holder`SELECT pg_advisory_lock(4242)`;
    const tx = db.sql.begin(async (t) => {
      await t`SELECT pg_advisory_xact_lock(4242)`;
      await t`SELECT 1`;
    });
    const settled = tx.catch((e: unknown) => e);
    let waiting: number | undefined;
    while (waiting === undefined) {
      const rows = await db.sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%4242%'`;
      waiting = rows[0]?.pid;
    }
    await db.sql`SELECT pg_terminate_backend(${waiting})`;
    expect(isDatabaseUnavailable(await settled), String(await settled)).toBe(true);
    await holder`SELECT pg_advisory_unlock_all()`;
    holder.release();
    expect(await db.sql`SELECT 2 AS two`).toEqual([{ two: 2 }]);
  } finally {
    await db.close();
  }
});
