/**
 * Statements the server gives up on while it is busy (a statement_timeout, a lock_timeout, a deadlock it breaks, a
 * serialization failure) are outages, not bugs: nothing was written, the same statement passes later. The API answers
 * them 503 with Retry-After (RESOURCE_EXHAUSTED), not 500, and the controller tries again at its next pass.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { failureOf } from '../../src/http/failures.js';
import { isDatabaseUnavailable } from '../../src/storage/database-errors.js';
import type { Sql } from '../../src/storage/database.js';
import { startTestApp, TINY_REPO, type TestApp } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`CREATE TABLE busy_rows (id int PRIMARY KEY, v int)`;
  await db.sql`INSERT INTO busy_rows VALUES (1, 0), (2, 0)`;
});

afterAll(async () => {
  await db?.close();
});

const rejection = (work: Promise<unknown>) =>
  work.then(
    () => undefined,
    (error: unknown) => error,
  );

async function expectBusy(error: unknown, sqlState: string) {
  expect((error as { code?: string }).code, String(error)).toBe(sqlState);
  expect(isDatabaseUnavailable(error)).toBe(true);
  expect(failureOf(error)).toMatchObject({ kind: 'unavailable', retryAfter: 5 });
}

test('a statement_timeout (57014) is the database busy', async () => {
  const error = await rejection(db.sql.begin(async (t) => [await t`SET LOCAL statement_timeout = 50`, await t`SELECT pg_sleep(5)`]));
  await expectBusy(error, '57014');
});

test('a lock_timeout (55P03) while another transaction holds the row is the database busy', async () => {
  const holder = await db.sql.reserve();
  try {
    await holder`BEGIN`;
    await holder`UPDATE busy_rows SET v = v + 1 WHERE id = 1`;
    const error = await rejection(
      db.sql.begin(async (t) => [await t`SET LOCAL lock_timeout = 50`, await t`UPDATE busy_rows SET v = v + 1 WHERE id = 1`]),
    );
    await expectBusy(error, '55P03');
  } finally {
    await holder`ROLLBACK`;
    holder.release();
  }
});

/** Two transactions that lock rows 1 and 2 in opposite orders: the server aborts one of them. */
async function deadlock(sql: Sql): Promise<unknown> {
  let firstLocked!: () => void;
  let secondLocked!: () => void;
  const first = new Promise<void>((resolve) => (firstLocked = resolve));
  const second = new Promise<void>((resolve) => (secondLocked = resolve));
  const run = (mine: number, other: number, locked: () => void, theirs: Promise<void>) =>
    rejection(
      sql.begin(async (t) => {
        await t`UPDATE busy_rows SET v = v + 1 WHERE id = ${mine}`;
        locked();
        await theirs;
        await t`UPDATE busy_rows SET v = v + 1 WHERE id = ${other}`;
      }),
    );
  const outcomes = await Promise.all([run(1, 2, firstLocked, second), run(2, 1, secondLocked, first)]);
  return outcomes.find((error) => error !== undefined);
}

test('a deadlock the server breaks (40P01) is the database busy', async () => {
  await expectBusy(await deadlock(db.sql), '40P01');
});

test('a serialization failure (40001) is the database busy', async () => {
  const other = await db.sql.reserve();
  try {
    const error = await rejection(
      db.sql.begin('isolation level serializable', async (t) => {
        await t`SELECT v FROM busy_rows WHERE id = 2`;
        // Another transaction changes the row this one read, and commits.
        await other`UPDATE busy_rows SET v = v + 1 WHERE id = 2`;
        await t`UPDATE busy_rows SET v = v + 1 WHERE id = 2`;
      }),
    );
    await expectBusy(error, '40001');
  } finally {
    other.release();
  }
});

test('an API write whose statement is cancelled while it waits for a lock is answered 503 with Retry-After, and passes later', async () => {
  const t: TestApp = await startTestApp();
  const alice = await t.seed.user();
  const project = await alice.project('busy');
  const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 0, maxReplica: 1 } });
  const update = (name: string) => alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { name });
  const holder = await t.sql.reserve();
  try {
    // Another gateway's transaction holds the endpoint's row.
    await holder`BEGIN`;
    await holder`SELECT id FROM endpoints WHERE id = ${id} FOR UPDATE`;
    const [holding] = await holder<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    const holderPid = holding!.pid;
    let settled = false;
    const answer = update('renamed-while-locked').finally(() => (settled = true));
    // The update waits for the row: cancelled there, as an operator's pg_cancel_backend or a statement_timeout does.
    // Every statement waiting for a lock is cancelled until the update is answered (the controller's passes wait for
    // the same row now and then: theirs are cancelled too, and retried at a later pass).
    while (!settled) {
      await t.sql`
        SELECT pg_cancel_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> ${holderPid}`;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const refused = await answer;
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(refused.body).toMatchObject({ error: { code: 'RESOURCE_EXHAUSTED' } });
    await holder`ROLLBACK`;
    expect((await update('renamed-after')).status).toBe(200);
  } finally {
    await holder`ROLLBACK`.catch(() => {});
    holder.release();
  }
}, 60_000);
