/**
 * The domain services, made once per process and shared by every surface.
 * Handlers (REST routes, GraphQL resolvers, the CLI) reach storage only
 * through them; the raw database stays with the process's own wiring
 * (src/gateway.ts, src/app.ts), which is handed it.
 */
import type { Sql } from '../storage/database.js';
import { ChatAccess } from './chat-access.js';
import { EndpointService } from './endpoint-service.js';
import { IdentityService } from './identity-service.js';
import { MetricsService } from './metrics-service.js';
import { Authenticator } from './principal.js';
import { RequestReads } from './request-reads.js';
import { ReplicaService } from './replica-service.js';
import type { Runtime } from '../runtime/runtime.js';

export interface Services {
  auth: Authenticator;
  endpoints: EndpointService;
  identity: IdentityService;
  /** What the chat router reads, and its access check. */
  chatAccess: ChatAccess;
  /** An endpoint's replicas, their engine logs, and its event history. */
  replicas: ReplicaService;
  /** Endpoint metrics series, request activity and live figures. */
  metrics: MetricsService;
  /** One request's batched reads (GraphQL's dataloaders); call once per request. */
  requestReads(): RequestReads;
}

export interface ServiceHooks {
  /** Called after an endpoint changed through the API (the controller reacts at once). */
  onEndpointChange?: (endpointId: string) => void;
  /** Where replicas run: engine logs are read through it. */
  runtime?: Runtime;
  /** The engines come from ENGINE_COMMAND (their logs may quote requests). */
  externalEngine?: boolean;
}

export function createServices(db: Sql, hooks: ServiceHooks = {}): Services {
  const auth = new Authenticator(db);
  const identity = new IdentityService(db, auth);
  const endpoints = new EndpointService(db, identity, hooks.onEndpointChange);
  const services: Services = {
    auth,
    endpoints,
    identity,
    chatAccess: new ChatAccess(db, endpoints),
    replicas: new ReplicaService(db, endpoints, { runtime: hooks.runtime, externalEngine: hooks.externalEngine === true }),
    metrics: new MetricsService(db),
    requestReads: () => new RequestReads(db),
  };
  return services;
}
