/**
 * A stopping gateway's drain of its graphql-ws sockets (see websocket.ts and ../drain.ts): subscriptions that never
 * end by themselves are completed at once (their clients subscribe again, to another gateway), and each socket is
 * closed with 1001 "Going away" as soon as nothing else runs on it, so that a chat completion streamed by
 * subscription (or a query, a mutation) finishes first, as it would over REST.
 *
 * A socket starts no new operation once the drain has begun: a `subscribe` whose turn comes then is answered with an
 * `error` message for its id (`drainingRefusal`), and is never counted as running, so that a client that goes on
 * sending new operations cannot hold its socket, and the stopping gateway, open until the drain's bound.
 */
import type { GraphQLError } from 'graphql';
import { WebSocket } from 'ws';
import { gatewayDraining } from '../../router/drain-waits.js';
import { graphqlErrorOf } from './errors.js';
import type { SocketOperations } from './websocket-operations.js';

/** How long a closing server waits for a peer to answer its close frame before it cuts the socket. */
export const CLOSE_GRACE_MS = 1000;

/** What the drain needs of one socket. */
export interface DrainedSocket {
  socket: WebSocket;
  operations: SocketOperations;
  /**
   * The operations running, by their subscribe message's payload: whether each is a subscription that never ends by
   * itself (known once it is validated), which the drain completes rather than waits for.
   */
  running: Map<object, { id: string; endless: boolean }>;
}

/** Closes a socket with 1001; a peer that does not answer the close frame is cut after CLOSE_GRACE_MS. */
export function goAway(socket: WebSocket): void {
  if (socket.readyState === WebSocket.CLOSING || socket.readyState === WebSocket.CLOSED) return;
  socket.close(1001, 'Going away');
  const cut = setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
  socket.once('close', () => clearTimeout(cut));
}

/**
 * What a new operation on a draining gateway's socket is answered: the drain's 503 with Retry-After
 * (`gatewayDraining`, as a chat request still waiting at the bound is answered), as GraphQL names it:
 * `RESOURCE_EXHAUSTED` with `retryAfter`. The socket itself goes away with 1001 once its running operations end, so
 * the retry belongs on a new connection, which the gateway's load balancer sends to another gateway.
 */
export function drainingRefusal(): GraphQLError[] {
  const failure = {
    ...gatewayDraining(),
    message: 'this gateway is shutting down and starts no new operation; retry it on a new connection (another gateway serves it)',
  };
  return [graphqlErrorOf(failure)!];
}

export class SocketDrain {
  private readonly open = new Set<DrainedSocket>();
  private started = false;
  /** The subscribe messages (their payloads) whose operations the drain refused. */
  private readonly refused = new WeakSet<object>();

  get draining(): boolean {
    return this.started;
  }

  /** A socket opened (one opened as the drain began, its upgrade under way, goes away at once). */
  opened(socket: DrainedSocket): void {
    this.open.add(socket);
    this.settled(socket);
  }

  closed(socket: DrainedSocket): void {
    this.open.delete(socket);
  }

  /**
   * A subscribe message's operation is about to reach graphql-ws (once an earlier one of its id has ended): it runs,
   * and the drain waits for it, unless the drain has begun; then it is refused (`refuses`), and never counted as
   * running. Answers whether it runs.
   */
  admit(socket: DrainedSocket, id: string, payload: object): boolean {
    if (this.started) {
      this.refused.add(payload);
      return false;
    }
    socket.running.set(payload, { id, endless: false });
    return true;
  }

  /** Whether the drain refused this subscribe message's operation: `onSubscribe` answers it with `drainingRefusal`. */
  refuses(payload: object): boolean {
    return this.refused.has(payload);
  }

  /** An operation of `socket` turned out to be a subscription without end: completed now while draining. */
  endless(socket: DrainedSocket, payload: object): void {
    const operation = socket.running.get(payload);
    if (!operation) return;
    operation.endless = true;
    if (this.started) socket.operations.complete(operation.id);
  }

  /** An operation of `socket` ended, or may have: while draining, a socket where only endless ones (ending) run goes away. */
  settled(socket: DrainedSocket): void {
    if (this.started && [...socket.running.values()].every((operation) => operation.endless)) goAway(socket.socket);
  }

  /** Starts the drain: every endless subscription is completed, and every socket with nothing else running goes away. */
  start(): void {
    this.started = true;
    for (const socket of this.open) {
      for (const operation of socket.running.values()) if (operation.endless) socket.operations.complete(operation.id);
      this.settled(socket);
    }
  }
}
