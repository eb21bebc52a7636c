/**
 * One subscriber's stream of endpoint events: what it missed since `after`,
 * then the live events, in order and without duplicates.
 *
 * Each subscriber holds at most `bufferSize` signals, so a slow one cannot
 * grow memory. Past that, signals are dropped and the subscriber is "behind":
 * a consumer that drains its buffer soon reads the dropped events back from
 * the log (a burst costs nothing), while one that stays behind for longer
 * than `maxLagMs` is cut off with SubscriptionOverflowError, and can resume
 * from the last event it saw.
 */
import type { Sql } from '../storage/database.js';
import { latestEventId, listEvents, type EndpointEventRecord, type EventScope } from '../storage/endpoints-repository.js';

export { latestEventId };
import type { EventHub, LiveSignal } from './event-hub.js';

export class SubscriptionOverflowError extends Error {
  constructor(readonly lastEventId: string) {
    super(`the subscriber fell more than its buffer behind; resubscribe with after: "${lastEventId}"`);
    this.name = 'SubscriptionOverflowError';
  }
}

export type LiveItem = { kind: 'event'; event: EndpointEventRecord } | { kind: 'progress' };

export interface LiveStreamOptions {
  /** Resume after this event id: the missed events come first. */
  after?: string | null;
  /** Signals held for a consumer. @default 1000 */
  bufferSize?: number;
  /** How long a consumer may stay behind its full buffer before it is cut off. @default 5000 */
  maxLagMs?: number;
}

export async function* liveEvents(hub: EventHub, sql: Sql, scope: EventScope, options: LiveStreamOptions = {}): AsyncGenerator<LiveItem> {
  const bufferSize = options.bufferSize ?? 1000;
  const maxLagMs = options.maxLagMs ?? 5000;
  const buffer: LiveSignal[] = [];
  let behindSince: number | null = null;
  let wake: (() => void) | undefined;
  const unsubscribe = hub.subscribe('endpointId' in scope ? { endpointId: scope.endpointId } : { projectId: scope.projectId }, (signal) => {
    if (buffer.length >= bufferSize) behindSince ??= performance.now();
    else buffer.push(signal);
    wake?.();
  });
  // Without `after`, the stream starts now: the newest event so far marks the position.
  let last = options.after ?? (await latestEventId(sql, scope));
  /** The events after `last` read back from the log, advancing `last`. */
  async function* catchUp(): AsyncGenerator<LiveItem> {
    for (const event of await readAll(sql, scope, last)) {
      yield { kind: 'event', event };
      last = event.id;
    }
  }
  try {
    // Subscribed first, then the backlog: anything committed meanwhile is in the buffer, and duplicates are skipped by id.
    yield* catchUp();
    for (;;) {
      if (behindSince !== null && performance.now() - behindSince > maxLagMs) throw new SubscriptionOverflowError(last);
      const signal = buffer.shift();
      if (!signal) {
        if (behindSince !== null) {
          // Caught up with the buffer: what was dropped is read back from the log.
          behindSince = null;
          yield* catchUp();
          continue;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      if (signal.kind === 'progress') {
        yield { kind: 'progress' };
      } else if (signal.kind === 'resync') {
        yield* catchUp();
      } else if (BigInt(signal.event.id) > BigInt(last)) {
        yield signal;
        last = signal.event.id;
      }
    }
  } finally {
    unsubscribe();
  }
}

async function readAll(sql: Sql, scope: EventScope, after: string): Promise<EndpointEventRecord[]> {
  const all: EndpointEventRecord[] = [];
  for (let cursor = after; ; ) {
    const page = await listEvents(sql, scope, cursor, 1000);
    all.push(...page);
    if (page.length < 1000) return all;
    cursor = page[page.length - 1]!.id;
  }
}
