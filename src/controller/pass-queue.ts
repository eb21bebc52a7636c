/**
 * The reconcile loop's passes waiting for one of its slots: a pass a change
 * asked for (a poke: urgent) starts before the passes the interval brings
 * (routine), each lane in the order queued, so that a change is acted on at
 * once even while a thousand endpoints' routine passes wait. A routine pass
 * still waiting when its endpoint is poked is made urgent (it has not read
 * the endpoint yet: it sees the change).
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

export class PassQueue {
  private active = 0;
  private readonly urgent = new Lane();
  private readonly routine = new Lane();
  /** Passes queued and not started, by endpoint. */
  private readonly waiting = new Map<string, Waiting>();

  constructor(private readonly concurrency: number) {}

  /** Queues the pass of `id`; it starts when a slot is free, urgent ones first. Settles as `work` does. */
  add<T>(id: string, urgent: boolean, work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Waiting = { id, run: () => work().then(resolve, reject), started: false };
      if (this.active < this.concurrency) return this.start(entry);
      this.waiting.set(id, entry);
      (urgent ? this.urgent : this.routine).push(entry);
    });
  }

  /** Makes the waiting pass of `id` urgent; false when none waits (it has started, or none was queued). */
  hurry(id: string): boolean {
    const entry = this.waiting.get(id);
    if (!entry) return false;
    // Queued in both lanes now: it starts once, from whichever it is taken first.
    this.urgent.push(entry);
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
      const entry = this.urgent.take() ?? this.routine.take();
      if (!entry) return;
      if (!entry.started) this.start(entry);
    }
  }
}
