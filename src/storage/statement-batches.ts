/**
 * The controller's most frequent statements, coalesced: a pass's read of its endpoint, a move of a replica's row and
 * a refresh of an endpoint's replica counts, asked for through the pool by many passes and start steps at once, go
 * out as one statement per kind for all those asked within the same turn of the event loop (DataLoader's batching,
 * scheduled after the turn's I/O callbacks, so that the answers read in one turn share the next statement). The
 * busier the controller, the larger the batches: the statements grow with the turns, not with the endpoints.
 *
 * Each answer is what the single statement would have answered: a read is the same read; moves of one replica (or
 * refreshes of one endpoint) asked in the same turn go out in successive statements, in the order asked; a batch of
 * writes that fails for another cause than an outage (a deadlock with another batch, a value the database refuses)
 * goes again write by write, so that a write's failure is its own. Only pool statements are coalesced, never a
 * transaction's (each caller passes the pool).
 */
import DataLoader from 'dataloader';
import type { Sql } from './database.js';
import { isDatabaseUnreachable } from './database-errors.js';
import { refreshReplicaCountsOf, type CountsRefresh, type DesiredCount } from './endpoints-repository.js';
import { readPassStates, type PassState } from './pass-reads.js';
import { markReplicas, type ReplicaMove } from './replicas-repository.js';

/** The most asked for in one statement; more wait for the next. */
const MAX_BATCH = 500;

type Move = ReplicaMove & { id: string };

/** Runs after this turn's I/O callbacks: what they asked joins the batch. */
const afterTurn = (dispatch: () => void) => void setImmediate(dispatch);

export class StatementBatches {
  private readonly passReads: DataLoader<string, PassState | undefined>;
  private readonly moves: DataLoader<Move, boolean>;
  private readonly refreshes: DataLoader<CountsRefresh, boolean>;

  constructor(
    sql: Sql,
    /** Queue counts older than this are a dead process's (see readPassState). */
    queueStaleMs: number,
  ) {
    this.passReads = new DataLoader(
      async (ids) => {
        const states = await readPassStates(sql, ids, queueStaleMs);
        return ids.map((id) => states.get(id));
      },
      { cache: false, maxBatchSize: MAX_BATCH, batchScheduleFn: afterTurn },
    );
    const batched = { cache: false, maxBatchSize: MAX_BATCH, batchScheduleFn: afterTurn } as const;
    this.moves = new DataLoader((moves) => inRounds(moves, async (round) => markReplicas(sql, round)), batched);
    this.refreshes = new DataLoader((asked) => inRounds(asked, async (round) => refreshReplicaCountsOf(sql, round)), batched);
  }

  /** The endpoint's pass state (readPassState), read with the others asked for in this turn. */
  readPassState(endpointId: string): Promise<PassState | undefined> {
    return this.passReads.load(endpointId);
  }

  /** Moves the replica's row as markReplica does, with the other moves asked for in this turn; true when it applied. */
  markReplica(id: string, move: ReplicaMove): Promise<boolean> {
    return this.moves.load({ id, ...move });
  }

  /** Refreshes the endpoint's replica counts as refreshReplicaCounts does, with the others asked for in this turn; true when they changed. */
  refreshCounts(id: string, desired: DesiredCount, cause: string): Promise<boolean> {
    return this.refreshes.load({ id, desired, cause });
  }
}

/**
 * Writes in rounds of distinct ids (an id's second write in the second round, and so on), each round one statement
 * (`write` answers the ids it applied to); the answers in the order asked.
 */
async function inRounds<T extends { id: string }>(
  items: readonly T[],
  write: (round: T[]) => Promise<Set<string>>,
): Promise<(boolean | Error)[]> {
  const rounds: T[][] = [];
  const seen = new Map<string, number>();
  for (const item of items) {
    const round = seen.get(item.id) ?? 0;
    seen.set(item.id, round + 1);
    (rounds[round] ??= []).push(item);
  }
  const answers = new Map<T, boolean | Error>();
  for (const round of rounds) for (const [item, answer] of await applyRound(round, write)) answers.set(item, answer);
  return items.map((item) => answers.get(item)!);
}

/**
 * One statement for the round; when it fails for another cause than an outage (a deadlock with another batch, a
 * value one write carries that the database refuses), each write alone, as the single statements would have gone:
 * a write's failure is its own, never its neighbours'.
 */
async function applyRound<T extends { id: string }>(
  round: T[],
  write: (round: T[]) => Promise<Set<string>>,
): Promise<Map<T, boolean | Error>> {
  try {
    const applied = await write(round);
    return new Map(round.map((item) => [item, applied.has(item.id)]));
  } catch (error) {
    if (round.length === 1 || isDatabaseUnreachable(error)) throw error;
    const alone = await Promise.allSettled(round.map(async (item) => (await write([item])).has(item.id)));
    return new Map(
      round.map((item, i) => {
        const answer = alone[i]!;
        return [item, answer.status === 'fulfilled' ? answer.value : toError(answer.reason)];
      }),
    );
  }
}

const toError = (reason: unknown) => (reason instanceof Error ? reason : new Error(String(reason)));
