/**
 * The replica's lifecycle, as a table: which state a replica may move to
 * from which. Every write of a replica's state names the states it may come
 * from, so that of two writers acting on the same snapshot (a controller
 * that found the engine dead, another that stopped it) only the first
 * applies, and a finished replica (STOPPED, FAILED) never comes back.
 *
 *   STARTING ─▶ READY ─▶ DRAINING ─▶ STOPPED
 *      │          │         │
 *      └──────────┴─────────┴──────▶ STOPPED | FAILED
 */
import type { ReplicaState } from './replica.js';

const ALLOWED: Record<ReplicaState, readonly ReplicaState[]> = {
  STARTING: ['READY', 'DRAINING', 'STOPPED', 'FAILED'],
  READY: ['DRAINING', 'STOPPED', 'FAILED'],
  DRAINING: ['STOPPED', 'FAILED'],
  STOPPED: [],
  FAILED: [],
};

/** Whether a replica may move from `from` to `to`. */
export function canMoveReplica(from: ReplicaState, to: ReplicaState): boolean {
  return ALLOWED[from].includes(to);
}

/** The states a replica may be in for a move to `to` to apply. */
export function replicaStatesBefore(to: ReplicaState): ReplicaState[] {
  return (Object.keys(ALLOWED) as ReplicaState[]).filter((from) => ALLOWED[from].includes(to));
}
