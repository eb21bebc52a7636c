/**
 * Opens the configured database: the external one named by DATABASE_URL, or
 * the embedded PostgreSQL under DATA_DIR/pg (started here, or adopted when
 * another process of ours already runs it). Migrations are applied either way.
 */
import path from 'node:path';
import type { Config } from '../config.js';
import { connectDatabase, migrate, type ConnectOptions, type MigrateOptions, type Sql } from './database.js';
import { ensureDatabase, startEmbeddedPostgres } from './embedded-postgres.js';

export const EMBEDDED_DATABASE_NAME = 'dedicated';

export interface OpenDatabase {
  sql: Sql;
  /** Where it is, for the start-up banner (no password). */
  description: string;
  close(): Promise<void>;
}

export interface OpenOptions extends ConnectOptions {
  /** How the migrations wait for locks, and where they say why they try again (see `migrate`). */
  migrations?: MigrateOptions;
}

export async function openDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir'>, options: OpenOptions = {}): Promise<OpenDatabase> {
  const { migrations, ...connect } = options;
  if (config.databaseUrl) {
    const sql = connectDatabase(config.databaseUrl, connect);
    await migrateOrClose(sql, migrations);
    const url = new URL(config.databaseUrl);
    return { sql, description: `${url.hostname}:${url.port || 5432}${url.pathname}`, close: () => sql.end({ timeout: 5 }) };
  }
  const embedded = await startEmbeddedPostgres({ dataDir: path.join(config.dataDir, 'pg') });
  try {
    await ensureDatabase(embedded.adminUrl, EMBEDDED_DATABASE_NAME);
    const sql = connectDatabase(embedded.urlFor(EMBEDDED_DATABASE_NAME), connect);
    await migrateOrClose(sql, migrations);
    return {
      sql,
      description: `embedded PostgreSQL in ${path.join(config.dataDir, 'pg')}`,
      close: async () => {
        await sql.end({ timeout: 5 });
        await embedded.stop();
      },
    };
  } catch (error) {
    await embedded.stop();
    throw error;
  }
}

/** Applies the migrations; on failure the pool is closed, so that a caller that reports the error can exit. */
async function migrateOrClose(sql: Sql, options: MigrateOptions | undefined): Promise<void> {
  try {
    await migrate(sql, undefined, options);
  } catch (error) {
    await sql.end({ timeout: 5 });
    throw error;
  }
}
