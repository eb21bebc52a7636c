/**
 * How many subscriptions (SSE streams, and operations on WebSockets) one user
 * holds open in this process at once, over all their API keys (a user can
 * make keys at will, so a cap per key would be none). Each costs memory for
 * as long as it is open (about 25 KB), so one user cannot hold an unbounded
 * share: past the quota a new one is refused with RESOURCE_EXHAUSTED, and the
 * user's others go on. Per process, like the per-socket cap: N gateways allow
 * N times as many.
 */
export class SubscriptionQuota {
  private readonly held = new Map<string, number>();

  constructor(
    readonly perUser: number,
    /** What is counted, as the refusal names it. */
    private readonly what = 'subscriptions',
  ) {}

  /** The message a refused one gets. */
  get refusal(): string {
    return `too many ${this.what} open for this user (all their API keys): at most ${this.perUser} at once; end one first`;
  }

  /** Takes one of the user's places; undefined when they hold all of them. The release is idempotent. */
  take(userId: string): (() => void) | undefined {
    const count = this.held.get(userId) ?? 0;
    if (count >= this.perUser) return undefined;
    this.held.set(userId, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.held.get(userId) ?? 1) - 1;
      if (left === 0) this.held.delete(userId);
      else this.held.set(userId, left);
    };
  }
}
