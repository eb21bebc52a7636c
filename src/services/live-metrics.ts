/**
 * Live figures of the current minute, for `endpointMetrics` subscribers.
 * The roll-ups are the source (every gateway process adds to them), read
 * once for all the subscribed endpoints: at once when this process wrote a
 * batch for one of them, and every `pollMs` otherwise (other processes'
 * writes, the minute turning over). A subscriber gets the figures when they
 * differ from what it last got.
 */
import type { MinuteSums } from '../storage/metrics-repository.js';
import { figuresOf, type MetricFigures } from './metrics-figures.js';

export interface MinuteFigures {
  endpointId: string;
  minute: Date;
  figures: MetricFigures;
}

type Listener = (figures: MinuteFigures) => void;

interface Watch {
  listeners: Set<Listener>;
  last: string;
  latest?: MinuteFigures;
}

export class LiveMetrics {
  private readonly watches = new Map<string, Watch>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly read: (endpointIds: string[], minute: Date) => Promise<(MinuteSums & { endpoint_id: string })[]>,
    private readonly pollMs = 1000,
  ) {}

  /** Calls `listener` with the current minute's figures now and whenever they change; returns the unsubscribe. */
  subscribe(endpointId: string, listener: Listener): () => void {
    let watch = this.watches.get(endpointId);
    if (!watch) this.watches.set(endpointId, (watch = { listeners: new Set(), last: '' }));
    watch.listeners.add(listener);
    // A new subscriber gets the figures last read at once (then any change).
    const latest = watch.latest;
    if (latest) queueMicrotask(() => listener(latest));
    if (!this.timer) {
      this.timer = setInterval(() => void this.refresh(), this.pollMs);
      this.timer.unref();
    }
    void this.refresh();
    return () => {
      watch.listeners.delete(listener);
      if (watch.listeners.size === 0 && this.watches.get(endpointId) === watch) this.watches.delete(endpointId);
      if (this.watches.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** This process wrote roll-ups of these endpoints. */
  changed(endpointIds: ReadonlySet<string>): void {
    for (const id of endpointIds) {
      if (this.watches.has(id)) {
        void this.refresh();
        return;
      }
    }
  }

  private refresh(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        const ids = [...this.watches.keys()];
        if (ids.length === 0) break;
        const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000);
        let rows: (MinuteSums & { endpoint_id: string })[];
        try {
          rows = await this.read(ids, minute);
        } catch {
          break; // the next poll tries again
        }
        const byId = new Map(rows.map((r) => [r.endpoint_id, r]));
        for (const id of ids) {
          const watch = this.watches.get(id);
          if (!watch) continue;
          const figures = figuresOf(byId.get(id), 60);
          const key = `${minute.getTime()}:${JSON.stringify(figures)}`;
          if (key === watch.last) continue;
          watch.last = key;
          watch.latest = { endpointId: id, minute, figures };
          for (const listener of watch.listeners) listener(watch.latest);
        }
      } while (this.again);
    })().finally(() => (this.reading = undefined));
    return this.reading;
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.watches.clear();
  }
}
