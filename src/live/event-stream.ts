/**
 * One subscriber's stream of endpoint events: what it missed since `after`,
 * then the live events, in order and without duplicates.
 *
 * Each subscriber holds at most `bufferSize` signals, so a slow one cannot
 * grow memory. Past that, signals are dropped and the subscriber is "behind":
 * a consumer that drains its buffer soon reads the dropped events back from
 * the log (a burst costs nothing), while one that stays behind for longer
 * than `maxLagMs` is cut off with SubscriptionOverflowError, and can resume
 * from the last event it saw. What it reads back from the log (since `after`,
 * or what was dropped) is held a page at a time: the next page is read once
 * the last is delivered, so however far back `after` reaches, a subscriber
 * holds one page.
 */
import { DEFAULTS } from '../defaults.js';
import type { EndpointEventRecord, EventScope } from '../domain/endpoint.js';
import type { Sql } from '../storage/database.js';
import { latestEventId, listEvents } from '../storage/events-repository.js';
import type { EventHub, LiveSignal } from './event-hub.js';

export class SubscriptionOverflowError extends Error {
  constructor(readonly lastEventId: string) {
    super(`the subscriber fell more than its buffer behind; resubscribe with after: "${lastEventId}"`);
    this.name = 'SubscriptionOverflowError';
  }
}

/** A progress item carries its announcement's `seq` (see `LiveSignal`). */
export type LiveItem = { kind: 'event'; event: EndpointEventRecord } | { kind: 'progress'; seq: number };

export interface LiveStreamOptions {
  /** Resume after this event id: the missed events come first. */
  after?: string | null;
  /** Signals held for a consumer. @default 1000 */
  bufferSize?: number;
  /** How long a consumer may stay behind its full buffer before it is cut off. @default 5000 */
  maxLagMs?: number;
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/** Events read back from the log at once. */
const BACKLOG_PAGE = 1000;

/** Whether event id `a` comes after `b` (both decimal strings of a bigint, without leading zeros). */
function isAfter(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b;
}

/**
 * One subscriber's live events, as an async iterator. Not a generator: a
 * generator suspended at an `await` runs its `finally` only at its next
 * `yield`, so a subscriber that went away would stay subscribed (and keep its
 * socket in memory) until its endpoint next changed. `return()` here
 * unsubscribes at once.
 */
export class LiveEventStream implements AsyncIterableIterator<LiveItem> {
  private readonly bufferSize: number;
  private readonly maxLagMs: number;
  private readonly buffer: LiveSignal[] = [];
  /** Events read back from the log (a page), delivered before the buffer. */
  private backlog: EndpointEventRecord[] = [];
  private backlogAt = 0;
  /** Whether the log may hold more to read back after the page held (it was full). */
  private backlogMore = false;
  private behindSince: number | null = null;
  private wake: (() => void) | undefined;
  private last: string | null;
  private started = false;
  private closed = false;
  private readonly unsubscribe: () => void;

  constructor(
    hub: EventHub,
    private readonly sql: Sql,
    private readonly scope: EventScope,
    options: LiveStreamOptions = {},
  ) {
    this.bufferSize = options.bufferSize ?? DEFAULTS.subscriptionBuffer;
    this.maxLagMs = options.maxLagMs ?? DEFAULTS.subscriptionMaxLagMs;
    this.last = options.after ?? null;
    // Subscribed first, then the backlog is read: anything committed meanwhile is in the buffer, and duplicates are skipped by id.
    this.unsubscribe = hub.subscribe('endpointId' in scope ? { endpointId: scope.endpointId } : { projectId: scope.projectId }, (signal) =>
      this.onSignal(signal),
    );
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private onSignal(signal: LiveSignal): void {
    if (this.buffer.length >= this.bufferSize) this.behindSince ??= performance.now();
    else this.buffer.push(signal);
    this.wake?.();
  }

  /** Reads a page of the events after the position from the log; they come next, and the following page after them. */
  private async readBack(): Promise<void> {
    this.backlog = await listEvents(this.sql, this.scope, this.last!, BACKLOG_PAGE);
    this.backlogAt = 0;
    this.backlogMore = this.backlog.length === BACKLOG_PAGE;
  }

  async next(): Promise<IteratorResult<LiveItem>> {
    if (!this.started) {
      this.started = true;
      // Without `after`, the stream starts now: the newest event so far marks the position.
      this.last ??= await latestEventId(this.sql, this.scope);
      await this.readBack();
    }
    for (;;) {
      if (this.closed) return DONE;
      if (this.backlogAt < this.backlog.length) {
        const event = this.backlog[this.backlogAt++]!;
        if (this.backlogAt === this.backlog.length) {
          this.backlog = [];
          this.backlogAt = 0;
        }
        this.last = event.id;
        return { done: false, value: { kind: 'event', event } };
      }
      if (this.backlogMore) {
        // The page delivered was full: the next one, from the last event delivered.
        await this.readBack();
        continue;
      }
      if (this.behindSince !== null && performance.now() - this.behindSince > this.maxLagMs) {
        this.close();
        throw new SubscriptionOverflowError(this.last!);
      }
      const signal = this.buffer.shift();
      if (!signal) {
        if (this.behindSince !== null) {
          // Caught up with the buffer: what was dropped is read back from the log.
          this.behindSince = null;
          await this.readBack();
          continue;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      if (signal.kind === 'progress') return { done: false, value: { kind: 'progress', seq: signal.seq } };
      if (signal.kind === 'resync') {
        await this.readBack();
      } else if (isAfter(signal.event.id, this.last!)) {
        this.last = signal.event.id;
        return { done: false, value: signal };
      }
    }
  }

  /** Unsubscribes at once; a pending `next()` resolves done. */
  return(): Promise<IteratorResult<LiveItem>> {
    this.close();
    return Promise.resolve(DONE);
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    this.buffer.length = 0;
    this.backlog = [];
    this.backlogMore = false;
    this.wake?.();
  }
}
