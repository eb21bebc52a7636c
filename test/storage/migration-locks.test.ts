/**
 * The migrations' locks. A start with nothing to apply takes no lock: a gateway never waits for another's long
 * migration (it had no answer on /healthz for 23 s in an operator's review). One with something to apply takes the
 * advisory lock, then reads again. A migration's statement waits at most the lock timeout for a table's lock (an ALTER
 * TABLE queued behind a running query holds every later query on that table behind it); the run is then rolled back
 * and tried again, each retry said, and the last failure names the migration.
 */
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, expect, test } from 'vitest';
import {
  connectDatabase,
  migrate,
  migrationChecksum,
  MIGRATION_LOCK_ID,
  MIGRATIONS_DIR,
  type Sql,
  type TransactionSql,
} from '../../src/storage/database.js';
import { createEmptyDatabase, waitForLockWait } from '../support/database.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Setup {
  url: string;
  sql: Sql;
  dir: string;
  /** Another session of the same database (an older gateway, a newer one migrating). */
  other: Sql;
}

async function setup(): Promise<Setup> {
  const url = await createEmptyDatabase();
  const sql = connectDatabase(url, { max: 2 });
  const other = connectDatabase(url, { max: 3 });
  cleanups.push(
    () => sql.end({ timeout: 5 }),
    () => other.end({ timeout: 5 }),
  );
  const dir = await mkdtemp(path.join(os.tmpdir(), 'migration-locks-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  await cp(MIGRATIONS_DIR, dir, { recursive: true });
  await migrate(sql, dir);
  return { url, sql, dir, other };
}

/** A transaction of `db` that runs `statement`, then stays open until released. */
async function holdOpen(db: Sql, statement: (tx: TransactionSql) => Promise<unknown>): Promise<{ release(): Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const done = db.begin(async (tx) => {
    await statement(tx);
    held();
    await released;
  });
  await Promise.race([holding, done]);
  let ended = false;
  const end = async () => {
    if (ended) return;
    ended = true;
    release();
    await done;
  };
  cleanups.push(end);
  return { release: end };
}

test('with nothing to apply, a start does not wait for the lock another process holds', async () => {
  const { sql, dir, other } = await setup();
  const holder = await holdOpen(other, (tx) => tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`);
  const outcome = await Promise.race([
    migrate(sql, dir).then((applied) => ({ applied })),
    waitForLockWait(other, 'the start', '%pg_advisory_xact_lock%').then(() => 'waited for the lock'),
  ]);
  expect(outcome).toEqual({ applied: [] });
  await holder.release();
});

test('with something to apply, a start waits for the lock, then reads again and applies only what is still missing', async () => {
  const { sql, dir, other } = await setup();
  const file = '29990101000000_pending.sql';
  const text = 'CREATE TABLE pending_one (id int);\n';
  await writeFile(path.join(dir, file), text);
  // Another gateway of the new release is applying it.
  const holder = await holdOpen(other, async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`;
    await tx.unsafe(text);
    await tx`INSERT INTO schema_migrations (name, checksum) VALUES (${file}, ${migrationChecksum(text)})`;
  });
  const starting = migrate(sql, dir);
  await waitForLockWait(other, 'the start', '%pg_advisory_xact_lock%');
  await holder.release();
  expect(await starting).toEqual([]);
});

test('a migration waiting for a table lock gives up, so later queries do not queue behind it; retried, then named', async () => {
  const { sql, dir, other } = await setup();
  const file = '29990101000000_teams_column.sql';
  await writeFile(path.join(dir, file), 'ALTER TABLE teams ADD COLUMN extra text;\n');
  // A running gateway's transaction has read teams and is still open.
  const reader = await holdOpen(other, (tx) => tx`SELECT count(*) FROM teams`);
  const retries: string[] = [];
  const starting = migrate(sql, dir, { lockTimeoutMs: 1000, attempts: 3, retryDelayMs: 50, onRetry: (m) => void retries.push(m) }).catch(
    (e: unknown) => e,
  );
  // The ALTER waits; a query on teams sent now queues behind it until it gives up.
  await waitForLockWait(other, 'the migration', '%ADD COLUMN extra%');
  const [later] = await other`SELECT count(*)::int AS n FROM teams`;
  expect(later!.n).toBe(0);

  const failure = (await starting) as Error;
  expect(failure).toBeInstanceOf(Error);
  expect(failure.message).toContain(`migration db/${file} could not take the locks it needs`);
  expect(failure.message).toContain('3 tries');
  expect(retries).toHaveLength(2);
  expect(retries[0]).toContain(`migration db/${file} waited 1 s for a lock on a table it changes`);
  expect(retries[0]).toContain('Try 2 of 3');
  expect(retries[1]).toContain('Try 3 of 3');
  // Nothing was applied.
  expect((await sql`SELECT count(*)::int AS n FROM schema_migrations WHERE name = ${file}`)[0]!.n).toBe(0);
  expect(
    (await sql`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'teams' AND column_name = 'extra'`)[0]!.n,
  ).toBe(0);
  await reader.release();
});

test('a retry applies the migration once the table lock is free', async () => {
  const { sql, dir, other } = await setup();
  const file = '29990101000000_teams_column.sql';
  await writeFile(path.join(dir, file), 'ALTER TABLE teams ADD COLUMN extra text;\n');
  const reader = await holdOpen(other, (tx) => tx`SELECT count(*) FROM teams`);
  const retries: string[] = [];
  const applied = await migrate(sql, dir, {
    lockTimeoutMs: 200,
    attempts: 3,
    retryDelayMs: 50,
    onRetry: async (message) => {
      retries.push(message);
      // The running transaction ends before the next try.
      await reader.release();
    },
  });
  expect(applied).toEqual([file]);
  expect(retries).toHaveLength(1);
});
