/**
 * The management routes of the contract's table, under /dedicated. Each
 * handler authenticates, calls the endpoint service and shapes the answer;
 * the rules live in the service.
 */
import { invalidInputError } from '../../domain/errors.js';
import { FieldChecker, isObject } from '../../domain/field-checker.js';
import type { Services } from '../../services/index.js';
import type { Principal } from '../../services/principal.js';
import { authenticateRequest } from '../authenticate.js';
import { Router, unwrap, type RouteRequest, type RouteResponse } from './router.js';
import type { AccessWatch } from '../../live/access-watch.js';
import type { SubscriptionQuota } from '../../live/subscription-quota.js';
import { addReplicaRoutes } from './replica-routes.js';
import { specObject, statusObject, versionEntry } from './responses.js';

/**
 * The body of a route that takes none (the lifecycle actions, DELETE): empty,
 * `null` or `{}`; a member is refused as an unknown field (a 400 naming it),
 * as in every other body, so that a client sending options there learns they
 * are not read.
 */
async function noBody(request: RouteRequest): Promise<void> {
  const body = await request.body();
  if (body === undefined || body === null) return;
  if (!isObject(body)) throw invalidInputError([{ field: 'body', message: 'must be empty: this route takes no body' }]);
  const checker = new FieldChecker();
  checker.onlyKnown(body, []);
  if (checker.violations.length > 0) throw invalidInputError(checker.violations);
}

/** The REST routes; `access` ends a followed log as soon as its reader loses access (without it, only its end or its client's does). */
/** `access`: watches followed logs like subscriptions; `quota`: each followed log holds one of its user's places. */
/** `stallMs`: how long a followed log waits for a client that takes nothing of it (STREAM_STALL_TIMEOUT_MS). */
export function endpointRoutes(services: Services, access?: AccessWatch, quota?: SubscriptionQuota, stallMs?: number): Router {
  const authed =
    (handler: (principal: Principal, request: RouteRequest) => Promise<RouteResponse>) =>
    async (request: RouteRequest): Promise<RouteResponse> => {
      // The key before the body: a request without a valid one is refused unread.
      let principal = unwrap(await authenticateRequest(services, request.req));
      if (request.req.method === 'GET' || request.req.method === 'HEAD') return handler(principal, request);
      // Then the body, and the key again (from the cache the revocations clear): a key revoked, or a member removed,
      // while a slow client sent its body acts no more once that revocation has returned.
      const body = await request.body();
      principal = unwrap(await authenticateRequest(services, request.req));
      return handler(principal, { ...request, body: () => Promise.resolve(body) });
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
      // 200 with the final status object: the official SDK accepts only `200 application/json` here.
      authed(async (principal, request) => {
        await noBody(request);
        return { status: 200, body: statusObject(unwrap(await endpoints.delete(principal, request.params.id!))) };
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
            data: Object.fromEntries(page.items.map((v) => [String(v.versionIndex), versionEntry(endpoint, v)])),
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
      const team = unwrap(await services.identity.getTeam(principal, project.teamId));
      return {
        status: 200,
        body: {
          endpointId: endpoint.id,
          endpointName: endpoint.current.spec.name,
          projectId: project.id,
          projectName: project.name,
          teamId: project.teamId,
          teamName: team.name,
        },
      };
    }),
  );

  for (const action of ['restart', 'wake', 'sleep', 'terminate'] as const) {
    router.add(
      'PUT',
      `${base}/:id/${action}`,
      authed(async (principal, request) => {
        await noBody(request);
        return { status: 200, body: statusObject(unwrap(await endpoints.act(principal, request.params.id!, action)), action) };
      }),
    );
  }
  addReplicaRoutes(router, services, access, quota, stallMs);
  return router;
}
