import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { connectDatabase, migrate, type ConnectOptions, type Queryable, type Sql } from '../../src/storage/database.js';
import { ensureDatabase } from '../../src/storage/embedded-postgres.js';

export interface TestDatabase {
  dbUrl: string;
  sql: Sql;
  close(): Promise<void>;
}

/** Counts the SQL statements a process sends (pass `onQuery` to its database). */
export interface QueryCounter {
  count: number;
  reset(): void;
  /** Resolves once no statement was sent for 200 ms (background reads after a write, such as the router's, are done). */
  settled(): Promise<void>;
  onQuery(): void;
}

export function queryCounter(): QueryCounter {
  const counter: QueryCounter = {
    count: 0,
    reset() {
      counter.count = 0;
    },
    async settled() {
      for (let i = 0; i < 50; i++) {
        counter.reset();
        await new Promise((r) => setTimeout(r, 200));
        if (counter.count === 0) return;
      }
      throw new Error('statements kept coming for 10 s');
    },
    onQuery() {
      counter.count++;
    },
  };
  return counter;
}

/** A fresh, empty database for one test file (not migrated). */
export async function createEmptyDatabase(): Promise<string> {
  const adminUrl = inject('pgAdminUrl');
  const name = `t_${randomBytes(6).toString('hex')}`;
  await ensureDatabase(adminUrl, name);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A fresh, migrated database. */
export async function createTestDatabase(options: ConnectOptions = {}): Promise<TestDatabase> {
  const url = await createEmptyDatabase();
  const sql = connectDatabase(url, options);
  await migrate(sql);
  return { dbUrl: url, sql, close: () => sql.end({ timeout: 5 }) };
}

/** Waits until a session of the database `db` reads waits for a lock, running a statement `like` the pattern. */
export async function waitForLockWait(db: Queryable, what: string, like = '%'): Promise<void> {
  for (let i = 0; ; i++) {
    const [waiting] = await db<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE ${like}`;
    if (waiting!.n > 0) return;
    if (i > 250) throw new Error(`${what} never waited for the lock`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
