import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { connectDatabase, migrate, type ConnectOptions, type Sql } from '../../src/storage/database.js';
import { ensureDatabase } from '../../src/storage/embedded-postgres.js';

export interface TestDatabase {
  dbUrl: string;
  sql: Sql;
  close(): Promise<void>;
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
