/**
 * Opens the configured database: the external one named by DATABASE_URL, or
 * the embedded PostgreSQL under DATA_DIR/pg (started here, or adopted when
 * another process of ours already runs it). Migrations are applied either way.
 */
import path from 'node:path';
import type { Config } from '../config.js';
import { connectDatabase, migrate, type ConnectOptions, type Sql } from './database.js';
import { ensureDatabase, startEmbeddedPostgres } from './embedded-postgres.js';

export const EMBEDDED_DATABASE_NAME = 'dedicated';

export interface OpenDatabase {
  sql: Sql;
  /** Where it is, for the start-up banner (no password). */
  description: string;
  close(): Promise<void>;
}

export async function openDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir'>, options: ConnectOptions = {}): Promise<OpenDatabase> {
  if (config.databaseUrl) {
    const sql = connectDatabase(config.databaseUrl, options);
    await migrate(sql);
    const url = new URL(config.databaseUrl);
    return { sql, description: `${url.hostname}:${url.port || 5432}${url.pathname}`, close: () => sql.end({ timeout: 5 }) };
  }
  const embedded = await startEmbeddedPostgres({ dataDir: path.join(config.dataDir, 'pg') });
  try {
    await ensureDatabase(embedded.adminUrl, EMBEDDED_DATABASE_NAME);
    const sql = connectDatabase(embedded.urlFor(EMBEDDED_DATABASE_NAME), options);
    await migrate(sql);
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
