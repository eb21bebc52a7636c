/**
 * The controller's most frequent statements, coalesced: a pass's read of its endpoint and a move of a replica's row,
 * asked for through the pool by many passes and start steps at once, go out as one statement per kind for all those
 * asked within the same turn of the event loop (DataLoader's batching, scheduled after the turn's I/O callbacks, so
 * that the answers read in one turn share the next statement). The busier the controller, the larger the batches:
 * the statements grow with the turns, not with the endpoints.
 *
 * Each answer is what the single statement would have answered: a read is the same read; moves of one replica asked
 * in the same turn go out in successive statements, in the order asked; a batch of moves that fails for another cause
 * than an outage (a deadlock with another batch, a value the database refuses) goes again move by move, so that a
 * move's failure is its own. Only pool statements are coalesced, never a transaction's (each caller passes the pool).
 */
import DataLoader from 'dataloader';
import type { Sql } from './database.js';
import { isDatabaseUnavailable } from './database-errors.js';
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

  constructor(
    private readonly sql: Sql,
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
    this.moves = new DataLoader((moves) => this.applyMoves(moves), { cache: false, maxBatchSize: MAX_BATCH, batchScheduleFn: afterTurn });
  }

  /** The endpoint's pass state (readPassState), read with the others asked for in this turn. */
  readPassState(endpointId: string): Promise<PassState | undefined> {
    return this.passReads.load(endpointId);
  }

  /** Moves the replica's row as markReplica does, with the other moves asked for in this turn; true when it applied. */
  markReplica(id: string, move: ReplicaMove): Promise<boolean> {
    return this.moves.load({ id, ...move });
  }

  /** The moves in rounds of distinct replicas (a replica's second move in the second round, and so on), in order. */
  private async applyMoves(moves: readonly Move[]): Promise<(boolean | Error)[]> {
    const rounds: Move[][] = [];
    const seen = new Map<string, number>();
    for (const move of moves) {
      const round = seen.get(move.id) ?? 0;
      seen.set(move.id, round + 1);
      (rounds[round] ??= []).push(move);
    }
    const answers = new Map<Move, boolean | Error>();
    for (const round of rounds) for (const [move, answer] of await this.applyRound(round)) answers.set(move, answer);
    return moves.map((move) => answers.get(move)!);
  }

  /**
   * One statement for the round; when it fails for another cause than an outage (a deadlock with another batch, a
   * value one move carries that the database refuses), each move alone, as the single statements would have gone:
   * a move's failure is its own, never its neighbours'.
   */
  private async applyRound(round: Move[]): Promise<Map<Move, boolean | Error>> {
    try {
      const applied = await markReplicas(this.sql, round);
      return new Map(round.map((move) => [move, applied.has(move.id)]));
    } catch (error) {
      if (round.length === 1 || isDatabaseUnavailable(error)) throw error;
      const alone = await Promise.allSettled(round.map(async (move) => (await markReplicas(this.sql, [move])).has(move.id)));
      return new Map(
        round.map((move, i) => {
          const answer = alone[i]!;
          return [move, answer.status === 'fulfilled' ? answer.value : toError(answer.reason)];
        }),
      );
    }
  }
}

const toError = (reason: unknown) => (reason instanceof Error ? reason : new Error(String(reason)));
