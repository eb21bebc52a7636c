/**
 * graphql-yoga over HTTP (and SSE), plus graphql-ws over WebSocket, sharing
 * one context factory: a request's principal comes from its Authorization
 * header, a socket's from its `connection_init` payload.
 */
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { GraphQLError } from 'graphql';
import { createYoga, type GraphiQLOptions, type Plugin } from 'graphql-yoga';
import { failureOfDomainError } from '../../domain/errors.js';
import type { ChatRouter } from '../../router/chat-router.js';
import type { Services } from '../../services/index.js';
import { authenticate, credentialsOfFetchRequest } from '../authenticate.js';
import type { Log } from '../request-id.js';
import { graphqlErrorOf, maskGraphQLError, useErrorReporting } from './errors.js';
import { useClientInputRules } from './client-input.js';
import { createLoaders, type GatewayYoga, type GraphQLContext, type ServerContext } from './context.js';
import { DEFAULT_GRAPHQL_LIMITS, useOperationLimits, type GraphQLSecurityOptions } from './limits.js';
import { schema } from './schema/index.js';
import { useSharedSubscriptionExecution } from './shared-execution.js';
import { serveWebSocket, type WebSocketOptions } from './websocket.js';

export const GRAPHQL_PATH = '/graphql';

const GRAPHIQL_QUERY = '# Put your API key in Headers (below), then run:\n{\n  me {\n    user {\n      email\n    }\n  }\n}\n';
const GRAPHIQL_HEADERS = JSON.stringify({ Authorization: 'Bearer <your API key>' }, null, 2);

/**
 * GraphiQL as a new user first sees it: the headers pane open and holding the
 * Authorization header to fill in, and a query that answers with any valid
 * key. Headers are not persisted, so a key typed there stays out of the
 * browser's storage.
 */
export const GRAPHIQL_OPTIONS: GraphiQLOptions & {
  /** The first tab's query: yoga's GraphiQL reads `query` (absent from the type); `defaultQuery` seeds new tabs. */
  query: string;
  headers: string;
} = {
  title: 'Dedicated endpoints GraphiQL',
  query: GRAPHIQL_QUERY,
  defaultQuery: GRAPHIQL_QUERY,
  headers: GRAPHIQL_HEADERS,
  defaultHeaders: GRAPHIQL_HEADERS,
  defaultEditorToolsVisibility: 'headers',
  shouldPersistHeaders: false,
};

/**
 * A subscription that reaches yoga's own HTTP handling (a client that accepts
 * only JSON or multipart, a body that is not JSON) is refused: yoga's streams
 * would be neither counted per user nor ended when the key is revoked.
 */
function useWatchedSubscriptionsOnly(): Plugin<ServerContext> {
  return {
    onSubscribe({ args, setResultAndStopExecution }) {
      if ((args.contextValue as ServerContext).transport) return;
      setResultAndStopExecution({
        errors: [
          new GraphQLError(
            'subscriptions are served over the WebSocket (graphql-transport-ws), or as SSE: POST a JSON body to /graphql with Accept: text/event-stream',
            { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } },
          ),
        ],
      });
    },
  };
}

/** The GraphiQL page (about 9 MB, its assets inlined), rendered once per set of options rather than per request. */
const graphiqlPages = new Map<string, string>();
function renderGraphiQLOnce(options: GraphiQLOptions): string {
  const key = JSON.stringify(options);
  let page = graphiqlPages.get(key);
  if (page === undefined) {
    page = renderGraphiQL(options);
    if (graphiqlPages.size >= 4) graphiqlPages.clear();
    graphiqlPages.set(key, page);
  }
  return page;
}

/**
 * `security`: operation limits and introspection (`limits.ts`); GraphiQL is
 * served only where introspection is on, with its scripts, styles and
 * workers inlined from `@graphql-yoga/render-graphiql` (no CDN: it works
 * offline and loads nothing from another host). CORS is answered by the HTTP
 * server for every route (`../cors.ts`), so yoga adds none of its own.
 */
export function createGraphQL(
  services: Services,
  chat: ChatRouter,
  live: GraphQLContext['live'],
  security: GraphQLSecurityOptions = { limits: DEFAULT_GRAPHQL_LIMITS, introspection: true },
  log: Log = (message, error) => console.error(message, error),
): GatewayYoga {
  return createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    logging: false,
    // Client errors and database outages get their own errors (400, 415, 503); anything else is masked,
    // and logged once with its request id by useErrorReporting (yoga's own logging is off).
    maskedErrors: { maskError: maskGraphQLError },
    landingPage: false,
    graphiql: security.introspection ? GRAPHIQL_OPTIONS : false,
    renderGraphiQL: renderGraphiQLOnce,
    cors: false,
    plugins: [
      useErrorReporting(log),
      // Before anything else: an operation over a limit is refused before its context (authentication) is built.
      useOperationLimits(security),
      // Unreadable requests answer 400 or 415 naming the field; no operation runs with a NUL in its input.
      useClientInputRules(),
      useWatchedSubscriptionsOnly(),
      // Live-status subscribers watching the same endpoint with the same query share each event's execution.
      useSharedSubscriptionExecution<GraphQLContext>({
        fields: ['endpointStatus', 'endpointEvents'],
        audienceOf: ({ principal }) => (principal ? `${principal.user.id}\u0000${principal.actingTeamId ?? ''}` : null),
        sinkOf: (context) => (context as ServerContext).resultSink,
      }),
    ],
    context: async ({ request, principal, signal }) => {
      if (!principal) {
        const result = await authenticate(services, credentialsOfFetchRequest(request));
        if (result.type === 'error') throw graphqlErrorOf(failureOfDomainError(result.error), 'request')!;
        principal = result.value;
      }
      return { principal, services, chat, live, loaders: createLoaders(services), signal: signal ?? request.signal };
    },
  });
}

/**
 * Serves graphql-ws (see `websocket.ts`); the server routes upgrades at
 * GRAPHQL_PATH to its `handleUpgrade`. Auth failures close the socket with
 * 4401 or 4403 and a reason; malformed messages with 4400.
 */
export function createWebSocket(yoga: GatewayYoga, services: Services, options: WebSocketOptions = {}) {
  return serveWebSocket(yoga, services, options);
}
