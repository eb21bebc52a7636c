/**
 * The PostgreSQL connection and forward-only migrations. Migrations are the
 * plain `.sql` files in `db/`, applied in file-name order under an advisory
 * lock, so that several gateway processes starting together apply each file
 * exactly once. Each applied file's sha256 is recorded: a file edited after it
 * was applied stops the start (the database never ran the edit). The rules a
 * migration follows, so that the release before it keeps working on the new
 * schema during a rolling upgrade: docs/development.md, Migrations.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pRetry from 'p-retry';
import postgres from 'postgres';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;
/** Either the pool or a transaction: repositories accept both. */
export type Queryable = Sql | TransactionSql;

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../db');

/** An arbitrary constant shared by every process of this service. */
export const MIGRATION_LOCK_ID = 7_266_431_001;

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

export interface MigrateOptions {
  /**
   * How long a statement of a migration may wait for a table's lock before it gives up. An ALTER TABLE that waits
   * behind a running gateway's query holds every later query on that table behind it; this bounds that stall, on
   * each try (10 s held a running gateway's queries that long, several times over).
   * @default 2_500
   */
  lockTimeoutMs?: number;
  /**
   * Tries in all when a migration gives up on a lock: the whole run is rolled back and tried again. With the default
   * lock timeout and delays a start waits about 52 s in all (20 s of it for locks) before it fails.
   * @default 8
   */
  attempts?: number;
  /** The wait before the first retry, doubled before each next one (0.25, 0.5, 1 ... 16 s). @default 250 */
  retryDelayMs?: number;
  /** Told why a run is tried again (the gateway logs it as a warning); the retry waits for what it returns. */
  onRetry?: (message: string) => void | Promise<void>;
}

/** A migration file as it is now: its text's sha256 is compared with the one recorded when it was applied. */
interface MigrationFile {
  name: string;
  text: string;
  checksum: string;
}

/** What schema_migrations holds: applied migrations by name, with their checksum (null: applied before checksums were kept). */
interface AppliedMigrations {
  table: boolean;
  checksumColumn: boolean;
  rows: Map<string, string | null>;
}

/** A migration's text, hashed with its line ends as LF (a checkout that writes CRLF has not changed it). */
export function migrationChecksum(text: string): string {
  return createHash('sha256').update(text.replace(/\r\n/g, '\n')).digest('hex');
}

async function readMigrations(dir: string): Promise<MigrationFile[]> {
  const names = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  return Promise.all(
    names.map(async (name) => {
      const text = await readFile(path.join(dir, name), 'utf8');
      return { name, text, checksum: migrationChecksum(text) };
    }),
  );
}

async function readApplied(db: Queryable): Promise<AppliedMigrations> {
  const columns = await db<{ column_name: string }[]>`
    SELECT column_name FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'schema_migrations'`;
  const table = columns.length > 0;
  const checksumColumn = columns.some((c) => c.column_name === 'checksum');
  const rows = new Map<string, string | null>();
  if (table) {
    const applied = checksumColumn
      ? await db<{ name: string; checksum: string | null }[]>`SELECT name, checksum FROM schema_migrations`
      : await db<{ name: string; checksum: string | null }[]>`SELECT name, NULL::text AS checksum FROM schema_migrations`;
    for (const r of applied) rows.set(r.name, r.checksum);
  }
  return { table, checksumColumn, rows };
}

/**
 * Refuses to go on when an applied migration's file is not the text that was applied: the database never ran the
 * edit, so the schema is not what the code expects. A recorded migration with no file here is a newer release's (this
 * is an older gateway, after a rollback) and is left alone.
 */
function checkUnchanged(files: MigrationFile[], applied: AppliedMigrations): void {
  for (const file of files) {
    const recorded = applied.rows.get(file.name);
    if (recorded && recorded !== file.checksum) {
      throw new Error(
        `migration db/${file.name} was changed after it was applied to this database (sha256 ${recorded.slice(0, 12)}… ` +
          `when applied, ${file.checksum.slice(0, 12)}… now): the database never ran the change. A committed migration is ` +
          'never edited: restore the file as it was applied and put the change in a new migration (see docs/development.md, Migrations)',
      );
    }
  }
}

/** Whether anything is to be written: a migration to apply, or the checksums' table, column or values to record. */
function needsWrite(files: MigrationFile[], applied: AppliedMigrations): boolean {
  if (!applied.table || !applied.checksumColumn) return true;
  return files.some((f) => !applied.rows.has(f.name) || applied.rows.get(f.name) === null);
}

const LOCK_NOT_AVAILABLE = '55P03';

/** Raised when a migration gave up on a table's lock; `what` names the migration. */
class LockTimeout extends Error {
  constructor(
    readonly what: string,
    cause: unknown,
  ) {
    super(`${what} gave up waiting for a table's lock`, { cause });
  }
}

/**
 * Applies the migrations in `dir` not yet applied, in file-name order, in one transaction. The common start, with
 * nothing to apply, only reads schema_migrations: it takes no lock, so a gateway never waits for another's long
 * migration unless it needs that migration itself. With something to apply it takes the advisory lock, reads again
 * (another process may have applied it meanwhile) and applies what is still missing.
 */
export async function migrate(sql: Sql, dir: string = MIGRATIONS_DIR, options: MigrateOptions = {}): Promise<string[]> {
  const { lockTimeoutMs = 2_500, attempts = 8, retryDelayMs = 250, onRetry } = options;
  const files = await readMigrations(dir);
  const before = await readApplied(sql);
  checkUnchanged(files, before);
  if (!needsWrite(files, before)) return [];
  try {
    return await pRetry(() => migrateLocked(sql, files, lockTimeoutMs), {
      retries: attempts - 1,
      factor: 2,
      minTimeout: retryDelayMs,
      randomize: false,
      shouldRetry: ({ error }) => error instanceof LockTimeout,
      onFailedAttempt: ({ error, attemptNumber, retriesLeft }) => {
        if (!(error instanceof LockTimeout) || retriesLeft === 0) return;
        return onRetry?.(
          `${error.what} waited ${lockTimeoutMs / 1000} s for a lock on a table it changes (another ` +
            "session's query or transaction holds it) and gave up rather than hold every later query on that table behind " +
            `it; nothing was applied. Try ${attemptNumber + 1} of ${attempts} in ${(retryDelayMs * 2 ** (attemptNumber - 1)) / 1000} s`,
        );
      },
    });
  } catch (error) {
    if (!(error instanceof LockTimeout)) throw error;
    throw new Error(
      `${error.what} could not take the locks it needs (waiting at most ${lockTimeoutMs / 1000} s each time, ` +
        `${attempts} tries): other sessions hold locks on the tables it changes (long queries, or transactions left ` +
        'open: see pg_stat_activity and pg_locks). Nothing was applied; start again once they end',
      { cause: error },
    );
  }
}

async function migrateLocked(sql: Sql, files: MigrationFile[], lockTimeoutMs: number): Promise<string[]> {
  const applied: string[] = [];
  // Which migration ran when a lock wait gave up (null: the bookkeeping before the first).
  let current: string | null = null;
  try {
    await sql.begin(async (tx) => {
      // The advisory lock is waited for without a bound: it is held only by another process applying these same
      // migrations, which this one needs done before it can start.
      await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`;
      await tx`SELECT set_config('lock_timeout', ${`${lockTimeoutMs}ms`}, true)`;
      const state = await readApplied(tx);
      if (!state.table) {
        await tx`CREATE TABLE schema_migrations (
          name text PRIMARY KEY,
          applied_at timestamptz NOT NULL DEFAULT now(),
          checksum text
        )`;
      } else if (!state.checksumColumn) {
        await tx`ALTER TABLE schema_migrations ADD COLUMN checksum text`;
      }
      checkUnchanged(files, state);
      for (const file of files) {
        if (state.rows.has(file.name)) {
          // Applied before checksums were kept: the text is taken as it is now (what was applied cannot be known).
          if (state.rows.get(file.name) === null) {
            await tx`UPDATE schema_migrations SET checksum = ${file.checksum} WHERE name = ${file.name}`;
          }
          continue;
        }
        current = file.name;
        await tx.unsafe(file.text);
        await tx`INSERT INTO schema_migrations (name, checksum) VALUES (${file.name}, ${file.checksum})`;
        applied.push(file.name);
      }
    });
  } catch (error) {
    if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) {
      throw new LockTimeout(current ? `migration db/${current}` : 'the table of applied migrations (schema_migrations)', error);
    }
    throw error;
  }
  return applied;
}
