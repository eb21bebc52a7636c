/**
 * A session the server ends mid-statement (pg_terminate_backend: an operator, a failover, a restart) fails that
 * statement, and only that one: the pool's next statement, on a new session, succeeds. postgres.js 3.4.9 kept the
 * ended session's error and rejected the next statement of the connection with it (patches/postgres+3.4.9.patch).
 * A real PostgreSQL.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { connectDatabase, type Sql } from '../../src/storage/database.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let pool: Sql;

beforeAll(async () => {
  db = await createTestDatabase();
  // One connection: the next statement runs on the connection whose session ended.
  pool = connectDatabase(db.dbUrl, { max: 1 });
});

afterAll(async () => {
  await pool?.end({ timeout: 5 });
  await db?.close();
});

test("the statement after a terminated session runs on a new one, without the old session's error", async () => {
  const [first] = await pool<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
  const pid = first!.pid;
  const long = pool`SELECT pg_sleep(30)`.then(
    () => 'finished',
    (error: { code?: string }) => error.code,
  );
  await expect
    .poll(async () => (await db.sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid} AND query LIKE '%pg_sleep%'`).length)
    .toBe(1);
  await db.sql`SELECT pg_terminate_backend(${pid})`;
  // The statement in flight fails (the server's 57P01, or the connection closed under it).
  expect(['57P01', 'CONNECTION_CLOSED']).toContain(await long);
  // The next ones run, on a new session.
  for (let i = 0; i < 3; i++) {
    const [row] = await pool<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    expect(row!.pid).not.toBe(pid);
  }
});
