/**
 * The local runtime's processes: whether a replica's engine process is alive
 * (and still the replica's, not a reused pid), signalling its process group,
 * and reading a local replica's locator (its process id).
 */
import { readFileSync } from 'node:fs';
import type { ReplicaRef } from './runtime.js';

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
