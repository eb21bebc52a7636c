/**
 * Watch streams of the stand-in's API server: newline-delimited JSON events ({"type","object"}) over a chunked
 * 200 answer, replayed from the store's history after the requested resourceVersion and then live, filtered by the
 * request's selectors the way the watch cache filters them (an object that stops matching is DELETED for that watch,
 * one that starts matching is ADDED). BOOKMARK events when asked for, `timeoutSeconds`, and the 410 Expired answers
 * of a resourceVersion older than the kept history: an in-stream ERROR event, or (test switch) an HTTP 410 Status.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { badRequest, failure, type KubeObject } from './objects.js';
import type { Selector } from './selectors.js';
import type { Change, ObjectStore } from './store.js';

export interface WatchRequest {
  resource: string;
  kind: string;
  namespace?: string;
  selector: Selector;
  query: URLSearchParams;
}

export type ExpiredAnswer = 'event' | 'http';

export class WatchHub {
  private readonly open = new Set<ServerResponse>();
  /** Each open watch's stop of its events and timers, its connection left open (`stall`). */
  private readonly silencers = new Map<ServerResponse, () => void>();
  expiredAnswer: ExpiredAnswer = 'event';
  /** Set by `stall({ untilResumed: true })`: watches opened meanwhile are silent from their start. */
  private stallingNew = false;

  constructor(
    private readonly store: ObjectStore,
    private readonly bookmarkIntervalMs: number,
  ) {}

  get count(): number {
    return this.open.size;
  }

  serve(req: IncomingMessage, res: ServerResponse, watch: WatchRequest): void {
    const { resource, kind, namespace, selector, query } = watch;
    const rvText = query.get('resourceVersion') ?? '';
    const withKind = (object: KubeObject): KubeObject => ({ kind, apiVersion: 'v1', ...object });
    const inScope = (object: KubeObject) => namespace === undefined || object.metadata.namespace === namespace;
    let initial: { type: string; object: KubeObject }[];
    let from: number;
    if (rvText === '' || rvText === '0') {
      from = this.store.resourceVersion;
      initial = this.store
        .list(resource, namespace)
        .filter(selector)
        .map((object) => ({ type: 'ADDED', object }));
    } else {
      if (!/^\d+$/.test(rvText))
        throw badRequest(`resourceVersion: Invalid value: "${rvText}": strconv.ParseUint: parsing "${rvText}": invalid syntax`);
      from = Number(rvText);
      const changes = this.store.changesSince(resource, from);
      if (changes === 'expired') {
        const status = failure(410, 'Expired', `too old resource version: ${from} (${this.store.oldestResourceVersion + 1})`);
        if (this.expiredAnswer === 'http') {
          res.writeHead(410, { 'Content-Type': 'application/json' }).end(JSON.stringify(status));
          return;
        }
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ type: 'ERROR', object: status }) + '\n');
        return;
      }
      initial = changes.flatMap((change) => this.translate(change, selector, inScope));
    }

    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
    res.flushHeaders();
    this.open.add(res);
    if (this.stallingNew) {
      // Opened while watches stall: nothing at all, not even the changes it asked to replay.
      const forget = () => this.open.delete(res);
      res.once('close', forget);
      req.once('close', forget);
      return;
    }
    // Events written in one turn of the event loop go out together, as the API server flushes a watch only once
    // no further event is queued for it.
    let corked = false;
    const send = (type: string, object: KubeObject) => {
      if (!corked) {
        corked = true;
        res.cork();
        setImmediate(() => {
          corked = false;
          res.uncork();
        });
      }
      // Stored objects carry their kind (the API's handlers set it): their stored JSON is sent as it is.
      const text = object.kind === kind && object.apiVersion === 'v1' ? this.store.serialized(object) : JSON.stringify(withKind(object));
      res.write(`{"type":"${type}","object":${text}}\n`);
    };
    for (const event of initial) send(event.type, event.object);
    const unsubscribe = this.store.subscribe(resource, (change) => {
      if (change.rv <= from) return;
      for (const event of this.translate(change, selector, inScope)) send(event.type, event.object);
    });
    const timers: NodeJS.Timeout[] = [];
    if (query.get('allowWatchBookmarks') === 'true') {
      timers.push(
        setInterval(() => {
          res.write(
            JSON.stringify({
              type: 'BOOKMARK',
              object: { kind, apiVersion: 'v1', metadata: { resourceVersion: String(this.store.resourceVersion) } },
            }) + '\n',
          );
        }, this.bookmarkIntervalMs),
      );
    }
    const timeoutSeconds = Number(query.get('timeoutSeconds') ?? '0');
    if (timeoutSeconds > 0) timers.push(setTimeout(() => res.end(), timeoutSeconds * 1000));
    const silence = () => {
      unsubscribe();
      for (const timer of timers) clearTimeout(timer);
    };
    this.silencers.set(res, silence);
    const cleanup = () => {
      silence();
      this.open.delete(res);
      this.silencers.delete(res);
    };
    res.once('close', cleanup);
    req.once('close', cleanup);
  }

  private translate(change: Change, selector: Selector, inScope: (o: KubeObject) => boolean): { type: string; object: KubeObject }[] {
    const now = inScope(change.object) && selector(change.object);
    const before = change.previous !== undefined && inScope(change.previous) && selector(change.previous);
    if (change.type === 'ADDED') return now ? [{ type: 'ADDED', object: change.object }] : [];
    if (change.type === 'DELETED') return before ? [{ type: 'DELETED', object: change.object }] : [];
    if (now && before) return [{ type: 'MODIFIED', object: change.object }];
    if (now) return [{ type: 'ADDED', object: change.object }];
    if (before) return [{ type: 'DELETED', object: change.object }];
    return [];
  }

  /** Destroys every open watch connection (the client sees the stream break). */
  cut(): void {
    for (const res of this.open) res.socket?.destroy();
    this.open.clear();
  }

  /**
   * Every open watch goes silent, its connection kept open: no more events, bookmarks or timeout, as a watch whose
   * connection died without a word (a load balancer that dropped it, a half-open TCP connection) looks to its client.
   * Later watches are served as usual, unless `untilResumed`: then those opened before `resume()` are silent too (a
   * client that was between two watches when the stall began would otherwise open a healthy one).
   */
  stall(options: { untilResumed?: boolean } = {}): void {
    for (const res of this.open) this.silencers.get(res)?.();
    if (options.untilResumed) this.stallingNew = true;
  }

  /** Watches opened from now on are served as usual again; those stalled stay silent. */
  resume(): void {
    this.stallingNew = false;
  }

  /** Ends every watch stream cleanly. */
  close(): void {
    for (const res of this.open) res.end();
    this.open.clear();
  }
}
