/**
 * The replica states as SQL lists, written once from the domain's (src/domain/replica.ts): live (STARTING, READY,
 * DRAINING: the replica holds its GPUs) and ended (STOPPED, FAILED). They go into statements as literals, not as
 * parameters, so that the planner matches the partial indexes whose predicates list them the same way
 * (`replicas_live_idx`, `replicas_node_idx`, `replicas_ended_idx` in db/); test/storage/replica-history.test.ts
 * reads the plans.
 */
import { LIVE_REPLICA_STATES, REPLICA_STATES, type ReplicaState } from '../domain/replica.js';

const sqlList = (states: readonly ReplicaState[]) => `(${states.map((state) => `'${state}'`).join(', ')})`;

/** `('STARTING', 'READY', 'DRAINING')` */
export const LIVE_STATES = sqlList(LIVE_REPLICA_STATES);
/** `('STOPPED', 'FAILED')` */
export const ENDED_STATES = sqlList(REPLICA_STATES.filter((state) => !LIVE_REPLICA_STATES.includes(state)));
