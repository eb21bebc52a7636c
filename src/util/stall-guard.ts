/**
 * A stream's writes to a client that takes nothing: once a write could not be taken at once (the socket's buffers
 * are full), the client has `stallMs` to take some of what is pending; then the stream is destroyed (its 'close'
 * follows), so that what it holds (a generation slot, a subscription's place) goes back. A client that reads slowly
 * but reads keeps it. The writer, refused, writes nothing more (a keep-alive comment aside) until 'drain'.
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
  // What is still to send when the wait begins (a response's count includes its socket's): a client that took some of
  // it within stallMs reads, if slowly, and waits again; one that took none is cut.
  const wait = () => {
    const left = out.writableLength;
    timer = setTimeout(() => {
      timer = undefined;
      if (out.destroyed) return;
      if (out.writableLength < left) wait();
      else out.destroy();
    }, stallMs);
  };
  out.on('drain', drained);
  return {
    wrote(accepted) {
      if (accepted || timer !== undefined || out.destroyed) return;
      wait();
    },
    stop() {
      clearTimeout(timer);
      out.off('drain', drained);
    },
  };
}
