/**
 * A real gateway for a test file: its own database, the real services, and the
 * HTTP server on a free port, plus fluent seeds (`seed.user().project().endpoint()`)
 * and clients that speak to it over real sockets.
 */
import type { GraphQLClient } from 'graphql-request';
import type { EndpointStatus } from '../../src/domain/lifecycle.js';
import { startGateway, type Gateway } from '../../src/gateway.js';
import { createClient } from '../../src/sdk/client.js';
import { createServices, type Services } from '../../src/services/index.js';
import { authenticate, type Principal } from '../../src/services/principal.js';
import type { Sql } from '../../src/storage/database.js';
import { updateEndpointState } from '../../src/storage/endpoints-repository.js';
import type { UserRecord } from '../../src/domain/identity.js';
import { desiredStateOf } from '../../src/domain/lifecycle.js';
import { onCleanup } from './cleanup.js';
import { createTestDatabase, queryCounter, type QueryCounter, type TestDatabase } from './database.js';

export interface RestResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export type RestClient = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<RestResponse>;

export function restClient(baseUrl: string, apiKey?: string): RestClient {
  return async (method, path, body, headers = {}) => {
    const response = await fetch(new URL(path, baseUrl), {
      method,
      headers: {
        ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
  };
}

export const H100_X1 = 'TwD5AqnBSVN0';

export function createBody(projectId: string, overrides: Record<string, unknown> = {}) {
  return { projectId, name: 'demo', instanceOptionId: H100_X1, advanced: {}, hfModelRepo: 'org/tiny-model', ...overrides };
}

/**
 * An endpoint created through the services by `principal` in `projectId` (a repository the tests' hub does not hold
 * unless `overrides` names another): its id.
 */
export async function createEndpointThrough(
  services: Services,
  principal: Principal,
  projectId: string,
  overrides: Record<string, unknown> = {},
): Promise<string> {
  const created = await services.endpoints.create(principal, createBody(projectId, { hfModelRepo: 'test-org/none', ...overrides }));
  if (created.type === 'error') throw new Error(created.error.message);
  return created.value.id;
}

/**
 * A user seeded straight through the services (no gateway), authenticated by a fresh API key, and a project of
 * theirs: for tests that drive the services or the controller directly.
 */
export async function seedPrincipal(sql: Sql, services: Services, name: string): Promise<{ principal: Principal; projectId: string }> {
  const user = await services.identity.createUser('system', { email: `${name.replace(/\W+/g, '-')}-${++userCounter}@example.com`, name });
  if (user.type === 'error') throw new Error(user.error.message);
  const key = await services.identity.createApiKey('system', { name: 'k', user: user.value.id });
  if (key.type === 'error') throw new Error(key.error.message);
  const auth = await authenticate(sql, `Bearer ${key.value.secret}`, null);
  if (auth.type === 'error') throw new Error(auth.error.message);
  const project = await services.identity.createProject(auth.value, { name });
  if (project.type === 'error') throw new Error(project.error.message);
  return { principal: auth.value, projectId: project.value.id };
}

export interface SeededProject {
  id: string;
  teamId: string;
  /** Creates an endpoint through the REST route; returns its id. */
  endpoint(overrides?: Record<string, unknown>): Promise<string>;
}

export interface SeededUser {
  user: UserRecord;
  key: string;
  /** The user's personal (default) team. */
  teamId: string;
  rest: RestClient;
  graphql: GraphQLClient;
  project(name?: string, teamId?: string): Promise<SeededProject>;
}

export interface TestGateway extends TestDatabase {
  gateway: Gateway;
  url: string;
  services: Services;
  /** SQL statements sent since the last reset. */
  queries: QueryCounter;
  seed: { user(options?: { admin?: boolean }): Promise<SeededUser> };
  /** Stands in for the controller (a later issue): forces an endpoint's status. */
  setStatus(endpointId: string, status: EndpointStatus): Promise<void>;
}

let userCounter = 0;

export function createSeed(services: Services, baseUrl: string): { user(options?: { admin?: boolean }): Promise<SeededUser> } {
  const seedUser = async (options: { admin?: boolean } = {}): Promise<SeededUser> => {
    const n = ++userCounter;
    const created = await services.identity.createUser('system', {
      email: `user${n}-${process.pid}@example.com`,
      name: `User ${n}`,
      isAdmin: options.admin ?? false,
    });
    if (created.type === 'error') throw new Error(created.error.message);
    const user = created.value;
    const key = await services.identity.createApiKey('system', { name: 'test', user: user.id });
    if (key.type === 'error') throw new Error(key.error.message);
    const secret = key.value.secret;
    const rest = restClient(baseUrl, secret);
    return {
      user,
      key: secret,
      teamId: user.defaultTeamId!,
      rest,
      graphql: createClient(baseUrl, secret),
      async project(name = 'project', teamId = user.defaultTeamId!) {
        const project = (
          await rest('POST', '/graphql', {
            query:
              'mutation($name: String!, $teamId: ID) { createProject(name: $name, teamId: $teamId) { ... on CreateProjectSuccess { project { id } } } }',
            variables: { name, teamId },
          })
        ).body.data.createProject.project as { id: string };
        return {
          id: project.id,
          teamId,
          async endpoint(overrides = {}) {
            const response = await rest('POST', '/dedicated/beta/endpoint', createBody(project.id, overrides));
            if (response.status !== 200) throw new Error(`seed endpoint failed: ${JSON.stringify(response.body)}`);
            return response.body.endpointId as string;
          },
        };
      },
    };
  };
  return { user: seedUser };
}

export async function startTestGateway(): Promise<TestGateway> {
  const queries = queryCounter();
  const db = await createTestDatabase({ onQuery: queries.onQuery });
  const services = createServices(db.sql);
  const gateway = await startGateway(db.sql, services, { port: 0, host: '127.0.0.1', log: () => {} });
  onCleanup(async () => {
    await gateway.close();
    await db.close();
  });

  return {
    ...db,
    gateway,
    url: gateway.url,
    services,
    queries,
    seed: createSeed(services, gateway.url),
    async setStatus(endpointId, status) {
      await updateEndpointState(db.sql, endpointId, { status, phase: null, errorCode: null, desiredState: desiredStateOf(status) });
    },
  };
}
