/**
 * A safety net for the gateway process: a database call that failed because the database was away (an outage, the
 * embedded PostgreSQL stopping first on Ctrl-C) and whose promise nobody was still waiting on is logged, not a crash.
 * The database's absence is handled where it matters (503s, controller passes that try again); a rejection left
 * unhandled for any other reason is a bug and still ends the process, as Node.js would.
 */
import { isDatabaseUnreachable } from './database-errors.js';

export function keepRunningOnOrphanedDatabaseFailures(log: (message: string, error: unknown) => void): void {
  process.on('unhandledRejection', (reason) => {
    // Only an outage: a statement the database gave up on while it answers (a deadlock, a timeout) left unhandled is a bug.
    if (!isDatabaseUnreachable(reason)) throw reason;
    log('a database call failed while the database was away, and nothing was waiting for its answer', reason);
  });
}
