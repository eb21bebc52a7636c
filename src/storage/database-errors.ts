/**
 * What a failed statement means, read from postgres.js errors in one place:
 * the database is unreachable (an outage: retry later), or it refused a value
 * the request carried (a client error that got past validation), or anything
 * else (a bug).
 */
import type { Sql } from './database.js';

export type DatabaseFailure =
  /** `busy`: the server answers, and gave up on this statement (BUSY_STATES); otherwise it cannot be reached. */
  | { kind: 'unavailable'; busy?: true }
  /** A data exception (SQLSTATE class 22): the value, not the server, is at fault. */
  | { kind: 'invalid-data'; sqlState: string; message: string };

/**
 * Errors postgres.js raises itself when the server went away or does not
 * answer. Not CONNECTION_ENDED or CONNECTION_DESTROYED: those mean this
 * process closed its own pool (`sql.end()`), which is a bug or a shutdown,
 * not an outage.
 */
const CLIENT_CONNECTION_CODES = new Set(['CONNECTION_CLOSED', 'CONNECT_TIMEOUT']);

/** Socket errors of the connection (Node's codes). */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs that mean the server cannot serve now: class 08 (connection
 * exception), 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
 * cannot_connect_now (starting up or shutting down), 53300
 * too_many_connections. And those of a statement the server gave up on, busy,
 * which the same statement would pass later: 57014 query_canceled (a
 * `statement_timeout` a managed database sets for its roles, an operator's
 * pg_cancel_backend), 55P03 lock_not_available (a `lock_timeout` while another
 * gateway holds the row), 40P01 deadlock_detected and 40001
 * serialization_failure (the transaction the server chose to abort). Each
 * leaves nothing written: the request is answered 503 with Retry-After, the
 * controller tries again at its next pass, rather than a 500 or a failed start.
 */
const BUSY_STATES = new Set(['57014', '55P03', '40P01', '40001']);

function isUnavailableState(state: string): boolean {
  return state.startsWith('08') || state === '57P01' || state === '57P02' || state === '57P03' || state === '53300';
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function isPostgresError(error: unknown): error is Error & { code: string; message: string } {
  return error instanceof Error && error.name === 'PostgresError' && typeof codeOf(error) === 'string';
}

/** The database meaning of an error, or undefined when it is not a database failure. */
export function databaseFailureOf(error: unknown): DatabaseFailure | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  if (error instanceof AggregateError) {
    // A connect to a name with several addresses fails with one error per address.
    const inner = error.errors.map(databaseFailureOf);
    if (inner.length > 0 && inner.every((f) => f?.kind === 'unavailable')) return { kind: 'unavailable' };
  }
  const code = codeOf(error);
  if (code === undefined) return undefined;
  if (isPostgresError(error)) {
    if (isUnavailableState(code)) return { kind: 'unavailable' };
    if (BUSY_STATES.has(code)) return { kind: 'unavailable', busy: true };
    if (code.startsWith('22')) return { kind: 'invalid-data', sqlState: code, message: error.message };
    return undefined;
  }
  if (CLIENT_CONNECTION_CODES.has(code) || SOCKET_CODES.has(code)) return { kind: 'unavailable' };
  return undefined;
}

export function isDatabaseUnavailable(error: unknown): boolean {
  return databaseFailureOf(error)?.kind === 'unavailable';
}

/**
 * Whether the database cannot be reached (an outage, not a statement it gave up on while busy): a statement sent
 * again now fails the same way, where one that met a deadlock may pass alone. What waits for the database to come
 * back (the request recorder's held writes) and what forgives a failure because the database was away (the
 * unhandled-rejection guard) ask this: a statement that times out every time it is sent must not be held, or
 * forgiven, for ever.
 */
export function isDatabaseUnreachable(error: unknown): boolean {
  const failure = databaseFailureOf(error);
  return failure?.kind === 'unavailable' && !failure.busy;
}

/** The database meaning of an error, with a statement it gave up on while busy (`busy`) told apart: 'busy'. */
export function databaseFailureKind(error: unknown): 'unreachable' | 'busy' | 'invalid-data' | undefined {
  const failure = databaseFailureOf(error);
  if (failure?.kind === 'invalid-data') return 'invalid-data';
  if (failure?.kind === 'unavailable') return failure.busy ? 'busy' : 'unreachable';
  return undefined;
}

/**
 * Whether the database answers a trivial statement within `timeoutMs`. Never
 * rejects. A probe that runs late is left to settle on its own: cancelling it
 * would open another connection to a server that is not answering.
 */
export async function pingDatabase(sql: Sql, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([
      sql`SELECT 1`.then(
        () => true as const,
        () => false as const,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
