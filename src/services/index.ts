import type { Sql } from '../storage/database.js';
import { EndpointService } from './endpoint-service.js';
import { IdentityService } from './identity-service.js';
import { Authenticator } from './principal.js';

/** The domain services, made once per process and shared by every surface. */
export interface Services {
  db: Sql;
  auth: Authenticator;
  endpoints: EndpointService;
  identity: IdentityService;
}

export interface ServiceHooks {
  /** Called after an endpoint changed through the API (the controller reacts at once). */
  onEndpointChange?: (endpointId: string) => void;
}

export function createServices(db: Sql, hooks: ServiceHooks = {}): Services {
  const auth = new Authenticator(db);
  const identity = new IdentityService(db, auth);
  return { db, auth, endpoints: new EndpointService(db, identity, hooks.onEndpointChange), identity };
}
