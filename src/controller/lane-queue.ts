/**
 * Work waiting for one of a few slots, in lanes: a lane's work starts before any of the lanes after it, each lane in
 * the order queued. The reconcile loop's passes: a pass a user's action asked for (an API write's poke) first, then
 * those the controller's own changes asked for (a start step that ended, a Pod that changed) and each endpoint's
 * first since this process took it, then the passes the interval brings, so that a change is acted on at once even
 * while a thousand endpoints' routine passes wait; a pass still waiting when its endpoint is poked is moved up (it has
 * not read the endpoint yet: it sees the change). The start steps: the placements of endpoints' first replicas
 * and the warm-ups, then the placements of the others.
 */

interface Waiting {
  id: string;
  run: () => Promise<void>;
  started: boolean;
  /** The first lane it is queued in. */
  lane: number;
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

  /**
   * Queues the work of `id` in `lane`; it starts when a slot is free, the lower lanes' first. Settles as `work` does
   * (a synchronous throw included). One piece of work per id waits at a time (the callers queue an id again only
   * once its work has started).
   */
  add<T>(id: string, lane: number, work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const clamped = Math.min(Math.max(0, lane), this.lanes.length - 1);
      const entry: Waiting = { id, run: () => Promise.resolve().then(work).then(resolve, reject), started: false, lane: clamped };
      if (this.active < this.concurrency) return this.start(entry);
      this.waiting.set(id, entry);
      this.lanes[clamped]!.push(entry);
    });
  }

  /**
   * Moves the waiting work of `id` up to `lane` (the first by default); false when none waits (it has started, or none
   * was queued). Work already in that lane or a lower one stays where it is.
   */
  hurry(id: string, lane = 0): boolean {
    const entry = this.waiting.get(id);
    if (!entry) return false;
    if (lane >= entry.lane) return true;
    // Queued in two lanes now: it starts once, from whichever it is taken first.
    entry.lane = lane;
    this.lanes[lane]!.push(entry);
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
