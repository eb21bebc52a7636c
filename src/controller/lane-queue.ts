/**
 * Work waiting for one of a few slots, in lanes: a lane's work starts before any of the lanes after it, each lane in
 * the order queued. The reconcile loop's passes: a pass a change asked for (a poke), or an endpoint's first since this
 * process took it, before the passes the interval brings, so that a change is acted on at once even while a
 * thousand endpoints' routine passes wait; a routine pass still waiting when its endpoint is poked is made urgent (it
 * has not read the endpoint yet: it sees the change). The start steps: the placements of endpoints' first replicas
 * and the warm-ups, then the placements of the others.
 */

interface Waiting {
  id: string;
  run: () => Promise<void>;
  started: boolean;
}

/** A first-in, first-out lane (taking from its head costs nothing, unlike Array.shift on a long array). */
class Lane {
  private items: Waiting[] = [];
  private head = 0;

  push(item: Waiting): void {
    this.items.push(item);
  }

  take(): Waiting | undefined {
    if (this.head === this.items.length) return undefined;
    const item = this.items[this.head++];
    if (this.head === this.items.length) [this.items, this.head] = [[], 0];
    return item;
  }
}

export class LaneQueue {
  private active = 0;
  private readonly lanes: Lane[];
  /** Work queued and not started, by id. */
  private readonly waiting = new Map<string, Waiting>();

  /** `concurrency` slots; `lanes` lanes, numbered from 0 (the first served). */
  constructor(
    private readonly concurrency: number,
    lanes = 2,
  ) {
    this.lanes = Array.from({ length: lanes }, () => new Lane());
  }

  /** Queues the work of `id` in `lane`; it starts when a slot is free, the lower lanes' first. Settles as `work` does. */
  add<T>(id: string, lane: number, work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Waiting = { id, run: () => work().then(resolve, reject), started: false };
      if (this.active < this.concurrency) return this.start(entry);
      this.waiting.set(id, entry);
      this.lanes[Math.min(Math.max(0, lane), this.lanes.length - 1)]!.push(entry);
    });
  }

  /** Moves the waiting work of `id` to the first lane; false when none waits (it has started, or none was queued). */
  hurry(id: string): boolean {
    const entry = this.waiting.get(id);
    if (!entry) return false;
    // Queued in two lanes now: it starts once, from whichever it is taken first.
    this.lanes[0]!.push(entry);
    return true;
  }

  private start(entry: Waiting): void {
    entry.started = true;
    this.waiting.delete(entry.id);
    this.active++;
    void entry.run().finally(() => {
      this.active--;
      this.next();
    });
  }

  private next(): void {
    while (this.active < this.concurrency) {
      const entry = this.take();
      if (!entry) return;
      if (!entry.started) this.start(entry);
    }
  }

  private take(): Waiting | undefined {
    for (const lane of this.lanes) {
      const entry = lane.take();
      if (entry) return entry;
    }
    return undefined;
  }
}
