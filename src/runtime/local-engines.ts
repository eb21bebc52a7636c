/**
 * The engines this machine runs, as the database records them. A gateway that
 * stops leaves its engines running on purpose (the next start adopts them, and
 * a built-in engine nobody contacts exits by itself after ENGINE_IDLE_EXIT_MS):
 * this module says which it leaves, and stops them when asked (a second
 * Ctrl-C, STOP_ENGINES_ON_EXIT, `npm run stop-engines`).
 *
 * Stopping is graceful: the replica is marked DRAINING first (no gateway
 * routes a new request to it), its engine gets SIGTERM (the built-in engine
 * finishes its requests in flight), then SIGKILL after the grace; the replica
 * is marked STOPPED, so the next start neither adopts it nor counts it as a
 * crash (crash-watch.ts would mark a dead READY replica FAILED, a death), and
 * starts a fresh one where the endpoint still wants one.
 */
import type { Sql } from '../storage/database.js';
import { liveReplicasOnNode, markNodeReplica } from '../storage/node-replicas-repository.js';
import type { LocalRuntime } from './local-runtime.js';
import { pidOf } from './local-processes.js';
import type { ReplicaRef } from './runtime.js';

/** SIGTERM to SIGKILL when engines are stopped on the way out (as the controller's default). */
export const ENGINE_STOP_GRACE_MS = 10_000;

/** The last error of a replica stopped this way: why it is STOPPED while its endpoint still runs. */
export const STOPPED_WITH_GATEWAY = 'its engine was stopped on request (Ctrl-C twice, STOP_ENGINES_ON_EXIT or npm run stop-engines)';

/** An engine process of this machine. */
export interface LocalEngine {
  replicaId: string;
  endpointId: string;
  pid: number;
  /** Its base URL, e.g. http://127.0.0.1:41234 */
  address: string;
  port: number | null;
}

function portOf(address: string): number | null {
  try {
    return Number(new URL(address).port) || null;
  } catch {
    return null;
  }
}

const handleOf = (engine: LocalEngine, node: string): ReplicaRef => ({
  replicaId: engine.replicaId,
  address: engine.address,
  locator: String(engine.pid),
  node,
});

/**
 * The engines of this machine whose process still runs: those the runtime's
 * state files record (under DATA_DIR/replicas; read without the database,
 * which a terminal's Ctrl-C may already have stopped: the embedded PostgreSQL
 * gets the signal too) and, when `sql` is given, the live replicas the
 * database records on this node.
 */
export async function runningLocalEngines(runtime: LocalRuntime, sql?: Sql): Promise<LocalEngine[]> {
  const engines = new Map<string, LocalEngine>();
  for (const r of await runtime.recorded()) {
    engines.set(r.replicaId, { replicaId: r.replicaId, endpointId: r.endpointId, pid: r.pid, address: r.address, port: portOf(r.address) });
  }
  if (sql) {
    for (const r of await liveReplicasOnNode(sql, runtime.node)) {
      const pid = pidOf(r);
      if (pid === null || engines.has(r.id)) continue;
      const address = r.address ?? '';
      engines.set(r.id, { replicaId: r.id, endpointId: r.endpointId, pid, address, port: portOf(address) });
    }
  }
  return [...engines.values()]
    .filter((e) => runtime.isAlive(handleOf(e, runtime.node)))
    .sort((a, b) => a.endpointId.localeCompare(b.endpointId) || a.replicaId.localeCompare(b.replicaId));
}

/**
 * Stops every engine this machine runs (runningLocalEngines), all at once:
 * SIGTERM (the built-in engine finishes its requests in flight), SIGKILL
 * after `graceMs`. With `sql`, each replica is marked DRAINING first (no
 * gateway routes a new request to it) and STOPPED after, so that the next
 * start neither adopts it nor counts its end as a crash; without it (the
 * database is gone), the engines are stopped all the same.
 */
export async function stopLocalEngines(
  runtime: LocalRuntime,
  options: { sql?: Sql | undefined; graceMs?: number } = {},
): Promise<LocalEngine[]> {
  const { sql, graceMs = ENGINE_STOP_GRACE_MS } = options;
  const engines = await runningLocalEngines(runtime, sql);
  await Promise.all(
    engines.map(async (engine) => {
      if (sql) await markNodeReplica(sql, engine.replicaId, 'DRAINING');
      await runtime.stop(handleOf(engine, runtime.node), graceMs);
      if (sql) await markNodeReplica(sql, engine.replicaId, 'STOPPED', STOPPED_WITH_GATEWAY);
    }),
  );
  return engines;
}

/**
 * Marks STOPPED the live replicas on this node whose engine no longer runs
 * (after a stop that had no database): a dead READY replica would otherwise
 * count as a crash at the next start. Answers their ids.
 */
export async function markGoneReplicasStopped(sql: Sql, runtime: LocalRuntime, replicaIds: readonly string[]): Promise<string[]> {
  const marked: string[] = [];
  const wanted = new Set(replicaIds);
  for (const r of await liveReplicasOnNode(sql, runtime.node)) {
    if (!wanted.has(r.id)) continue;
    if (runtime.isAlive({ replicaId: r.id, locator: r.locator, node: runtime.node })) continue;
    await markNodeReplica(sql, r.id, 'STOPPED', STOPPED_WITH_GATEWAY);
    marked.push(r.id);
  }
  return marked;
}

/** "10 min", "90 s", "1 h 30 min": a duration as a person reads it. */
export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 120 && s % 60 !== 0) return `${s} s`;
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`;
}

/** One line per engine: its endpoint, replica, pid and port. */
export function engineLines(engines: readonly LocalEngine[]): string[] {
  return engines.map((e) => `  ${e.endpointId}  replica ${e.replicaId}  pid ${e.pid}  port ${e.port ?? '?'}`);
}

/** What a stopping gateway says about the engines it leaves running (none: an empty string). */
export function enginesLeftMessage(
  engines: readonly LocalEngine[],
  options: { idleExitMs: number; engineCommand: boolean; stopHint?: string },
): string {
  if (engines.length === 0) return '';
  const lines = [
    `Left running: ${engines.length} engine${engines.length === 1 ? '' : 's'} (engines outlive the gateway on purpose):`,
    ...engineLines(engines),
    'The next `npm start` on this database (the same DATABASE_URL, or DATA_DIR) adopts them and serves at once.',
    options.engineCommand
      ? 'Engines started from ENGINE_COMMAND do not exit by themselves.'
      : `An engine no gateway contacts exits by itself after ${formatDuration(options.idleExitMs)} (ENGINE_IDLE_EXIT_MS=${options.idleExitMs}).`,
    'To stop them now: `npm run stop-engines` (same DATABASE_URL or DATA_DIR).',
  ];
  if (options.stopHint) lines.push(options.stopHint);
  return lines.join('\n');
}
