/**
 * Fans endpoint events out to this process's subscribers. Every writer's
 * event insert is announced by a PostgreSQL trigger (NOTIFY with ids only),
 * so a subscriber here sees changes made by any gateway process. One LISTEN
 * connection per process; each announced event row is read once, however
 * many subscribers want it, and dispatched in id (commit) order.
 */
import { LRUCache } from 'lru-cache';
import type { EndpointEventRecord, EndpointRecord, EventScope } from '../domain/endpoint.js';
import type { Sql } from '../storage/database.js';
import { findEndpoints } from '../storage/endpoints-repository.js';
import { findEvents } from '../storage/events-repository.js';
import { LiveEventStream, type LiveStreamOptions } from './event-stream.js';

export type LiveSignal =
  | { kind: 'event'; event: EndpointEventRecord }
  /**
   * The model download of this endpoint advanced (progress writes no event). `seq` numbers the announcements this
   * hub has received, each once for all its subscribers: the version of the endpoint's snapshot for this moment.
   */
  | { kind: 'progress'; endpointId: string; seq: number }
  /** The LISTEN connection was re-established: events may have been missed, read them back. */
  | { kind: 'resync' };

/** The snapshot version of a progress announcement (never an event id, which is all digits). */
export function progressVersion(seq: number): string {
  return `progress:${seq}`;
}

export interface LiveFilter {
  endpointId?: string;
  projectId?: string;
}

interface Subscriber {
  filter: LiveFilter;
  listener: (signal: LiveSignal) => void;
}

export class EventHub {
  private readonly subscribers = new Set<Subscriber>();
  private pending: { id: string; endpointId: string; projectId: string }[] = [];
  private draining: Promise<void> = Promise.resolve();
  private scheduled = false;
  private listening: { unlisten(): Promise<void> }[] = [];
  private started = false;
  /** The download progress announcements received so far (the last one's `seq`). */
  private progressSeq = 0;
  /** One read of an endpoint per change, shared by every subscriber that shows it. */
  private readonly snapshots = new LRUCache<
    string,
    { version: string; value: Promise<EndpointRecord | undefined> | EndpointRecord | undefined }
  >({ max: 10_000 });

  constructor(
    private readonly sql: Sql,
    private readonly log: (message: string, error?: unknown) => void = () => {},
  ) {}

  /** One subscriber's stream of the scope's events: what it missed since `after`, then the live ones (see event-stream.ts). */
  stream(scope: EventScope, options: LiveStreamOptions = {}): LiveEventStream {
    return new LiveEventStream(this, this.sql, scope, options);
  }

  async start(): Promise<void> {
    const onListen = () => {
      // The first listen is the start; later ones are reconnections after which events may be missing.
      if (this.started) this.broadcast({ kind: 'resync' });
    };
    this.listening.push(await this.sql.listen('endpoint_events', (payload) => this.onEvent(payload), onListen));
    this.listening.push(await this.sql.listen('endpoint_progress', (endpointId) => this.onProgress(endpointId)));
    this.started = true;
  }

  async close(): Promise<void> {
    await Promise.all(this.listening.map((l) => l.unlisten().catch(() => {})));
    this.listening = [];
    this.subscribers.clear();
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  subscribe(filter: LiveFilter, listener: (signal: LiveSignal) => void): () => void {
    const subscriber = { filter, listener };
    this.subscribers.add(subscriber);
    return () => this.subscribers.delete(subscriber);
  }

  /**
   * The endpoint as of `version`: read once for all subscribers, and handed
   * out without a promise once it is read. A version names one moment in this
   * hub, the same for every subscriber: an event's id, or a progress
   * announcement's `seq` (`progressVersion`). A version a subscriber counted
   * for itself would name different moments for different subscribers, and
   * hand one of them a snapshot another cached long before.
   */
  snapshot(endpointId: string, version: string): Promise<EndpointRecord | undefined> | EndpointRecord | undefined {
    const cached = this.snapshots.get(endpointId);
    if (cached && cached.version === version) return cached.value;
    // Deleted endpoints included: the last update a subscriber gets is the deletion's.
    const entry: { version: string; value: Promise<EndpointRecord | undefined> | EndpointRecord | undefined } = {
      version,
      value: undefined,
    };
    const value = findEndpoints(this.sql, [endpointId], { includeDeleted: true }).then(([endpoint]) => {
      entry.value = endpoint;
      return endpoint;
    });
    entry.value = value;
    this.snapshots.set(endpointId, entry);
    return value;
  }

  private wants(subscriber: Subscriber, endpointId: string, projectId?: string): boolean {
    const { filter } = subscriber;
    return (
      (filter.endpointId === undefined || filter.endpointId === endpointId) &&
      (filter.projectId === undefined || filter.projectId === projectId)
    );
  }

  private onEvent(payload: string): void {
    const [id, endpointId, projectId] = payload.split(':');
    if (!id || !endpointId || !projectId) return;
    if (![...this.subscribers].some((s) => this.wants(s, endpointId, projectId))) return;
    this.pending.push({ id, endpointId, projectId });
    if (this.scheduled) return;
    this.scheduled = true;
    // Announcements that arrive together are read with one statement, in order.
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.pending;
      this.pending = [];
      this.draining = this.draining.then(() => this.dispatch(batch));
    });
  }

  private async dispatch(batch: { id: string }[]): Promise<void> {
    try {
      const events = await findEvents(
        this.sql,
        batch.map((b) => b.id),
      );
      for (const event of events) {
        for (const subscriber of this.subscribers) {
          if (this.wants(subscriber, event.endpointId, event.projectId)) subscriber.listener({ kind: 'event', event });
        }
      }
    } catch (error) {
      this.log('reading announced events failed; subscribers resync', error);
      this.broadcast({ kind: 'resync' });
    }
  }

  /**
   * Every gateway's hub hears each announcement (a NOTIFY, whichever process
   * wrote the progress) and numbers it itself: the numbers need only be unique
   * within this hub, as its snapshots are.
   */
  private onProgress(endpointId: string): void {
    const signal: LiveSignal = { kind: 'progress', endpointId, seq: ++this.progressSeq };
    for (const subscriber of this.subscribers) {
      if (subscriber.filter.endpointId === endpointId) subscriber.listener(signal);
    }
  }

  private broadcast(signal: LiveSignal): void {
    for (const subscriber of this.subscribers) subscriber.listener(signal);
  }
}
