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
import {
  findTeams,
  findUsers,
  listTeamMembers,
  type MembershipRecord,
  type TeamRecord,
  type UserRecord,
} from '../../storage/identity-repository.js';
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

/**
 * The request's dataloaders, each made on first use: a subscription that
 * never loads anything (most of them) carries none, and the getters live on
 * the prototype, so an unused set costs one small object.
 */
export class Loaders {
  private made: {
    endpoint?: DataLoader<string, EndpointRecord | undefined>;
    project?: DataLoader<string, ProjectRecord | undefined>;
    team?: DataLoader<string, TeamRecord | undefined>;
    user?: DataLoader<string, UserRecord | undefined>;
    projectsOfTeam?: DataLoader<string, ProjectRecord[]>;
    membersOfTeam?: DataLoader<string, MembershipRecord[]>;
  } = {};

  constructor(private readonly db: Services['db']) {}

  /** Endpoints come with their project and team, which prime those loaders: `endpoint { project { team } }` is one statement. */
  get endpoint() {
    return (this.made.endpoint ??= byId<EndpointRecord>(async (ids) => {
      const rows = await findEndpointsWithOwners(this.db, ids);
      for (const row of rows) {
        this.project.prime(row.project.id, row.project);
        this.team.prime(row.team.id, row.team);
      }
      return rows.map((row) => row.endpoint);
    }));
  }

  get project() {
    return (this.made.project ??= byId<ProjectRecord>((ids) => findProjects(this.db, ids)));
  }

  get team() {
    return (this.made.team ??= byId<TeamRecord>((ids) => findTeams(this.db, ids)));
  }

  get user() {
    return (this.made.user ??= byId<UserRecord>((ids) => findUsers(this.db, ids)));
  }

  get projectsOfTeam() {
    return (this.made.projectsOfTeam ??= groupedBy<ProjectRecord>(
      (ids) => listProjectsOfTeams(this.db, ids),
      (p) => p.teamId,
    ));
  }

  get membersOfTeam() {
    return (this.made.membersOfTeam ??= groupedBy<MembershipRecord>(
      (ids) => listTeamMembers(this.db, ids),
      (m) => m.teamId,
    ));
  }
}

export function createLoaders(services: Services): Loaders {
  return new Loaders(services.db);
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
