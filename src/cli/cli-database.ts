/**
 * What the operator CLIs (`npm run admin`, `npm run stop-engines`) share: how
 * they pick the configured database (DATABASE_URL, or the embedded one under
 * DATA_DIR, as `npm start` chooses it) and say which on stderr, refusing where
 * DATA_DIR holds none; and how they report a failure and exit.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, type Config } from '../config.js';
import { openDatabase, type OpenDatabase } from '../storage/open-database.js';

/** A mistake of the caller's: its message alone is printed, no stack. */
export class UsageError extends Error {}

/** Opens the configured database; a CLI never creates one: without DATABASE_URL, DATA_DIR must hold the service's (npm start made it). */
export async function openCliDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<OpenDatabase> {
  if (!config.databaseUrl && !existsSync(path.join(config.dataDir, 'pg', 'PG_VERSION'))) {
    throw new UsageError(
      `no database in ${path.join(config.dataDir, 'pg')}: set DATA_DIR to the directory \`npm start\` uses (default ./.data in its working directory), or DATABASE_URL`,
    );
  }
  const database = await openDatabase(config);
  console.error(`using the database: ${database.description}`);
  return database;
}

/** Prints a failure (the message alone for the caller's mistakes, `<what> failed:` and the error otherwise) and exits 1. */
export function exitOnFailure(what: string): (error: unknown) => never {
  return (error) => {
    if (error instanceof UsageError || error instanceof ConfigError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error((error as Error).message);
    } else {
      console.error(`${what} failed:`, error);
    }
    process.exit(1);
  };
}
