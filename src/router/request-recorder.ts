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
 */
import { DEFAULTS } from '../defaults.js';
import type { Sql } from '../storage/database.js';
import { databaseFailureOf } from '../storage/database-errors.js';
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
  /** Sees each batch before it is written (in-memory figures: Prometheus). */
  observe?: (batch: readonly RecordedRequest[]) => void;
  /** Called after a batch was written, with the endpoints whose roll-ups changed. */
  onWritten?: (endpointIds: ReadonlySet<string>) => void;
}

export class RequestRecorder {
  private entries: RecordedRequest[] = [];
  private lastRequest = new Map<string, Date>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  private writing = false;
  private readonly maxBuffered: number;
  /** Outcomes dropped because writes fell behind, since start. */
  dropped = 0;
  private droppedUnlogged = 0;

  constructor(
    private readonly sql: Sql,
    intervalMs = 250,
    private readonly log: (message: string, error?: unknown) => void = () => {},
    private readonly options: RecorderOptions = {},
  ) {
    this.maxBuffered = options.maxBuffered ?? DEFAULTS.requestLogBuffer;
    this.timer = setInterval(() => {
      // A write still running keeps its place: the buffer (bounded) waits for the next tick.
      if (!this.writing) void this.flush();
    }, options.intervalMs ?? intervalMs);
    this.timer.unref();
  }

  /** Buffers a request's outcome; never waits. */
  record(entry: RecordedRequest): void {
    if (this.entries.length >= this.maxBuffered) {
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

  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const entries = this.entries;
      const lastRequest = this.lastRequest;
      this.entries = [];
      this.lastRequest = new Map();
      if (this.droppedUnlogged > 0) {
        this.log(`request recording fell behind: ${this.droppedUnlogged} request outcomes dropped (${this.dropped} since start)`);
        this.droppedUnlogged = 0;
      }
      if (entries.length === 0 && lastRequest.size === 0) return;
      this.writing = true;
      try {
        try {
          this.options.observe?.(entries);
        } catch (error) {
          this.log('observing recorded requests failed', error);
        }
        await this.write(entries);
        try {
          await touchEndpoints(this.sql, lastRequest);
        } catch (error) {
          this.log('recording requests failed', error);
        }
      } finally {
        this.writing = false;
      }
    });
    return this.flushing;
  }

  private async write(entries: readonly RecordedRequest[]): Promise<void> {
    if (entries.length === 0) return;
    const served = entries.filter((e) => !e.refused);
    const ids = await this.rowByRowOnFailure(
      served,
      (batch) => insertRequestLog(this.sql, batch.map(withoutExtras)),
      (failed, total, error) => this.log(`recording requests failed (${failed} of ${total})`, error),
    );
    const content: ContentRow[] = [];
    served.forEach((entry, i) => {
      const id = ids[i];
      if (!entry.content || id === undefined) return;
      content.push({
        requestLogId: id,
        endpointId: entry.endpointId,
        versionIndex: entry.content.versionIndex,
        messages: entry.content.messages,
        response: entry.content.response(),
      });
    });
    await this.rowByRowOnFailure(
      content,
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
    const minutes = rollUp(entries);
    try {
      await addMinutes(this.sql, minutes);
      this.options.onWritten?.(new Set(minutes.map((m) => m.endpointId)));
    } catch (error) {
      this.log('recording request metrics failed', error);
    }
  }

  /**
   * Writes `rows` in one statement; if the database refuses the batch (not
   * an outage), writes them again one by one, so that one bad row loses
   * only itself. Returns what `insert` returned for each row (undefined for
   * a row not written), and reports the rows that still failed once.
   */
  private async rowByRowOnFailure<R, T>(
    rows: readonly R[],
    insert: (batch: readonly R[]) => Promise<T[]>,
    report: (failed: number, total: number, error: unknown, lost: R[]) => void,
  ): Promise<(T | undefined)[]> {
    if (rows.length === 0) return [];
    let batchError: unknown;
    try {
      return await insert(rows);
    } catch (error) {
      batchError = error;
    }
    // Only a value the database refuses (SQLSTATE class 22) is one row's fault; anything else (an outage, a timeout,
    // a full disk) would fail every row too, so it is not retried one statement per row.
    if (rows.length === 1 || databaseFailureOf(batchError)?.kind !== 'invalid-data') {
      report(rows.length, rows.length, batchError, [...rows]);
      return [];
    }
    const results: (T | undefined)[] = [];
    const lost: R[] = [];
    let lastError: unknown;
    for (const [i, row] of rows.entries()) {
      try {
        results.push((await insert([row]))[0]);
      } catch (error) {
        results.push(undefined);
        lost.push(row);
        lastError = error;
        // The database went away meanwhile: the rest are lost with it, not tried one by one.
        if (databaseFailureOf(error)?.kind !== 'invalid-data') {
          lost.push(...rows.slice(i + 1));
          break;
        }
      }
    }
    if (lost.length > 0) report(lost.length, rows.length, lastError, lost);
    return results;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

/** The log entry alone (the content and flags stay in memory). */
function withoutExtras(entry: RecordedRequest): RequestLogEntry {
  const { content: _content, refused: _refused, ...logged } = entry;
  return logged;
}
