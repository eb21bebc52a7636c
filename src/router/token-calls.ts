/**
 * Tokenize and detokenize calls running at once per endpoint in this process.
 * They take no generation slot, but each runs on the replica's event loop (a
 * 1 MiB prompt takes most of a second), so a key cannot stall an endpoint's
 * streams with many at once.
 */
import { once } from './once.js';

export const MAX_TOKEN_CALLS_PER_ENDPOINT = 4;

export class TokenCallLimit {
  private readonly running = new Map<string, number>();

  constructor(private readonly max = MAX_TOKEN_CALLS_PER_ENDPOINT) {}

  /** A place for one call to the endpoint: the function that gives it back, or undefined when `max` run. */
  enter(endpointId: string): (() => void) | undefined {
    const running = this.running.get(endpointId) ?? 0;
    if (running >= this.max) return undefined;
    this.running.set(endpointId, running + 1);
    return once(() => {
      const left = (this.running.get(endpointId) ?? 1) - 1;
      if (left > 0) this.running.set(endpointId, left);
      else this.running.delete(endpointId);
    });
  }
}
