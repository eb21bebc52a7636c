/**
 * graphql-ws (the `graphql-transport-ws` protocol) on `ws`, at /graphql: the
 * protocol core is graphql-ws's own `makeServer`; this adapter is what
 * `graphql-ws/use/ws` does, plus what a shared public socket needs:
 *
 * - Errors stay where they belong. A malformed message (not JSON, not an object, a missing or mistyped field, a type
 *   a server never receives: websocket-messages.ts) closes the socket with 4400; a subscribe whose query does not
 *   parse or validate, names an unknown operation, or is past the socket's cap is answered with an `error` message
 *   for its id, and the socket's other subscriptions go on. 4500 ("Internal server error", logged, never detailed) is left for real
 *   faults. Frame-level violations (a frame larger than `maxPayload`, invalid UTF-8) are closed by `ws` with the
 *   WebSocket codes 1009 and 1007.
 * - At most `maxSubscriptions` operations run on one socket at once. Operations are tracked here, not by id
 *   (`websocket-operations.ts`): `complete` and the socket's close stop every one, an id reused at once included.
 * - A peer that answers no ping (with that ping's payload) within `keepAliveMs`, or that takes nothing of what
 *   waits to be sent for `stallMs`, is cut; a socket with more than its high-water mark waiting to be sent is not read
 *   until it is back under it, so that a peer that writes without reading cannot pile its answers up here.
 * - Access is watched (see `live/access-watch.ts`): a socket whose key stops
 *   authenticating is closed with 4403 and the reason; a subscription whose
 *   team access changed ends with a FORBIDDEN error.
 * - With a `logger`, each connection writes one access line when it closes
 *   (`../access-log.ts`): close code, duration, request id, key id.
 * - A stopping gateway drains its sockets (`drain`, see ../drain.ts): no new socket opens (503), subscriptions that
 *   never end by themselves are completed at once, and each socket is closed with 1001 "Going away" as soon as
 *   nothing else runs on it: a chat completion streamed by subscription (or a query, a mutation) finishes first,
 *   up to the drain's bound, as it would over REST. A new operation on an open socket is refused with an `error`
 *   message (`RESOURCE_EXHAUSTED`, retry on a new connection: websocket-drain.ts) and does not keep the socket open.
 *   Its messages run in the gateway's drain scope (src/router/drain-waits.ts): one still queued shortly before the
 *   bound is answered with the chat's 503 error.
 */
import { DEFAULTS } from '../../defaults.js';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { GraphQLError, type DocumentNode, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { CloseCode, handleProtocols, makeServer } from 'graphql-ws';
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
import { readClientMessage } from './websocket-messages.js';
import { SocketOperations } from './websocket-operations.js';
import { closeReason, watchPeer, WebSocketNextMessages } from './websocket-peer.js';
import { endsByItself } from './finite-operations.js';
import { CLOSE_GRACE_MS, drainingRefusal, SocketDrain } from './websocket-drain.js';

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
  /** Authenticated sockets one user holds open at once, over all their keys (idle ones too); without it, no such cap. */
  sockets?: SubscriptionQuota;
  /** Largest message accepted, in bytes; a larger frame is closed with 1009. @default 1 MiB */
  maxPayload?: number;
  /** Interval of keep-alive pings; a socket that does not answer one (with its payload) for as long is dropped. @default 12000 */
  keepAliveMs?: number;
  /** How long a socket with data waiting may take none of it before it is cut. @default DEFAULTS.streamStallTimeoutMs */
  stallMs?: number;
  log?: Log;
  /** Where each connection's access line goes when it closes; without it, none is written. */
  logger?: Logger;
}

interface Extra {
  socket: WebSocket;
  request?: IncomingMessage;
  /** The upgrade request's id (answered in its `x-request-id` header), for the socket's log lines. */
  requestId: string;
  /** The connection's access line, when there is a logger. */
  access?: SocketAccess;
  /**
   * The socket's operations, each with its cancellation: aborted when the client completes it or the socket closes,
   * so that a mutation in flight (a chat completion) stops too, not only a subscription.
   */
  operations: SocketOperations;
  /** After each message sent: arms the stall guard when the socket's buffers are full. */
  sent: () => void;
  /** The operations running, for the drain (websocket-drain.ts). */
  running: Map<object, { id: string; endless: boolean }>;
}

/** What graphql-ws carries from `onSubscribe` to `execute`/`subscribe`. */
interface Root {
  execute(args: ExecutionArgs): unknown;
  subscribe(args: ExecutionArgs): unknown;
  access: WatchedSubscription | undefined;
  signal: AbortSignal;
}

function badRequest(message: string, code = 'BAD_REQUEST'): GraphQLError[] {
  return [new GraphQLError(message, { extensions: { code } })];
}

/** Serves graphql-ws on the GraphQL path. Auth failures close the socket with 4401 or 4403 and a reason. */
export function serveWebSocket(yoga: GatewayYoga, services: Services, options: WebSocketOptions = {}) {
  const { access } = options;
  const maxSubscriptions = options.maxSubscriptions ?? DEFAULTS.wsMaxSubscriptions;
  const keepAliveMs = options.keepAliveMs ?? 12_000;
  const stallMs = options.stallMs ?? DEFAULTS.streamStallTimeoutMs;
  const log = options.log ?? ((message, error) => console.error(message, error));
  // Upgrades reach it through the server's upgrade routing (../upgrade.ts), which owns the path.
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: options.maxPayload ?? MAX_BODY_BYTES,
    handleProtocols: (protocols) => handleProtocols(protocols),
  });
  /** Each authenticated socket's principal, kept current by the access watch. */
  const connections = new WeakMap<object, { principal: Principal; watched?: WatchedConnection; release?: () => void }>();
  /**
   * Each socket's operations holding a place of their user's quota, by their subscribe message's payload
   * (one object per message: an id may be reused at once, before the old operation's completion runs).
   */
  const places = new WeakMap<object, Map<object, () => void>>();
  /** Each socket's transport, whose pending writes the stall guard watches. */
  const transports = new WeakMap<WebSocket, Duplex>();
  const releasePlace = (extra: object, payload: object) => {
    places.get(extra)?.get(payload)?.();
    places.get(extra)?.delete(payload);
  };
  /** The sockets' drain, once the gateway stops. */
  const socketDrain = new SocketDrain();
  /** All sockets closed, once the drain has begun (ws's server, closed, tells when its last client is). */
  let allClosed: Promise<void> | undefined;

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
      // A socket holds one of its user's socket places while it is open, idle or not (4429 past them: no retry).
      const release = options.sockets?.take(result.value.user.id);
      if (options.sockets && !release) {
        watched?.close();
        socket.close(CloseCode.TooManyInitialisationRequests, closeReason(options.sockets.refusal));
        return false;
      }
      connections.set(ctx.extra, { principal: result.value, ...(watched ? { watched } : {}), ...(release ? { release } : {}) });
      ctx.extra.access?.authenticated(services.auth.keyIdOf(credentials.authorization));
      // The upgrade request is not needed past authentication: let it go rather than keep it for the socket's life.
      ctx.extra.request = undefined;
      return true;
    },
    onSubscribe: async (ctx, id, params) => {
      // Counted as its message arrived, with every operation the client has not completed (graphql-ws's own count,
      // by id, lost those whose id was reused at once).
      const operation = ctx.extra.operations.get(params);
      if (!operation) throw new Error(`operation ${id} was not registered as its message arrived`);
      // Before the socket's cap and the user's quota: it takes no place of either, and its socket goes away regardless.
      if (socketDrain.refuses(params)) return drainingRefusal();
      if (!operation.admitted) {
        return badRequest(
          `too many operations on this socket: at most ${maxSubscriptions} at once; complete one first`,
          'RESOURCE_EXHAUSTED',
        );
      }
      const connection = connections.get(ctx.extra)!;
      const watched = connection.watched?.subscription();
      // Only what the context needs: a spread of graphql-ws's context would be copied into every subscription.
      const sink = new WebSocketNextMessages(ctx.extra.socket, id, ctx.extra.sent);
      const { signal } = operation;
      const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
        principal: watched?.principal ?? connection.principal,
        transport: 'websocket',
        signal,
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
      // One that never ends by itself is completed when the gateway drains, at once if the drain began as it started.
      if (!endsByItself(document, params.operationName)) socketDrain.endless(ctx.extra, params);
      const root: Root = { execute, subscribe, access: watched, signal };
      const contextValue = await contextFactory();
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
    onComplete: (ctx, _id, payload) => releasePlace(ctx.extra, payload),
    execute: (args) => (args.rootValue as Root).execute(args) as never,
    subscribe: async (args) => {
      const root = args.rootValue as Root;
      const result = (await root.subscribe(args)) as ExecutionResult | AsyncIterable<ExecutionResult>;
      if (!(Symbol.asyncIterator in result)) return result as never;
      // A running subscription is watched: a change of its access ends it with an error.
      const stream = root.access ? root.access.watch(result) : result;
      // Completed by the client (or its socket closed) while it started: graphql-ws may not hold it under its id (the
      // id may be another operation's by now), so it is ended here, before it starts (a chat generation never does).
      const end = () => void (stream as Partial<AsyncIterator<ExecutionResult>>).return?.();
      if (root.signal.aborted) end();
      else root.signal.addEventListener('abort', end, { once: true });
      return stream as never;
    },
  });

  wss.on('error', (error) => log('the WebSocket server failed', error));
  // The upgrade's answer carries the request id, like every HTTP answer.
  wss.on('headers', (headers, request) => headers.push(`${REQUEST_ID_HEADER}: ${requestIdOf(request)}`));
  wss.on('connection', (socket, request) => {
    // Frame-level faults (too large, invalid UTF-8): `ws` closes the socket itself with the WebSocket code.
    socket.on('error', () => {});
    const peer = watchPeer(socket, transports.get(socket), keepAliveMs, stallMs);
    const requestId = requestIdOf(request);
    const extra: Extra = {
      socket,
      request,
      requestId,
      operations: new SocketOperations(maxSubscriptions),
      sent: peer.sent,
      running: new Map(),
      ...(options.logger ? { access: logSocketAccess(options.logger, request, requestId) } : {}),
    };
    socketDrain.opened(extra);
    let onMessage: ((data: string) => Promise<void>) | undefined;
    const closed = graphqlWs.opened(
      {
        protocol: socket.protocol,
        send: (data) =>
          new Promise((resolve) => {
            if (socket.readyState !== WebSocket.OPEN) return resolve();
            // A write fails only when the connection is gone (cut by the stall guard, say): its close ends the operations.
            socket.send(data, () => resolve());
            peer.sent();
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
      const read = readClientMessage(data);
      if ('refused' in read) return socket.close(CloseCode.BadRequest, read.refused);
      const { message, type, id, payload } = read;
      // A subscribe is registered before graphql-ws sees it (one it finds malformed closes the socket with 4400).
      let opened: object | undefined;
      if (type === 'subscribe' && typeof id === 'string' && typeof payload === 'object' && payload !== null) {
        const operation = extra.operations.open(id, payload);
        if (!operation) return socket.close(CloseCode.SubscriberAlreadyExists, closeReason(`Subscriber for ${id} already exists`));
        opened = payload;
        if (operation.after) {
          // The id's earlier operation, completed by the client, is still ending: this one starts after it.
          await operation.after;
          if (operation.signal.aborted) return extra.operations.ended(payload);
        }
        // Refused (by `onSubscribe`) once the drain has begun, and never counted as running.
        socketDrain.admit(extra, id, payload);
      }
      // The client stopped an operation: every one under the id is cancelled, however far it got (a mutation has no
      // generator to return; one still starting has none yet).
      if (type === 'complete' && typeof id === 'string') extra.operations.complete(id);
      try {
        // graphql-ws validates an already parsed message as it does a string (4400 for a bad one). In the gateway's
        // drain scope: a chat completion it starts finds the waits to end there.
        const handled = onMessage;
        await handled(message as never);
      } catch (error) {
        logFailure(log, extra.requestId, 'a WebSocket message', unmasked(error));
        socket.close(CloseCode.InternalServerError, 'Internal server error');
      } finally {
        // graphql-ws's handling of a subscribe resolves once its operation is over (or refused).
        if (opened) {
          extra.operations.ended(opened);
          extra.running.delete(opened);
          socketDrain.settled(extra);
        }
      }
    });
    socket.once('close', (code, reason) => {
      socketDrain.closed(extra);
      peer.stop();
      connections.get(extra)?.watched?.close();
      connections.get(extra)?.release?.();
      for (const release of places.get(extra)?.values() ?? []) release();
      extra.operations.close();
      places.delete(extra);
      extra.access?.closed(code);
      void closed(code, reason.toString());
    });
  });

  /**
   * Starts draining (see the top): upgrades are refused with 503 from now on, subscriptions without end are
   * completed, and each socket is closed with 1001 once nothing else runs on it. Resolves once all are closed.
   */
  const drain = (): Promise<void> => {
    if (allClosed) return allClosed;
    allClosed = new Promise<void>((resolve) => wss.close(() => resolve()));
    socketDrain.start();
    return allClosed;
  };

  return {
    /** Completes a WebSocket upgrade at the GraphQL path (an invalid handshake is ws's 400). */
    handleUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      wss.handleUpgrade(req, socket, head, (client) => {
        transports.set(client, socket);
        wss.emit('connection', client, req);
      }),
    drain,
    /**
     * Closes every socket with 1001 "Going away" now, whatever runs on it, and resolves once all are closed. A peer
     * that does not answer the close frame (or reads nothing, so that the frame never leaves) is cut after
     * `graceMs`: `ws` alone would wait 30 s for it, and the gateway's close with it.
     */
    close: async (graceMs = CLOSE_GRACE_MS) => {
      const closed = drain();
      for (const client of wss.clients) client.close(1001, 'Going away');
      const cut = setTimeout(() => {
        for (const client of wss.clients) client.terminate();
      }, graceMs);
      await closed;
      clearTimeout(cut);
    },
  };
}
