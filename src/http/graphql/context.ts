/**
 * Per-request GraphQL state: the caller, the shared services, and dataloaders
 * made fresh for each request (and each WebSocket subscription), so that
 * nested fields batch their reads and no cache outlives a request.
 */
import DataLoader from 'dataloader';
import type { EventHub } from '../../live/event-hub.js';
import type { ChatRouter } from '../../router/chat-router.js';
import type { Services } from '../../services/index.js';
import type { Principal } from '../../services/principal.js';
import { findEndpointsWithOwners, type EndpointRecord } from '../../storage/endpoints-repository.js';
import { findTeams, findUsers, listTeamMembers, type MembershipRecord, type TeamRecord, type UserRecord } from '../../storage/identity-repository.js';
import { findProjects, listProjectsOfTeams, type ProjectRecord } from '../../storage/projects-repository.js';

function byId<T extends { id: string }>(load: (ids: readonly string[]) => Promise<T[]>) {
  return new DataLoader<string, T | undefined>(async (ids) => {
    const rows = new Map((await load(ids)).map((row) => [row.id, row]));
    return ids.map((id) => rows.get(id));
  });
}

function groupedBy<T>(load: (keys: readonly string[]) => Promise<T[]>, keyOf: (row: T) => string) {
  return new DataLoader<string, T[]>(async (keys) => {
    const groups = new Map<string, T[]>();
    for (const row of await load(keys)) {
      const key = keyOf(row);
      groups.set(key, [...(groups.get(key) ?? []), row]);
    }
    return keys.map((key) => groups.get(key) ?? []);
  });
}

function loaderFactories(services: Services, loaders: () => Loaders) {
  const { db } = services;
  return {
    // Endpoints come with their project and team, which prime those loaders: `endpoint { project { team } }` is one statement.
    endpoint: () =>
      byId<EndpointRecord>(async (ids) => {
        const rows = await findEndpointsWithOwners(db, ids);
        const { project, team } = loaders();
        for (const row of rows) {
          project.prime(row.project.id, row.project);
          team.prime(row.team.id, row.team);
        }
        return rows.map((row) => row.endpoint);
      }),
    project: () => byId<ProjectRecord>((ids) => findProjects(db, ids)),
    team: () => byId<TeamRecord>((ids) => findTeams(db, ids)),
    user: () => byId<UserRecord>((ids) => findUsers(db, ids)),
    projectsOfTeam: () => groupedBy<ProjectRecord>((ids) => listProjectsOfTeams(db, ids), (p) => p.teamId),
    membersOfTeam: () => groupedBy<MembershipRecord>((ids) => listTeamMembers(db, ids), (m) => m.teamId),
  };
}

export type Loaders = { [K in keyof ReturnType<typeof loaderFactories>]: ReturnType<ReturnType<typeof loaderFactories>[K]> };

/**
 * The request's dataloaders, each made on first use: a subscription that
 * never loads anything (most of them) carries none.
 */
export function createLoaders(services: Services): Loaders {
  const made: Partial<Loaders> = {};
  const loaders = new Proxy(made, {
    get: (_, key: keyof Loaders) => (made[key] ??= factories[key]() as never),
  }) as Loaders;
  const factories = loaderFactories(services, () => loaders);
  return loaders;
}

export interface GraphQLContext {
  principal: Principal;
  services: Services;
  /** Routes chat completions to replicas (the subscription and mutation use it). */
  chat: ChatRouter;
  /** Live endpoint events for the subscriptions, each subscriber's buffer, and how long it may lag. */
  live: { hub: EventHub; bufferSize: number; maxLagMs: number };
  loaders: Loaders;
}
