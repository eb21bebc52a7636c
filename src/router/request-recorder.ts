/**
 * Records every routed request (time to first token, tokens in and out,
 * duration) and the endpoints' last-request times, in batches off the hot
 * path: a flush per interval, one statement for each.
 */
import type { Sql } from '../storage/database.js';
import { insertRequestLog, touchEndpoints, type RequestLogEntry } from '../storage/request-log-repository.js';

export class RequestRecorder {
  private entries: RequestLogEntry[] = [];
  private lastRequest = new Map<string, Date>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly sql: Sql,
    intervalMs = 250,
    private readonly log: (message: string, error?: unknown) => void = () => {},
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  record(entry: RequestLogEntry): void {
    this.entries.push(entry);
    this.seen(entry.endpointId);
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
      try {
        await insertRequestLog(this.sql, entries);
        await touchEndpoints(this.sql, lastRequest);
      } catch (error) {
        this.log('recording requests failed', error);
      }
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
