/**
 * The back-off of an endpoint's placements after outages. A placement that meets an outage (the runtime's API server
 * down or overloaded, a namespace's quota full, the database gone) ends, and its end brings the endpoint's next pass
 * at once: without a wait, each pass would write a replica row, resolve the model and call the runtime again, at the
 * controller's full speed, against a server already in trouble. The next placement waits 1 s (PLACEMENT_BACKOFF_BASE_MS),
 * doubling with each outage in a row up to a minute; one that is placed ends the series.
 */
import { DEFAULTS } from '../defaults.js';
import { restartDelayMs } from './crash-policy.js';

export class PlacementBackoff {
  private readonly outages = new Map<string, { attempts: number; until: number }>();
  private readonly policy: { backoffBaseMs: number; backoffMaxMs: number };

  /** `baseMs`: the first wait (the tests shorten it); the longest is a minute. */
  constructor(baseMs: number = DEFAULTS.placementBackoffBaseMs) {
    this.policy = { backoffBaseMs: baseMs, backoffMaxMs: 60_000 };
  }

  /** Whether the endpoint's next placement still waits. */
  waiting(endpointId: string): boolean {
    return (this.outages.get(endpointId)?.until ?? 0) > Date.now();
  }

  /** A placement of the endpoint met an outage. */
  met(endpointId: string): void {
    const attempts = (this.outages.get(endpointId)?.attempts ?? 0) + 1;
    this.outages.set(endpointId, { attempts, until: Date.now() + restartDelayMs(this.policy, attempts) });
  }

  /** A placement of the endpoint was made (or the endpoint is no longer this process's). */
  clear(endpointId: string): void {
    this.outages.delete(endpointId);
  }
}
