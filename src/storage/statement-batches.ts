/**
 * The controller's most frequent statements, coalesced: a pass's read of its endpoint and a move of a replica's row,
 * asked for through the pool by many passes and start steps at once, go out as one statement per kind for all those
 * asked within the same turn of the event loop (DataLoader's batching, scheduled after the turn's I/O callbacks, so
 * that the answers read in one turn share the next statement). The busier the controller, the larger the batches:
 * the statements grow with the turns, not with the endpoints.
 *
 * Each answer is what the single statement would have answered: a read is the same read; moves of one replica asked
 * in the same turn go out in successive statements, in the order asked. Only pool statements are coalesced, never a
 * transaction's (each caller passes the pool).
 */
import DataLoader from 'dataloader';
import type { Sql } from './database.js';
import { readPassStates, type PassState } from './pass-reads.js';
import { markReplicas, type ReplicaMove } from './replicas-repository.js';

/** The most asked for in one statement; more wait for the next. */
const MAX_BATCH = 500;

/** SQLSTATE deadlock_detected: two batches met on the same rows in different orders (a move is then sent alone). */
const DEADLOCK = '40P01';

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
  private async applyMoves(moves: readonly Move[]): Promise<boolean[]> {
    const rounds: Move[][] = [];
    const seen = new Map<string, number>();
    for (const move of moves) {
      const round = seen.get(move.id) ?? 0;
      seen.set(move.id, round + 1);
      (rounds[round] ??= []).push(move);
    }
    const applied: Map<Move, boolean> = new Map();
    for (const round of rounds) {
      const ids = await this.applyRound(round);
      for (const move of round) applied.set(move, ids.has(move.id));
    }
    return moves.map((move) => applied.get(move)!);
  }

  private async applyRound(round: Move[]): Promise<Set<string>> {
    try {
      return await markReplicas(this.sql, round);
    } catch (error) {
      if ((error as { code?: string }).code !== DEADLOCK || round.length === 1) throw error;
      // Met another batch on the same rows: each alone, as the single statements would have gone.
      const each = await Promise.all(round.map(async (move) => ((await markReplicas(this.sql, [move])).has(move.id) ? [move.id] : [])));
      return new Set(each.flat());
    }
  }
}
