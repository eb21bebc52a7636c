/**
 * The gateway's side of a replica: which replica takes a request (the one
 * with the fewest requests in flight through this process) and the upstream
 * request itself, through the one engine client (src/engine-client).
 */
import type { ReplicaRecord } from '../domain/replica.js';
import type { EngineClient, EngineResponse } from '../engine-client/engine-client.js';

export class Upstream {
  /** Requests in flight per replica, through this process: the load the picker balances. */
  private readonly inFlight = new Map<string, number>();

  constructor(readonly engines: EngineClient) {}

  /** The least-loaded of `replicas` not in `skip`. */
  pick(replicas: readonly ReplicaRecord[], skip: ReadonlySet<string>): ReplicaRecord | undefined {
    let best: ReplicaRecord | undefined;
    for (const replica of replicas) {
      if (skip.has(replica.id)) continue;
      if (!best || this.load(replica.id) < this.load(best.id)) best = replica;
    }
    return best;
  }

  /** Counts a request on `replicaId` until `done` is called. */
  begin(replicaId: string): () => void {
    this.inFlight.set(replicaId, this.load(replicaId) + 1);
    return () => {
      const left = this.load(replicaId) - 1;
      if (left > 0) this.inFlight.set(replicaId, left);
      else this.inFlight.delete(replicaId);
    };
  }

  /**
   * Opens the upstream request with the engine's body (`kind.engineBody`);
   * resolves with the answer's head (the body streams on). A stream always
   * asks for usage, to record token counts; the relay drops it if the client
   * did not ask.
   */
  send(replica: ReplicaRecord, path: string, body: Record<string, unknown>, signal: AbortSignal): Promise<EngineResponse> {
    if (body.stream === true) body.stream_options = { include_usage: true };
    return this.engines.post(replica, path, JSON.stringify(body), signal);
  }

  private load(replicaId: string): number {
    return this.inFlight.get(replicaId) ?? 0;
  }
}
