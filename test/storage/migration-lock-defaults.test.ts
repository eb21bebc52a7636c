/**
 * The migration runner's lock-wait defaults (docs/operations.md, Upgrading): each statement waits at most 2.5 s for a
 * table's lock, since every query on that table queues behind the waiting ALTER meanwhile (10 s held a running
 * gateway's queries that long on each try), and there are 8 tries, 0.25 s apart at first, so that a start still waits
 * about as long in all for a long query to end.
 */
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { connectDatabase, migrate, MIGRATIONS_DIR, type Sql } from '../../src/storage/database.js';
import { createEmptyDatabase } from '../support/database.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function connect(url: string): Sql {
  const sql = connectDatabase(url, { max: 2 });
  cleanups.push(() => sql.end({ timeout: 5 }));
  return sql;
}

test('by default a migration gives up a table lock after 2.5 s, and tries 8 times', async () => {
  const url = await createEmptyDatabase();
  const sql = connect(url);
  const other = connect(url);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'migration-lock-defaults-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  await cp(MIGRATIONS_DIR, dir, { recursive: true });
  await migrate(sql, dir);
  const file = '29990101000000_teams_column.sql';
  await writeFile(path.join(dir, file), 'ALTER TABLE teams ADD COLUMN extra text;\n');

  // A running gateway's transaction has read teams and stays open until the migration's first try gives up.
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const reader = other.begin(async (tx) => {
    await tx`SELECT count(*) FROM teams`;
    held();
    await released;
  });
  cleanups.push(async () => {
    release();
    await reader;
  });
  await holding;

  const retries: string[] = [];
  const applied = await migrate(sql, dir, {
    onRetry: async (message) => {
      retries.push(message);
      release();
      await reader;
    },
  });
  expect(applied).toEqual([file]);
  expect(retries).toHaveLength(1);
  expect(retries[0]).toContain(`migration db/${file} waited 2.5 s for a lock on a table it changes`);
  expect(retries[0]).toContain('Try 2 of 8 in 0.25 s');
});
