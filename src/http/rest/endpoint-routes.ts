/**
 * The management routes of the contract's table, under /dedicated. Each
 * handler authenticates, calls the endpoint service and shapes the answer;
 * the rules live in the service.
 */
import type { IncomingMessage } from 'node:http';
import type { Result } from '../../domain/result.js';
import type { Services } from '../../services/index.js';
import { findTeams } from '../../storage/identity-repository.js';
import { TEAM_HEADERS, type Principal } from '../../services/principal.js';
import { Router, unwrap, type RouteRequest, type RouteResponse } from './router.js';
import { specObject, statusObject } from './responses.js';

/** A request header's (first) value. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function teamHeaderOf(get: (name: string) => string | null | undefined): string | undefined {
  for (const name of TEAM_HEADERS) {
    const value = get(name);
    if (value) return value;
  }
  return undefined;
}

/** The caller of a Node request: its bearer key and team header. */
export function authenticateRequest(services: Services, req: IncomingMessage): Promise<Result<Principal>> {
  return services.auth.authenticate(
    header(req, 'authorization'),
    teamHeaderOf((n) => header(req, n)),
  );
}

export function endpointRoutes(services: Services): Router {
  const authed =
    (handler: (principal: Principal, request: RouteRequest) => Promise<RouteResponse>) =>
    async (request: RouteRequest): Promise<RouteResponse> => {
      const principal = unwrap(await authenticateRequest(services, request.req));
      return handler(principal, request);
    };
  const { endpoints } = services;
  const base = '/dedicated/beta/endpoint';

  const router = new Router()
    .add(
      'POST',
      base,
      authed(async (principal, { body }) => ({
        status: 200,
        body: statusObject(unwrap(await endpoints.create(principal, await body())), 'create'),
      })),
    )
    .add(
      'GET',
      base,
      authed(async (principal, { query }) => {
        const page = unwrap(
          await endpoints.list(principal, {
            projectId: query.get('projectId'),
            cursor: query.get('cursor'),
            limit: query.get('limit') ?? undefined,
          }),
        );
        return {
          status: 200,
          body: { data: Object.fromEntries(page.items.map((e) => [e.id, statusObject(e)])), nextCursor: page.nextCursor },
        };
      }),
    )
    .add(
      'GET',
      `${base}/:id`,
      authed(async (principal, { params }) => ({ status: 200, body: specObject(unwrap(await endpoints.get(principal, params.id!))) })),
    )
    .add(
      'PUT',
      `${base}/:id`,
      authed(async (principal, { params, body }) => ({
        status: 200,
        body: specObject(unwrap(await endpoints.update(principal, params.id!, (await body()) ?? {}))),
      })),
    )
    .add(
      'DELETE',
      `${base}/:id`,
      authed(async (principal, { params }) => {
        unwrap(await endpoints.delete(principal, params.id!));
        return { status: 204 };
      }),
    )
    .add(
      'GET',
      `${base}/:id/version`,
      authed(async (principal, { params, query }) => {
        const { endpoint, page } = unwrap(
          await endpoints.versions(principal, params.id!, { cursor: query.get('cursor'), limit: query.get('limit') ?? undefined }),
        );
        return {
          status: 200,
          body: {
            data: Object.fromEntries(page.items.map((v) => [String(v.versionIndex), specObject(endpoint, v)])),
            nextCursor: page.nextCursor,
          },
        };
      }),
    )
    .add(
      'GET',
      `${base}/:id/status`,
      authed(async (principal, { params }) => ({ status: 200, body: statusObject(unwrap(await endpoints.get(principal, params.id!))) })),
    );

  router.add(
    'POST',
    '/dedicated/endpoint/wandb-artifact-create',
    authed(async (principal, { body }) => {
      const { endpoint, project } = unwrap(await endpoints.createFromArtifact(principal, await body()));
      const [team] = await findTeams(services.db, [project.teamId]);
      return {
        status: 200,
        body: {
          endpointId: endpoint.id,
          endpointName: endpoint.current.spec.name,
          projectId: project.id,
          projectName: project.name,
          teamId: project.teamId,
          teamName: team!.name,
        },
      };
    }),
  );

  for (const action of ['restart', 'wake', 'sleep', 'terminate'] as const) {
    router.add(
      'PUT',
      `${base}/:id/${action}`,
      authed(async (principal, { params }) => ({
        status: 200,
        body: statusObject(unwrap(await endpoints.act(principal, params.id!, action)), action),
      })),
    );
  }
  return router;
}
