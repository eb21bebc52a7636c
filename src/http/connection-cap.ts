/**
 * The process-wide cap on connections (HTTP_MAX_CONNECTIONS; docs/security-and-limits.md#connections). Every
 * connection holds a file descriptor, and so do the engines' pipes and keep-alive pools, PostgreSQL's connections,
 * model downloads and files: connections past the open-file limit would fail those too (EMFILE), for every user.
 * The default is the limit less a reserve for them, and at most DEFAULT_CEILING (an idle connection costs memory
 * too: its socket, parser and buffers).
 */
import { readFileSync } from 'node:fs';

/**
 * File descriptors kept for everything but client connections (half the limit where it is under twice this). The
 * probes' own listener (HEALTH_PORT, ./health-listener.ts: HEALTH_MAX_CONNECTIONS) takes its few from here: it is
 * outside the cap, so that a flood of the main port cannot fail the probes.
 */
export const FD_RESERVE = 1024;
/** The default's ceiling, and the default where the open-file limit is unknown (not Linux) or unlimited. */
export const DEFAULT_CEILING = 16_384;

/** The process's soft open-file limit (Node raises it to the hard limit as it starts), from /proc/self/limits on Linux. */
export function openFileLimit(limits = '/proc/self/limits'): number | undefined {
  let text: string;
  try {
    text = readFileSync(limits, 'utf8');
  } catch {
    return undefined;
  }
  const match = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  return match && match[1] !== 'unlimited' ? Number(match[1]) : undefined;
}

/** The descriptors left to connections under `limit`: the limit less the reserve. */
export function connectionsWithin(limit: number): number {
  return Math.max(1, limit - Math.min(FD_RESERVE, Math.floor(limit / 2)));
}

/** HTTP_MAX_CONNECTIONS unset: what the open-file limit leaves to connections, up to DEFAULT_CEILING. */
export function defaultMaxConnections(limit = openFileLimit()): number {
  return limit === undefined ? DEFAULT_CEILING : Math.min(DEFAULT_CEILING, connectionsWithin(limit));
}
