/**
 * Per-request GraphQL state: the caller, the shared services, and the
 * request's batched reads (the dataloaders, `services/request-reads.ts`),
 * made fresh for each request (and each WebSocket subscription), so that
 * nested fields batch their reads and no cache outlives a request.
 */
import type { IncomingMessage } from 'node:http';
import type { YogaServerInstance } from 'graphql-yoga';
import type { EventHub } from '../../live/event-hub.js';
import type { ChatRouter } from '../../router/chat-router.js';
import type { Services } from '../../services/index.js';
import type { Principal } from '../../services/principal.js';
import type { RequestReads } from '../../services/request-reads.js';
import type { ResultSink } from './shared-execution.js';

/** The request's dataloaders: root lookups check access, the loaders serve nested fields. */
export type Loaders = RequestReads;

export function createLoaders(services: Services): Loaders {
  return services.requestReads();
}

export interface GraphQLContext {
  principal: Principal;
  services: Services;
  /** Routes chat completions to replicas (the subscription and mutation use it). */
  chat: ChatRouter;
  /** Live endpoint events for the subscriptions, each subscriber's buffer, and how long it may lag. */
  live: { hub: EventHub; bufferSize: number; maxLagMs: number };
  loaders: Loaders;
  /** Aborts when the operation's client is gone (its HTTP request closed, its socket closed, or it completed the operation). */
  signal: AbortSignal;
}

/** What a transport hands yoga with each operation, besides the request. */
export interface ServerContext {
  req?: IncomingMessage;
  /** The caller, when the transport has authenticated them already (a socket's `onConnect`, a POST's key). */
  principal?: Principal;
  /** Where a subscription's shared results are written directly (its socket, or its SSE response). */
  resultSink?: ResultSink;
  /** Aborts when the operation's client is gone; yoga's own HTTP handling has the request's signal instead. */
  signal?: AbortSignal;
  /** Set by the transports that count and watch subscriptions (http-entry.ts, websocket.ts); yoga's own HTTP serves none. */
  transport?: 'sse' | 'websocket';
}

/** The gateway's yoga instance, as the transports use it. */
export type GatewayYoga = YogaServerInstance<ServerContext, GraphQLContext>;
