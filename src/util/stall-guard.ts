/**
 * A stream's writes to a client that takes nothing: once a write could not be taken at once (the socket's buffers
 * are full), the client has `stallMs` to take it; then the stream is destroyed (its 'close' follows), so that what
 * it holds (a generation slot, a subscription's place) goes back. A client that reads slowly but reads keeps it.
 */
import type { Writable } from 'node:stream';

export interface StallGuard {
  /** After each write: `accepted` is what the write returned. */
  wrote(accepted: boolean): void;
  /** The stream ended: the guard lets go of it. */
  stop(): void;
}

export function stallGuard(out: Writable, stallMs: number): StallGuard {
  let timer: NodeJS.Timeout | undefined;
  const drained = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  out.on('drain', drained);
  return {
    wrote(accepted) {
      if (accepted || timer !== undefined || out.destroyed) return;
      timer = setTimeout(() => out.destroy(), stallMs);
    },
    stop() {
      clearTimeout(timer);
      out.off('drain', drained);
    },
  };
}
