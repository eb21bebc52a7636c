import type { Sql } from '../storage/database.js';
import { EndpointService } from './endpoint-service.js';
import { IdentityService } from './identity-service.js';

/** The domain services, made once per process and shared by every surface. */
export interface Services {
  db: Sql;
  endpoints: EndpointService;
  identity: IdentityService;
}

export interface ServiceHooks {
  /** Called after an endpoint changed through the API (the controller reacts at once). */
  onEndpointChange?: (endpointId: string) => void;
}

export function createServices(db: Sql, hooks: ServiceHooks = {}): Services {
  const identity = new IdentityService(db);
  return { db, endpoints: new EndpointService(db, identity, hooks.onEndpointChange), identity };
}
