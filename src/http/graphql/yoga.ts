/**
 * graphql-yoga over HTTP (and SSE), plus graphql-ws over WebSocket, sharing
 * one context factory: a request's principal comes from its Authorization
 * header, a socket's from its `connection_init` payload.
 */
import type { IncomingMessage, Server } from 'node:http';
import { GraphQLError, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { CloseCode } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import { WebSocket, WebSocketServer } from 'ws';
import type { DomainError } from '../../domain/result.js';
import type { ChatRouter } from '../../router/chat-router.js';
import type { Services } from '../../services/index.js';
import type { Principal } from '../../services/principal.js';
import { teamHeaderOf } from '../rest/endpoint-routes.js';
import { createLoaders, type GraphQLContext } from './context.js';
import { schema } from './schema/index.js';
import { resultJson, useSharedSubscriptionExecution, type ResultSink } from './shared-execution.js';

export const GRAPHQL_PATH = '/graphql';

interface ServerContext {
  req?: IncomingMessage;
  /** Set for WebSocket operations, authenticated once in `onConnect`. */
  principal?: Principal;
  /** Where a subscription's shared results are written directly (its socket, or its SSE response). */
  resultSink?: ResultSink;
}

/** Past this much unsent data on a socket, shared results wait for the socket like any other message. */
const SOCKET_HIGH_WATER = 256 * 1024;

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

function authError(error: DomainError): GraphQLError {
  const status = error.type === 'FORBIDDEN' ? 403 : 401;
  return new GraphQLError(error.message, { extensions: { code: error.type, http: { status } } });
}

export function createGraphQL(services: Services, chat: ChatRouter, live: GraphQLContext['live']): YogaServerInstance<ServerContext, GraphQLContext> {
  return createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    logging: false,
    maskedErrors: true,
    landingPage: false,
    plugins: [
      // Live-status subscribers watching the same endpoint with the same query share each event's execution.
      useSharedSubscriptionExecution<GraphQLContext>({
        fields: ['endpointStatus', 'endpointEvents'],
        audienceOf: ({ principal }) => (principal ? `${principal.user.id}\u0000${principal.actingTeamId ?? ''}` : null),
        sinkOf: (context) => (context as ServerContext).resultSink,
      }),
    ],
    context: async ({ request, principal }) => {
      if (!principal) {
        const result = await services.auth.authenticate(request.headers.get('authorization'), teamHeaderOf((n) => request.headers.get(n)));
        if (result.type === 'error') throw authError(result.error);
        principal = result.value;
      }
      return { principal, services, chat, live, loaders: createLoaders(services) };
    },
  });
}

/** Serves graphql-ws on the same path. Auth failures close the socket with 4401 or 4403 and a reason. */
export function attachWebSocket(server: Server, yoga: YogaServerInstance<ServerContext, GraphQLContext>, services: Services) {
  const wss = new WebSocketServer({ server, path: GRAPHQL_PATH });
  const principals = new WeakMap<object, Principal>();
  type Run = (args: ExecutionArgs) => unknown;
  const disposable = useServer<Record<string, unknown>>(
    {
      onConnect: async (ctx) => {
        const params = ctx.connectionParams ?? {};
        const authorization = typeof params.authorization === 'string' ? params.authorization : undefined;
        const team = ['x-friendli-team', 'x-team-id', 'teamId'].map((k) => params[k]).find((v) => typeof v === 'string') as string | undefined;
        const result = await services.auth.authenticate(authorization, team);
        if (result.type === 'error') {
          const code = result.error.type === 'FORBIDDEN' ? CloseCode.Forbidden : CloseCode.Unauthorized;
          ctx.extra.socket.close(code, result.error.message.slice(0, 120));
          return false;
        }
        principals.set(ctx.extra, result.value);
        // The upgrade request is not needed past authentication: let it go rather than keep it for the socket's life.
        (ctx.extra as { request?: IncomingMessage }).request = undefined;
        return true;
      },
      onSubscribe: async (ctx, id, params) => {
        // Only what the context needs: a spread of graphql-ws's context would be copied into every subscription.
        const resultSink = new WebSocketNextMessages(ctx.extra.socket as WebSocket, id);
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({ principal: principals.get(ctx.extra), params, resultSink });
        const args: ExecutionArgs = {
          schema,
          operationName: params.operationName,
          document: parse(params.query),
          variableValues: params.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
        const errors = validate(args.schema, args.document);
        return errors.length > 0 ? errors : args;
      },
      execute: (args) => (args.rootValue as { execute: Run }).execute(args) as never,
      subscribe: (args) => (args.rootValue as { subscribe: Run }).subscribe(args) as never,
    },
    wss,
  );
  return {
    close: async () => {
      await disposable.dispose();
      wss.close();
    },
  };
}
