import type { Sql } from '../storage/database.js';
import { EndpointService } from './endpoint-service.js';
import { IdentityService } from './identity-service.js';

/** The domain services, made once per process and shared by every surface. */
export interface Services {
  db: Sql;
  endpoints: EndpointService;
  identity: IdentityService;
}

export function createServices(db: Sql): Services {
  return { db, endpoints: new EndpointService(db), identity: new IdentityService(db) };
}
