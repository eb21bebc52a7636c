/**
 * The local runtime's processes: whether a replica's engine process is alive
 * (and still the replica's, not a reused pid), signalling its process group,
 * reading a local replica's locator (its process id), and the state files
 * that record the engines a local runtime started.
 */
import { readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ReplicaRef } from './runtime.js';

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
