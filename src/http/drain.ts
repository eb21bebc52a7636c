/**
 * A stopping gateway's drain (SIGTERM, Ctrl-C; see docs/operations.md#stopping).
 *
 * - The listener is closed first (by the server's close): new connections are refused.
 * - Requests in flight finish, streamed chat completions (REST, and GraphQL's chat subscription over SSE)
 *   and requests queued or held for a wake included, up to a bound. Requests still queued or held shortly
 *   before it are answered 503 with Retry-After (src/router/drain-waits.ts); what is left at the bound is cut
 *   by the server's close.
 * - Streams that never end by themselves are ended at once, so that their clients reconnect, to another
 *   gateway, rather than wait for the bound: GraphQL subscriptions served as SSE (all but the chat
 *   completion's, which the GraphQL entry marks: `finite`), and followed logs. Their body ends cleanly (an SSE
 *   stream without `event: complete`, which SSE clients read as a connection to open again). WebSockets are
 *   drained by their own server (src/http/graphql/websocket.ts), and closed with 1001.
 * - Kept-alive connections are closed as soon as they are idle, and every answer sent from now on says
 *   `Connection: close`, so that a client (or a proxy's pool) takes its next request elsewhere.
 * - While it drains, /readyz answers 503 (`draining`): a health checker still connected stops routing here.
 */
import type http from 'node:http';
import { setImmediate as nextTurn } from 'node:timers';

/** Whether a request is one of the streams that never end by themselves (see `endless`). */
type Kind = 'graphql' | 'log-follow' | 'other';

/** `…/endpoint/{id}/logs?follow=true`: a followed log (src/http/rest/replica-routes.ts). */
const LOG_PATH = /^\/dedicated\/[^/]+\/endpoint\/[^/]+\/logs$/;

function kindOf(req: http.IncomingMessage, graphqlPath: string): Kind {
  const [path, query = ''] = (req.url ?? '').split('?', 2) as [string, string?];
  if (path === graphqlPath) return 'graphql';
  if (req.method === 'GET' && LOG_PATH.test(path)) {
    const follow = new URLSearchParams(query).get('follow');
    if (follow === 'true' || follow === '1') return 'log-follow';
  }
  return 'other';
}

/** Responses to GraphQL subscriptions that end by themselves (a chat completion's stream): drained as requests are. */
const finiteStreams = new WeakSet<http.ServerResponse>();

/** Whether `res`, its head sent, is a stream that only its client ends: a subscription's SSE, or a followed log. */
function endless(res: http.ServerResponse, kind: Kind): boolean {
  if (!res.headersSent || res.statusCode !== 200) return false;
  if (kind === 'log-follow') return true;
  // GraphQL answers as SSE only for a subscription (src/http/graphql/http-entry.ts) or a client asking it of yoga for a
  // query, whose single event is written at once.
  return kind === 'graphql' && !finiteStreams.has(res) && String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');
}

function isEventStream(res: http.ServerResponse): boolean {
  return String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');
}

export class HttpDrain {
  private readonly inFlight = new Map<http.ServerResponse, Kind>();
  private draining = false;
  private emptied: (() => void) | undefined;

  constructor(
    private readonly server: http.Server,
    private readonly graphqlPath: string,
  ) {}

  /** Whether the gateway is draining (/readyz answers 503). */
  get active(): boolean {
    return this.draining;
  }

  /** Requests still in flight. */
  get size(): number {
    return this.inFlight.size;
  }

  /** `res` answers a GraphQL subscription that ends by itself (a chat completion): the drain lets it finish. */
  finite(res: http.ServerResponse): void {
    finiteStreams.add(res);
  }

  /** Follows one request until its response closes; one that arrives while draining closes its connection after it. */
  track(req: http.IncomingMessage, res: http.ServerResponse): void {
    const kind = kindOf(req, this.graphqlPath);
    this.inFlight.set(res, kind);
    res.once('close', () => {
      this.inFlight.delete(res);
      if (!this.draining) return;
      // Its connection is idle once Node has finished with the response: closed then, unless another request came on it.
      nextTurn(() => this.server.closeIdleConnections());
      if (this.inFlight.size === 0) this.emptied?.();
    });
    if (this.draining) this.enter(res, kind);
  }

  /**
   * Starts draining: ends the endless streams, closes the idle connections, and resolves once no request is in
   * flight, or after `graceMs` (the caller then cuts what is left). Answers how many were still in flight.
   */
  async drain(graceMs: number): Promise<number> {
    this.draining = true;
    for (const [res, kind] of this.inFlight) this.enter(res, kind);
    this.server.closeIdleConnections();
    if (this.inFlight.size > 0 && graceMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.emptied = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      clearTimeout(timer);
      this.emptied = undefined;
    }
    return this.inFlight.size;
  }

  /** A response in flight as the drain goes on: its connection closes after it; an endless stream ends now. */
  private enter(res: http.ServerResponse, kind: Kind): void {
    if (!res.headersSent) res.shouldKeepAlive = false;
    if (kind === 'other' || res.writableEnded) return;
    if (endless(res, kind)) return this.end(res);
    if (res.headersSent) return;
    // Not answered yet (a subscription still authenticating): ended as soon as it turns out to be a stream.
    const writeHead = res.writeHead;
    res.writeHead = ((...args: Parameters<typeof res.writeHead>) => {
      const result = writeHead.apply(res, args);
      res.writeHead = writeHead;
      // After the handler's own first write (an SSE ping, a flush), which follows its head in the same turn.
      nextTurn(() => {
        if (endless(res, kind)) this.end(res);
      });
      return result;
    }) as typeof res.writeHead;
  }

  /**
   * Ends a stream cleanly: its body is terminated, so the client sees the end of the stream rather than a cut,
   * and its handler sees the response close (which ends the subscription behind it and frees what it holds).
   */
  private end(res: http.ServerResponse): void {
    if (res.writableEnded || res.destroyed) return;
    // The handler may write once more before it sees the close: that write fails quietly rather than as an 'error'.
    res.on('error', () => {});
    res.end(isEventStream(res) ? ': the gateway is shutting down: connect again\n\n' : undefined);
  }
}
