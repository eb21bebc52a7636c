/**
 * Records every routed request (time to first token, tokens in and out,
 * duration) and the endpoints' last-request times, off the hot path: a
 * request only appends its outcome to a bounded buffer. A timer takes the
 * buffer as one batch per interval, hands it to the observers (Prometheus,
 * live figures), then writes it: the request log, the captured content of
 * endpoints with content logging on, the per-minute roll-ups, and the
 * last-request times, one statement each. A batch the database refuses for
 * one bad row (a value it cannot store, SQLSTATE class 22) is written again
 * row by row, so that only that row is lost, and logged.
 *
 * While a write is still running, outcomes keep collecting; past
 * `maxBuffered` of them, new ones are dropped and counted (`dropped`), never
 * waited for: a slow database costs samples, not request latency.
 *
 * A database that cannot be reached (an outage, a restart, a failover) loses
 * nothing: what of the batch is not written yet (each outcome remembers which
 * of its rows are) goes back to the front of the buffer, within the same
 * bound, with the last-request times, and is written on a later tick, tried
 * at a growing interval while the database stays away. A statement cut off
 * by the outage may have committed before its answer was lost: its rows are
 * then written twice, the lesser harm than losing them.
 */
import { DEFAULTS } from '../defaults.js';
import type { Sql } from '../storage/database.js';
import { databaseFailureKind, isDatabaseUnreachable } from '../storage/database-errors.js';
import { addMinutes } from '../storage/metrics-repository.js';
import {
  insertContent,
  insertRequestLog,
  touchEndpoints,
  type ContentRow,
  type RequestLogEntry,
} from '../storage/request-log-repository.js';
import type { ContentCapture } from './content-capture.js';
import { rollUp } from './minute-rollup.js';

/** A request's outcome as the router records it: the log entry, and its content when content logging is on. */
export interface RecordedRequest extends RequestLogEntry {
  content?: ContentCapture;
  /** Refused before reaching a replica (400, 429, 503, …): counted in the metrics, not written to the request log. */
  refused?: boolean;
}

export interface RecorderOptions {
  /** How often the buffer is written. @default 250 */
  intervalMs?: number;
  /** Outcomes held at most while writes are behind; past it, new ones are dropped and counted. @default 10000 */
  maxBuffered?: number;
  /**
   * The most bytes of captured content held for outcomes that an outage left unwritten: past it, the content of the
   * newer ones is not written (their request-log rows are), and counted. @default 64 MiB
   */
  maxHeldContentBytes?: number;
  /** Sees each batch before it is written (in-memory figures: Prometheus). */
  observe?: (batch: readonly RecordedRequest[]) => void;
  /** Called after a batch was written, with the endpoints whose roll-ups changed. */
  onWritten?: (endpointIds: ReadonlySet<string>) => void;
}

/** The most content held through an outage (RecorderOptions.maxHeldContentBytes). */
const MAX_HELD_CONTENT_BYTES = 64 * 1024 * 1024;

/** The longest wait between two writes while the database is unreachable: it is back in service within this. */
const MAX_RETRY_DELAY_MS = 5_000;

/** One outcome on its way to the database, and what of it is still to write. */
interface Pending {
  entry: RecordedRequest;
  /** Its request-log row: to write, written (the id its content row refers to), or none (a refused request, a lost row). */
  log: 'todo' | { id: string } | null;
  /** Its captured content is still to write. */
  content: boolean;
  /** Its share of the per-minute roll-ups is still to add. */
  minutes: boolean;
}

/** What became of one row of a batch: written (with what the statement returned for it), lost, or held back (outage). */
type RowOutcome<T> = { written: T | undefined } | 'lost' | 'held';

/** The rows' outcomes, and the outage that held some back, if one did. */
interface BatchOutcome<T> {
  rows: RowOutcome<T>[];
  outage?: { error: unknown };
}

export class RequestRecorder {
  /** Outcomes recorded since the last batch was taken (not yet observed). */
  private entries: RecordedRequest[] = [];
  /** Outcomes observed, but held back by an outage: written before `entries`. */
  private held: Pending[] = [];
  private lastRequest = new Map<string, Date>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  private writing = false;
  private readonly maxBuffered: number;
  private readonly intervalMs: number;
  /** While the database is unreachable: the wait before the next try (doubled each time), and when that is. */
  private retryDelayMs = 0;
  private retryAt = 0;
  /** Outcomes dropped because writes fell behind, since start. */
  dropped = 0;
  /** Captured contents not written because an outage held more than maxHeldContentBytes, since start. */
  contentDropped = 0;
  private droppedUnlogged = 0;

  constructor(
    private readonly sql: Sql,
    intervalMs = 250,
    private readonly log: (message: string, error?: unknown) => void = () => {},
    private readonly options: RecorderOptions = {},
  ) {
    this.maxBuffered = options.maxBuffered ?? DEFAULTS.requestLogBuffer;
    this.intervalMs = options.intervalMs ?? intervalMs;
    this.timer = setInterval(() => {
      // A write still running keeps its place: the buffer (bounded) waits for the next tick; so does a database
      // that was unreachable at the last one, until its retry time.
      if (!this.writing && Date.now() >= this.retryAt) void this.flush();
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Buffers a request's outcome; never waits. */
  record(entry: RecordedRequest): void {
    if (this.held.length + this.entries.length >= this.maxBuffered) {
      this.dropped++;
      this.droppedUnlogged++;
    } else {
      this.entries.push(entry);
    }
    if (!entry.refused) this.seen(entry.endpointId);
  }

  /** A request reached the endpoint (it counts as activity even before it finishes). */
  seen(endpointId: string): void {
    this.lastRequest.set(endpointId, new Date());
  }

  /** Writes what is buffered now (whatever the retry time); what an outage holds back stays buffered. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const fresh = this.entries;
      const pending = [...this.held, ...fresh.map(toPending)];
      const lastRequest = this.lastRequest;
      this.entries = [];
      this.held = [];
      this.lastRequest = new Map();
      if (this.droppedUnlogged > 0) {
        this.log(`request recording fell behind: ${this.droppedUnlogged} request outcomes dropped (${this.dropped} since start)`);
        this.droppedUnlogged = 0;
      }
      if (pending.length === 0 && lastRequest.size === 0) return;
      this.writing = true;
      try {
        try {
          // Observed once: outcomes held back by an outage were observed when they first came.
          this.options.observe?.(fresh);
        } catch (error) {
          this.log('observing recorded requests failed', error);
        }
        const outage = (await this.write(pending)) ?? (await this.touch(lastRequest));
        if (outage) this.holdBack(pending, lastRequest, outage.error);
        else this.resumed();
      } finally {
        this.writing = false;
      }
    });
    return this.flushing;
  }

  /**
   * Writes what each outcome still lacks, stage by stage: its request-log row, then its content (which refers to that
   * row), then the roll-ups. The first stage that finds the database unreachable ends the write (the next stages would
   * only fail too) and is returned; a stage that fails otherwise loses its rows, logged.
   */
  private async write(pending: readonly Pending[]): Promise<{ error: unknown } | undefined> {
    const toLog = pending.filter((p) => p.log === 'todo');
    const logged = await this.rowByRowOnFailure(
      toLog,
      (batch) =>
        insertRequestLog(
          this.sql,
          batch.map((p) => withoutExtras(p.entry)),
        ),
      (failed, total, error) => this.log(`recording requests failed (${failed} of ${total})`, error),
    );
    toLog.forEach((p, i) => {
      const outcome = logged.rows[i]!;
      if (outcome === 'held') return;
      const id = outcome === 'lost' ? undefined : outcome.written;
      p.log = id === undefined ? null : { id };
      if (p.log === null) p.content = false;
    });
    if (logged.outage) return logged.outage;

    const toStore = pending.filter((p) => p.content && typeof p.log === 'object' && p.log !== null);
    const stored = await this.rowByRowOnFailure(
      toStore.map(contentRow),
      async (batch) => (await insertContent(this.sql, batch), []),
      // The statement's parameters hold content: only the message, and the request-log ids of the rows lost, are logged.
      (failed, total, error, lost) => {
        const ids = lost.slice(0, 10).map((r) => r.requestLogId);
        const more = lost.length > ids.length ? ', …' : '';
        this.log(
          `recording content logs failed (${failed} of ${total}; request-log ids ${ids.join(', ')}${more}): ${(error as Error).message}`,
        );
      },
    );
    toStore.forEach((p, i) => {
      if (stored.rows[i] !== 'held') p.content = false;
    });
    if (stored.outage) return stored.outage;

    const toAdd = pending.filter((p) => p.minutes);
    if (toAdd.length === 0) return undefined;
    const minutes = rollUp(toAdd.map((p) => p.entry));
    try {
      await addMinutes(this.sql, minutes);
      this.options.onWritten?.(new Set(minutes.map((m) => m.endpointId)));
    } catch (error) {
      if (isDatabaseUnreachable(error)) return { error };
      this.log('recording request metrics failed', error);
    }
    for (const p of toAdd) p.minutes = false;
    return undefined;
  }

  /** Moves the endpoints' last-request times forward; returns the outage that stopped it, if any. */
  private async touch(lastRequest: ReadonlyMap<string, Date>): Promise<{ error: unknown } | undefined> {
    try {
      await touchEndpoints(this.sql, lastRequest);
    } catch (error) {
      if (isDatabaseUnreachable(error)) return { error };
      this.log('recording requests failed', error);
    }
    return undefined;
  }

  /**
   * Puts back, at the front of the buffer, the outcomes an outage left unwritten and the last-request times not
   * written; outcomes recorded meanwhile past the bound are dropped and counted. The next try waits: twice as long as
   * the last one, from the interval up to MAX_RETRY_DELAY_MS.
   */
  private holdBack(pending: readonly Pending[], lastRequest: ReadonlyMap<string, Date>, error: unknown): void {
    this.held = pending.filter((p) => p.log === 'todo' || p.content || p.minutes);
    // Content is the bulk of what is held (a prompt of up to 1 MiB and its answer each): bounded by bytes, the
    // oldest kept; the newer ones' request-log rows are still written, without their content.
    let contentBytes = 0;
    const maxContent = this.options.maxHeldContentBytes ?? MAX_HELD_CONTENT_BYTES;
    let cut = 0;
    for (const p of this.held) {
      if (!p.content || !p.entry.content) continue;
      contentBytes += p.entry.content.approximateBytes();
      if (contentBytes > maxContent) {
        p.content = false;
        cut++;
      }
    }
    if (cut > 0) {
      this.contentDropped += cut;
      this.log(`request recording holds at most ${maxContent} bytes of content through an outage: ${cut} contents not written`);
    }
    const room = Math.max(0, this.maxBuffered - this.held.length);
    if (this.entries.length > room) {
      const over = this.entries.length - room;
      this.entries.length = room;
      this.dropped += over;
      this.droppedUnlogged += over;
    }
    for (const [id, at] of lastRequest) {
      const later = this.lastRequest.get(id);
      if (later === undefined || later < at) this.lastRequest.set(id, at);
    }
    const first = this.retryDelayMs === 0;
    this.retryDelayMs = Math.min(Math.max(this.intervalMs, this.retryDelayMs * 2), MAX_RETRY_DELAY_MS);
    this.retryAt = Date.now() + this.retryDelayMs;
    // One line per outage, not one per try.
    if (first) {
      this.log(`request recording waits for the database: ${this.held.length} request outcomes held, written once it is back`, error);
    }
  }

  private resumed(): void {
    if (this.retryDelayMs === 0) return;
    this.retryDelayMs = 0;
    this.retryAt = 0;
    this.log('request recording resumed: the request outcomes held while the database was unreachable are written');
  }

  /**
   * Writes `rows` in one statement; if the database refuses the batch (a bad
   * value, not an outage), writes them again one by one, so that one bad row
   * loses only itself. Returns what became of each row, and reports the rows
   * lost, once. Rows an outage stops are held, not lost: not reported.
   */
  private async rowByRowOnFailure<R, T>(
    rows: readonly R[],
    insert: (batch: readonly R[]) => Promise<T[]>,
    report: (failed: number, total: number, error: unknown, lost: R[]) => void,
  ): Promise<BatchOutcome<T>> {
    if (rows.length === 0) return { rows: [] };
    let batchError: unknown;
    try {
      const results = await insert(rows);
      return { rows: rows.map((_, i) => ({ written: results[i] })) };
    } catch (error) {
      batchError = error;
    }
    // Held only while the database cannot be reached: a batch it gave up on while busy (a statement_timeout, a
    // deadlock) is not held for ever, as one that times out every time would be.
    const failure = databaseFailureKind(batchError);
    if (failure === 'unreachable') return { rows: rows.map(() => 'held'), outage: { error: batchError } };
    // Only a value the database refuses (SQLSTATE class 22) is one row's fault; anything else (a timeout, a full
    // disk, a bug) would fail every row too, so it is not retried one statement per row.
    if (rows.length === 1 || failure !== 'invalid-data') {
      report(rows.length, rows.length, batchError, [...rows]);
      return { rows: rows.map(() => 'lost') };
    }
    const outcomes: RowOutcome<T>[] = [];
    const lost: R[] = [];
    let lostError: unknown;
    let outage: { error: unknown } | undefined;
    for (const [i, row] of rows.entries()) {
      let rowError: unknown;
      try {
        outcomes.push({ written: (await insert([row]))[0] });
        continue;
      } catch (error) {
        rowError = error;
      }
      const kind = databaseFailureKind(rowError);
      if (kind === 'invalid-data') {
        outcomes.push('lost');
        lost.push(row);
        lostError = rowError;
        continue;
      }
      // The database went away meanwhile: this row and the rest are held for the next try. Another failure loses
      // them, not tried one by one.
      const rest = rows.slice(i);
      if (kind === 'unreachable') {
        outage = { error: rowError };
        outcomes.push(...rest.map(() => 'held' as const));
      } else {
        outcomes.push(...rest.map(() => 'lost' as const));
        lost.push(...rest);
        lostError = rowError;
      }
      break;
    }
    if (lost.length > 0) report(lost.length, rows.length, lostError, lost);
    return outage ? { rows: outcomes, outage } : { rows: outcomes };
  }

  /** Stops the timer and writes what is buffered; what a database still unreachable holds back is lost, and logged. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    const unwritten = this.held.length + this.entries.length;
    if (unwritten > 0) this.log(`request recording closed with ${unwritten} request outcomes unwritten: the database is unreachable`);
  }
}

function toPending(entry: RecordedRequest): Pending {
  return { entry, log: entry.refused ? null : 'todo', content: !entry.refused && entry.content !== undefined, minutes: true };
}

/** The content row of an outcome whose request-log row is written. */
function contentRow(p: Pending): ContentRow {
  const content = p.entry.content!;
  return {
    requestLogId: (p.log as { id: string }).id,
    endpointId: p.entry.endpointId,
    versionIndex: content.versionIndex,
    messages: content.messages,
    response: content.response(),
  };
}

/** The log entry alone (the content and flags stay in memory). */
function withoutExtras(entry: RecordedRequest): RequestLogEntry {
  const { content: _content, refused: _refused, ...logged } = entry;
  return logged;
}
