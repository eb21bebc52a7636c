/**
 * A wait that can be cut short: `poke` ends the current wait, or the next one
 * at once when none is running (a poke is never lost). The controller's loop,
 * a starting replica's health checks and a chat request held for a waking
 * endpoint all wait this way.
 */
export class Nudge {
  private pending = false;
  private wakeUp: (() => void) | undefined;

  poke(): void {
    if (this.wakeUp) this.wakeUp();
    else this.pending = true;
  }

  /** Forgets a poke that came before now (work about to start covers it). */
  clear(): void {
    this.pending = false;
  }

  /** Resolves after `ms`, at the next poke, or when `abort` fires, whichever comes first. */
  wait(ms: number, abort?: AbortSignal): Promise<void> {
    if (this.pending || abort?.aborted) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        abort?.removeEventListener('abort', done);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      abort?.addEventListener('abort', done, { once: true });
      this.wakeUp = done;
    });
  }
}
