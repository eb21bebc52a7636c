/**
 * The local runtime's processes: spawning an engine detached, whether a replica's engine process is alive
 * (and still the replica's, not a reused pid), signalling its process group,
 * reading a local replica's locator (its process id), and the state files
 * that record the engines a local runtime started.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { ReplicaStartError, type ReplicaRef } from './runtime.js';

/**
 * The first line of a replica's log, written just before its engine is
 * spawned: `[runtime] spawning the engine {"at":…}` (milliseconds since the
 * epoch). With the engine's `ENGINE_READY {…,"readyAt":…}` line it gives the
 * engine's own start time.
 */
export const SPAWN_LINE_PREFIX = '[runtime] spawning the engine ';

/**
 * Spawns an engine detached (it leads its own process group, and outlives the gateway), its output appended to
 * `logFile` after the spawn line; answers it once it runs, with its pid. Throws ReplicaStartError when the command
 * cannot start.
 */
export async function spawnDetached(
  file: string,
  args: readonly string[],
  logFile: string,
  env: NodeJS.ProcessEnv,
): Promise<{ child: ChildProcess; pid: number }> {
  const log = openSync(logFile, 'a');
  // When the engine was started, for reading its log: the engine's ENGINE_READY line says when it was ready.
  writeSync(log, `${SPAWN_LINE_PREFIX}${JSON.stringify({ at: Math.round((performance.timeOrigin + performance.now()) * 1000) / 1000 })}\n`);
  const child = spawn(file, args, { detached: true, stdio: ['ignore', log, log], env });
  closeSync(log);
  const pid = await new Promise<number>((resolve, reject) => {
    child.once('spawn', () => resolve(child.pid!));
    child.once('error', (error) =>
      reject(new ReplicaStartError('INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR', `the engine command could not start: ${error.message}`)),
    );
  });
  return { child, pid };
}

/** What a replica's state file (`<dir>/<replicaId>.json`) records of its engine. */
export interface StateFile {
  replicaId: string;
  endpointId: string;
  pid: number;
  address: string;
}

/** An engine as its state file records it. */
export type RecordedEngine = Readonly<StateFile>;

/** The engines recorded under `dir` (an unreadable file is skipped; no directory: none). */
export async function readStateFiles(dir: string): Promise<RecordedEngine[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const found: RecordedEngine[] = [];
  for (const name of names.filter((n) => n.endsWith('.json'))) {
    try {
      found.push(JSON.parse(await readFile(path.join(dir, name), 'utf8')) as StateFile);
    } catch {
      continue;
    }
  }
  return found;
}

/**
 * Whether `pid` is alive and still the replica's engine: a pid may be reused
 * by an unrelated process after the engine died, so on Linux the process must
 * also carry the replica's REPLICA_ID in its environment.
 */
export function replicaProcessAlive(pid: number, replicaId: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`REPLICA_ID=${replicaId}`);
  } catch {
    return process.platform !== 'linux';
  }
}

/** Signals a process's whole group (a replica leads one: it was spawned detached), or the process alone if it leads none. */
export function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  }
}

/** A local replica's locator is its engine's process id. */
export function pidOf(ref: Pick<ReplicaRef, 'locator'>): number | null {
  const pid = Number(ref.locator);
  return ref.locator !== null && Number.isSafeInteger(pid) && pid > 0 ? pid : null;
}
