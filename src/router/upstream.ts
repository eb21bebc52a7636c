/**
 * The gateway's side of a replica: which replica takes a request (the one
 * with the fewest requests in flight through this process) and the upstream
 * request itself, over keep-alive connections.
 */
import http from 'node:http';
import type { GenerationRequest } from '../domain/chat-request.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { engineAuthHeaders } from '../runtime/runtime.js';

export class Upstream {
  readonly agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, scheduling: 'lifo' });
  /** Requests in flight per replica, through this process: the load the picker balances. */
  private readonly inFlight = new Map<string, number>();

  close(): void {
    this.agent.destroy();
  }

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
   * Opens the upstream request; resolves with the answer's head (the body
   * streams on). Usage is always asked for, to record token counts; the relay
   * drops it if the client did not ask.
   */
  send(
    replica: ReplicaRecord,
    path: string,
    request: GenerationRequest,
    body: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<http.IncomingMessage> {
    const upstreamBody = request.stream
      ? { ...body, stream_options: { ...(body.stream_options as object | undefined), include_usage: true } }
      : body;
    const payload = JSON.stringify(upstreamBody);
    return new Promise((resolve, reject) => {
      const req = http.request(`${replica.address}${path}`, {
        method: 'POST',
        agent: this.agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          ...engineAuthHeaders(replica.token),
        },
        signal,
      });
      req.once('response', resolve);
      req.once('error', reject);
      req.setNoDelay(true);
      req.end(payload);
    });
  }

  private load(replicaId: string): number {
    return this.inFlight.get(replicaId) ?? 0;
  }
}
