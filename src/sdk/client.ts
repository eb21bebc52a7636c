/**
 * The typed GraphQL SDK: a graphql-request client preconfigured with the API
 * key (and optionally a team), to be used with the generated documents:
 *
 *   const client = createClient('http://localhost:8080', apiKey);
 *   const { endpoint } = await client.request(EndpointDocument, { id });
 */
import { GraphQLClient } from 'graphql-request';

export * from './generated/graphql.js';

export interface ClientOptions {
  /** Act as this team (sent as X-Friendli-Team). */
  team?: string;
  fetch?: typeof fetch;
}

export function createClient(baseUrl: string, apiKey: string, options: ClientOptions = {}): GraphQLClient {
  return new GraphQLClient(new URL('/graphql', baseUrl).toString(), {
    headers: { authorization: `Bearer ${apiKey}`, ...(options.team ? { 'x-friendli-team': options.team } : {}) },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}
