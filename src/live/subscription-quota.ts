/**
 * How many subscriptions (SSE streams, and operations on WebSockets) one API
 * key holds open in this process at once. Each costs memory for as long as it
 * is open (about 25 KB), so one key cannot hold an unbounded share: past the
 * quota a new one is refused with RESOURCE_EXHAUSTED, and the key's others go
 * on. Per process, like the per-socket cap: N gateways allow N times as many.
 */
export class SubscriptionQuota {
  private readonly held = new Map<string, number>();

  constructor(readonly perKey: number) {}

  /** The message a refused subscription gets. */
  get refusal(): string {
    return `too many subscriptions open with this API key: at most ${this.perKey} at once; end one first`;
  }

  /** Takes one of `keyId`'s places; undefined when it holds all of them. The release is idempotent. */
  take(keyId: string): (() => void) | undefined {
    const count = this.held.get(keyId) ?? 0;
    if (count >= this.perKey) return undefined;
    this.held.set(keyId, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.held.get(keyId) ?? 1) - 1;
      if (left === 0) this.held.delete(keyId);
      else this.held.set(keyId, left);
    };
  }
}
