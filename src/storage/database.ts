/**
 * The PostgreSQL connection and forward-only migrations. Migrations are the
 * plain `.sql` files in `db/`, applied in file-name order under an advisory
 * lock, so that several gateway processes starting together apply each file
 * exactly once.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;
/** Either the pool or a transaction: repositories accept both. */
export type Queryable = Sql | TransactionSql;

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../db');

/** An arbitrary constant shared by every process of this service. */
const MIGRATION_LOCK_ID = 7_266_431_001;

export interface ConnectOptions {
  /** Pool size. @default 10 */
  max?: number;
  /** Called for every statement sent; tests use it to count queries. */
  onQuery?: (query: string) => void;
  /**
   * Seconds a new connection may take to open. postgres.js waits 30 s by
   * default, which during an outage (a server that accepts no connection
   * and refuses none) holds every request that long before its 503.
   * @default 5
   */
  connectTimeoutSeconds?: number;
}

/** How long a session may sit in an open transaction, waiting for its gateway, before PostgreSQL ends it. */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;

export function connectDatabase(url: string, options: ConnectOptions = {}): Sql {
  const { onQuery } = options;
  return postgres(url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 5,
    onnotice: () => {},
    connection: {
      application_name: 'dedicated-endpoints',
      // A gateway that stops mid-transaction (frozen, or cut off without its socket closing) loses its locks after a
      // minute instead of holding them until TCP gives up (hours): the others' writes wait at most that long.
      idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
    ...(onQuery ? { debug: (_connection: number, query: string) => onQuery(query) } : {}),
  });
}

export async function migrate(sql: Sql, dir: string = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (
      name text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`;
    const done = new Set((await tx<{ name: string }[]>`SELECT name FROM schema_migrations`).map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(await readFile(path.join(dir, file), 'utf8'));
      await tx`INSERT INTO schema_migrations (name) VALUES (${file})`;
      applied.push(file);
    }
  });
  return applied;
}
