/**
 * The waits of a stopping gateway's chat requests: held for a wake or a start (serving-wait.ts), or queued for a
 * slot (admission.ts). While the gateway drains (src/http/drain.ts) they are served as its bound allows; those still
 * waiting shortly before the bound are answered 503 with Retry-After (`gatewayDraining`), so that their clients
 * retry, on another gateway, rather than have their connection cut. A queued request that cannot be expected to
 * start and finish before the bound is answered so at once (admission.ts).
 *
 * Each gateway's chat router holds its own (`ChatRouter.drainWaits`), given to its admission gates and its serving
 * wait; the HTTP server drains them. Several gateways may share a process (tests, benchmarks): each has its own.
 */
import type { Failure } from '../domain/errors.js';

/** A client told to retry a draining gateway's request goes to another gateway: at once, as far as we are concerned. */
export const DRAINING_RETRY_AFTER_S = 1;

/** What a request that this gateway will not serve before its drain ends is answered (503, as the database's outage). */
export function gatewayDraining(): Failure {
  return {
    kind: 'unavailable',
    message: 'this gateway is shutting down and cannot serve the request before it stops; retry it (another gateway serves it)',
    code: 'gateway_draining',
    retryAfter: DRAINING_RETRY_AFTER_S,
  };
}

export class DrainWaits {
  /** When the drain's bound falls (performance.now()), once it has started. */
  private boundAt: number | undefined;
  private refusing = false;
  private readonly waits = new Set<(failure: Failure) => void>();

  /** When the drain's bound falls (performance.now()); undefined while the gateway is not draining. */
  get bound(): number | undefined {
    return this.boundAt;
  }

  /** Whether a request that would wait now is answered `gatewayDraining` instead. */
  get refused(): boolean {
    return this.refusing;
  }

  /** The drain started: its bound falls at `boundAt` (performance.now()). */
  start(boundAt: number): void {
    this.boundAt = boundAt;
  }

  /** Ends every wait with `gatewayDraining`, and every wait that begins from now on. Answers how many it ended. */
  refuse(): number {
    this.refusing = true;
    const waits = [...this.waits];
    this.waits.clear();
    for (const refused of waits) refused(gatewayDraining());
    return waits.length;
  }

  /** A request begins to wait (check `refused` first): `refused` ends it if the drain does; call the answer when it ends. */
  enter(refused: (failure: Failure) => void): () => void {
    this.waits.add(refused);
    return () => this.waits.delete(refused);
  }
}
