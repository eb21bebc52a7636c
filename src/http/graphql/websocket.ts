/**
 * graphql-ws (the `graphql-transport-ws` protocol) on `ws`, at /graphql: the
 * protocol core is graphql-ws's own `makeServer`; this adapter is what
 * `graphql-ws/use/ws` does, plus what a shared public socket needs:
 *
 * - Errors stay where they belong. A malformed message (not JSON, not an
 *   object, a missing or mistyped field, a type a server never receives)
 *   closes the socket with 4400; a subscribe whose query does not parse or
 *   validate, names an unknown operation, or is past the socket's cap is
 *   answered with an `error` message for its id, and the socket's other
 *   subscriptions go on. 4500 ("Internal server error", logged, never
 *   detailed) is left for real faults. Frame-level violations (a frame
 *   larger than `maxPayload`, invalid UTF-8) are closed by `ws` with the
 *   WebSocket codes 1009 and 1007.
 * - At most `maxSubscriptions` operations run on one socket at once.
 * - Access is watched (see `live/access-watch.ts`): a socket whose key stops
 *   authenticating is closed with 4403 and the reason; a subscription whose
 *   team access changed ends with a FORBIDDEN error.
 * - With a `logger`, each connection writes one access line when it closes
 *   (`../access-log.ts`): close code, duration, request id, key id.
 */
import { DEFAULTS } from '../../defaults.js';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { GraphQLError, type DocumentNode, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { CloseCode, handleProtocols, makeServer, MessageType } from 'graphql-ws';
import type { Logger } from 'pino';
import { WebSocket, WebSocketServer } from 'ws';
import type { AccessWatch, WatchedConnection, WatchedSubscription } from '../../live/access-watch.js';
import type { SubscriptionQuota } from '../../live/subscription-quota.js';
import type { Services } from '../../services/index.js';
import type { Principal } from '../../services/principal.js';
import { failureOfDomainError, type Failure } from '../../domain/errors.js';
import { logSocketAccess, type SocketAccess } from '../access-log.js';
import { authenticate, credentialsOfConnectionParams } from '../authenticate.js';
import { MAX_BODY_BYTES } from '../body.js';
import { failureOf } from '../failures.js';
import { logFailure, REQUEST_ID_HEADER, requestIdOf, type Log } from '../request-id.js';
import type { GatewayYoga } from './context.js';
import { publicErrorJson, reportGraphQLErrors, unmasked } from './errors.js';
import { resultJson, type ResultSink } from './shared-execution.js';

/** WebSocket close code 1013, "Try Again Later" (RFC 6455 registry): the server cannot serve this connection now. */
const TRY_AGAIN_LATER = 1013;

/** How a socket that cannot open is closed: graphql-ws's 4401 and 4403, and 1013 (as HTTP's 503) for an outage. */
const CLOSE_CODES: Partial<Record<Failure['kind'], number>> = {
  unauthenticated: CloseCode.Unauthorized,
  forbidden: CloseCode.Forbidden,
  unavailable: TRY_AGAIN_LATER,
};

export interface WebSocketOptions {
  /** Watches open sockets' access; without it, a socket keeps the access it opened with. */
  access?: AccessWatch;
  /** Operations in flight on one socket at once; a subscribe past it gets an `error` message. @default 100 */
  maxSubscriptions?: number;
  /** Operations one user holds open at once, over all their keys, sockets and SSE streams; without it, no such cap. */
  quota?: SubscriptionQuota;
  /** Largest message accepted, in bytes; a larger frame is closed with 1009. @default 1 MiB */
  maxPayload?: number;
  /** Interval of keep-alive pings; a socket that misses a pong for as long is dropped. @default 12000 */
  keepAliveMs?: number;
  log?: Log;
  /** Where each connection's access line goes when it closes; without it, none is written. */
  logger?: Logger;
}

/** How long a closing server waits for a peer to answer its close frame before it cuts the socket. */
const CLOSE_GRACE_MS = 1000;

/** Past this much unsent data on a socket, shared results wait for the socket like any other message. */
const SOCKET_HIGH_WATER = 256 * 1024;

/** The message types a server receives; any other (well-formed) one is a protocol violation. */
const SERVER_BOUND = new Set<string>([
  MessageType.ConnectionInit,
  MessageType.Ping,
  MessageType.Pong,
  MessageType.Subscribe,
  MessageType.Complete,
]);

/** A close reason fits in a control frame: 123 bytes. */
function closeReason(reason: string): string {
  return Buffer.byteLength(reason) <= 123
    ? reason
    : `${Buffer.from(reason)
        .subarray(0, 120)
        .toString()
        .replace(/\uFFFD$/, '')}...`;
}

/**
 * One graphql-ws subscription's `next` messages, written straight to its
 * socket: the shared result's JSON (made once for all its subscribers) inside
 * the message graphql-ws itself would send. A socket that is behind refuses,
 * so that graphql-ws's own send, which waits for the write, paces it.
 */
class WebSocketNextMessages implements ResultSink {
  constructor(
    private readonly socket: WebSocket,
    private readonly id: string,
  ) {}

  write(result: ExecutionResult): boolean {
    const { socket } = this;
    if (socket.readyState !== WebSocket.OPEN || socket.bufferedAmount > SOCKET_HIGH_WATER) return false;
    socket.send(`{"id":${JSON.stringify(this.id)},"type":"next","payload":${resultJson(result)}}`);
    return true;
  }
}

interface Extra {
  socket: WebSocket;
  request?: IncomingMessage;
  /** The upgrade request's id (answered in its `x-request-id` header), for the socket's log lines. */
  requestId: string;
  /** The connection's access line, when there is a logger. */
  access?: SocketAccess;
  /**
   * Each operation's cancellation, by id: aborted when the client completes it or the socket closes, so that a
   * mutation in flight (a chat completion) stops too, not only a subscription.
   */
  cancels: Map<string, AbortController>;
}

/** What graphql-ws carries from `onSubscribe` to `execute`/`subscribe`. */
interface Root {
  execute(args: ExecutionArgs): unknown;
  subscribe(args: ExecutionArgs): unknown;
  access: WatchedSubscription | undefined;
}

function badRequest(message: string, code = 'BAD_REQUEST'): GraphQLError[] {
  return [new GraphQLError(message, { extensions: { code } })];
}

/** Serves graphql-ws on the GraphQL path. Auth failures close the socket with 4401 or 4403 and a reason. */
export function serveWebSocket(yoga: GatewayYoga, services: Services, options: WebSocketOptions = {}) {
  const { access } = options;
  const maxSubscriptions = options.maxSubscriptions ?? DEFAULTS.wsMaxSubscriptions;
  const keepAliveMs = options.keepAliveMs ?? 12_000;
  const log = options.log ?? ((message, error) => console.error(message, error));
  // Upgrades reach it through the server's upgrade routing (../upgrade.ts), which owns the path.
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: options.maxPayload ?? MAX_BODY_BYTES,
    handleProtocols: (protocols) => handleProtocols(protocols),
  });
  /** Each authenticated socket's principal, kept current by the access watch. */
  const connections = new WeakMap<object, { principal: Principal; watched?: WatchedConnection }>();
  /**
   * Each socket's operations holding a place of their user's quota, by their subscribe message's payload
   * (one object per message: an id may be reused at once, before the old operation's completion runs).
   */
  const places = new WeakMap<object, Map<object, () => void>>();
  /** Each operation's cancellation, by its subscribe message's payload (an id may be reused before the completion runs). */
  const operationCancels = new WeakMap<object, AbortController>();
  const releasePlace = (extra: object, payload: object) => {
    places.get(extra)?.get(payload)?.();
    places.get(extra)?.delete(payload);
  };

  const graphqlWs = makeServer<Record<string, unknown>, Extra>({
    onConnect: async (ctx) => {
      const { socket } = ctx.extra;
      const credentials = credentialsOfConnectionParams(ctx.connectionParams ?? {});
      const epoch = access?.epoch ?? 0;
      let result;
      try {
        result = await authenticate(services, credentials);
      } catch (error) {
        // The database being away is no fault of ours to report as 4500: 1013 "try again later", as HTTP's 503.
        const failure = failureOf(error);
        if (failure.kind !== 'unavailable') throw error;
        socket.close(CLOSE_CODES.unavailable!, closeReason(failure.message));
        return false;
      }
      if (result.type === 'error') {
        const failure = failureOfDomainError(result.error);
        socket.close(CLOSE_CODES[failure.kind] ?? CloseCode.Unauthorized, closeReason(failure.message));
        return false;
      }
      const watched = access?.open(credentials, result.value, epoch, (error) => {
        socket.close(CloseCode.Forbidden, closeReason(`access revoked: ${error.message}`));
      });
      if (socket.readyState !== WebSocket.OPEN) {
        watched?.close(); // it went away while authenticating
        return false;
      }
      connections.set(ctx.extra, { principal: result.value, ...(watched ? { watched } : {}) });
      ctx.extra.access?.authenticated(services.auth.keyIdOf(credentials.authorization));
      // The upgrade request is not needed past authentication: let it go rather than keep it for the socket's life.
      ctx.extra.request = undefined;
      return true;
    },
    onSubscribe: async (ctx, id, params) => {
      let inFlight = 0;
      for (const _ in ctx.subscriptions) if (++inFlight > maxSubscriptions) break;
      if (inFlight > maxSubscriptions) {
        return badRequest(
          `too many operations on this socket: at most ${maxSubscriptions} at once; complete one first`,
          'RESOURCE_EXHAUSTED',
        );
      }
      const connection = connections.get(ctx.extra)!;
      const watched = connection.watched?.subscription();
      // Only what the context needs: a spread of graphql-ws's context would be copied into every subscription.
      const sink = new WebSocketNextMessages(ctx.extra.socket, id);
      const cancel = new AbortController();
      const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
        principal: watched?.principal ?? connection.principal,
        transport: 'websocket',
        signal: cancel.signal,
        params,
        resultSink: watched ? watched.sink(sink) : sink,
      });
      // A syntax error or an operation over a limit (thrown by parse or validate) is this operation's error, not the socket's.
      let document: DocumentNode;
      try {
        document = parse(params.query);
        const errors = validate(schema, document);
        if (errors.length > 0) return errors;
      } catch (error) {
        if (error instanceof GraphQLError) return [error];
        throw error;
      }
      if (options.quota) {
        const release = options.quota.take(connection.principal.user.id);
        if (!release) return badRequest(options.quota.refusal, 'RESOURCE_EXHAUSTED');
        let held = places.get(ctx.extra);
        if (!held) places.set(ctx.extra, (held = new Map()));
        held.set(params, release);
      }
      const root: Root = { execute, subscribe, access: watched };
      const contextValue = await contextFactory();
      // Registered only for an operation that runs: graphql-ws calls onComplete, which forgets it, for those alone
      // (one refused above would otherwise stay in the map until the socket closes).
      ctx.extra.cancels.set(id, cancel);
      operationCancels.set(params, cancel);
      return {
        schema,
        operationName: params.operationName,
        document,
        variableValues: params.variables,
        contextValue,
        rootValue: root,
      } satisfies ExecutionArgs;
    },
    // Masked errors (bugs) are logged once with the socket's request id, which they carry to the client.
    // Errors leave without yoga's internal extensions (`http`: the status an HTTP answer would have had).
    onNext: (ctx, _id, _payload, _args, result) => {
      reportGraphQLErrors(result.errors, ctx.extra.requestId, log, 'a WebSocket operation');
      if (result.errors?.length) return { ...result, errors: result.errors.map((error) => publicErrorJson(error as GraphQLError)) };
    },
    onError: (ctx, _id, _payload, errors) => {
      reportGraphQLErrors(errors, ctx.extra.requestId, log, 'a WebSocket operation');
      return errors.map(publicErrorJson);
    },
    // Every operation that ran ends here (completed by either side, or after its error): its place is free again.
    onComplete: (ctx, id, payload) => {
      releasePlace(ctx.extra, payload);
      if (ctx.extra.cancels.get(id) === operationCancels.get(payload)) ctx.extra.cancels.delete(id);
    },
    execute: (args) => (args.rootValue as Root).execute(args) as never,
    subscribe: async (args) => {
      const root = args.rootValue as Root;
      const result = (await root.subscribe(args)) as ExecutionResult | AsyncIterable<ExecutionResult>;
      // A running subscription is watched: a change of its access ends it with an error.
      return (root.access && Symbol.asyncIterator in result ? root.access.watch(result) : result) as never;
    },
  });

  wss.on('error', (error) => log('the WebSocket server failed', error));
  // The upgrade's answer carries the request id, like every HTTP answer.
  wss.on('headers', (headers, request) => headers.push(`${REQUEST_ID_HEADER}: ${requestIdOf(request)}`));
  wss.on('connection', (socket, request) => {
    // Frame-level faults (too large, invalid UTF-8): `ws` closes the socket itself with the WebSocket code.
    socket.on('error', () => {});
    let pongWait: NodeJS.Timeout | null = null;
    const ping =
      keepAliveMs > 0
        ? setInterval(() => {
            if (socket.readyState !== WebSocket.OPEN) return;
            pongWait = setTimeout(() => socket.terminate(), keepAliveMs);
            socket.once('pong', () => {
              if (pongWait) clearTimeout(pongWait);
              pongWait = null;
            });
            socket.ping();
          }, keepAliveMs)
        : null;
    const requestId = requestIdOf(request);
    const extra: Extra = {
      socket,
      request,
      requestId,
      cancels: new Map(),
      ...(options.logger ? { access: logSocketAccess(options.logger, request, requestId) } : {}),
    };
    let onMessage: ((data: string) => Promise<void>) | undefined;
    const closed = graphqlWs.opened(
      {
        protocol: socket.protocol,
        send: (data) =>
          new Promise((resolve, reject) => {
            if (socket.readyState !== WebSocket.OPEN) return resolve();
            socket.send(data, (error) => (error ? reject(error) : resolve()));
          }),
        close: (code, reason) => socket.close(code, reason),
        onMessage: (cb) => {
          onMessage = cb;
        },
      },
      extra,
    );
    socket.on('message', async (data: Buffer) => {
      if (!onMessage) return;
      // Checked here, so that a malformed message is a 4400 and never reaches the core as a fault.
      let message: unknown;
      try {
        message = JSON.parse(data.toString('utf8'));
      } catch {
        message = undefined;
      }
      const type =
        typeof message === 'object' && message !== null && !Array.isArray(message) ? (message as { type?: unknown }).type : undefined;
      if (typeof type !== 'string' || !SERVER_BOUND.has(type)) {
        return socket.close(
          CloseCode.BadRequest,
          message === undefined ? 'Invalid message received: not JSON' : 'Invalid message received: not a message a server accepts',
        );
      }
      if (type === 'complete') {
        // The client stopped an operation: one still running (a mutation has no generator to return) is cancelled.
        const id = (message as { id?: unknown }).id;
        if (typeof id === 'string') extra.cancels.get(id)?.abort();
      }
      try {
        // graphql-ws validates an already parsed message as it does a string (4400 for a bad one).
        await onMessage(message as never);
      } catch (error) {
        logFailure(log, extra.requestId, 'a WebSocket message', unmasked(error));
        socket.close(CloseCode.InternalServerError, 'Internal server error');
      }
    });
    socket.once('close', (code, reason) => {
      if (pongWait) clearTimeout(pongWait);
      if (ping) clearInterval(ping);
      connections.get(extra)?.watched?.close();
      for (const release of places.get(extra)?.values() ?? []) release();
      for (const cancel of extra.cancels.values()) cancel.abort();
      extra.cancels.clear();
      places.delete(extra);
      extra.access?.closed(code);
      void closed(code, reason.toString());
    });
  });

  return {
    /** Completes a WebSocket upgrade at the GraphQL path (an invalid handshake is ws's 400). */
    handleUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      wss.handleUpgrade(req, socket, head, (client) => wss.emit('connection', client, req)),
    /**
     * Closes every socket with 1001 "Going away" and resolves once all are closed. A peer that does not answer
     * the close frame (or reads nothing, so that the frame never leaves) is cut after `graceMs`: `ws` alone
     * would wait 30 s for it, and the gateway's close with it.
     */
    close: async (graceMs = CLOSE_GRACE_MS) => {
      const closed = new Promise<void>((resolve) => wss.close(() => resolve()));
      for (const client of wss.clients) client.close(1001, 'Going away');
      const cut = setTimeout(() => {
        for (const client of wss.clients) client.terminate();
      }, graceMs);
      await closed;
      clearTimeout(cut);
    },
  };
}
