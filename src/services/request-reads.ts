/**
 * One request's batched reads (GraphQL's dataloaders), made fresh for each
 * request and each WebSocket subscription, so that nested fields batch their
 * reads and no cache outlives a request.
 *
 * Two kinds of read: the `…For(principal, id)` lookups check access (the
 * rule of `principal.ts`) and are what a query's root calls; the loaders
 * (`endpoint`, `project`, `team`, …) do not, and serve the fields of an
 * object the caller already sees (an endpoint's project, a team's members).
 */
import DataLoader from 'dataloader';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { MembershipRecord, ProjectRecord, TeamInvitationRecord, TeamRecord, UserRecord } from '../domain/identity.js';
import type { Queryable } from '../storage/database.js';
import { findEndpointsWithOwners } from '../storage/endpoints-repository.js';
import { findTeams, findUsers, listTeamMembers } from '../storage/identity-repository.js';
import { findProjects, listProjectsOfTeams } from '../storage/projects-repository.js';
import { listInvitationsOfTeams } from '../storage/team-invitations-repository.js';
import { canAccessTeam, isTeamOwner, visibleTo, type Principal } from './principal.js';

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
 * The loaders are each made on first use: a subscription that never loads
 * anything (most of them) carries none, and the getters live on the
 * prototype, so an unused set costs one small object.
 */
export class RequestReads {
  private made: {
    endpoint?: DataLoader<string, EndpointRecord | undefined>;
    project?: DataLoader<string, ProjectRecord | undefined>;
    team?: DataLoader<string, TeamRecord | undefined>;
    user?: DataLoader<string, UserRecord | undefined>;
    projectsOfTeam?: DataLoader<string, ProjectRecord[]>;
    membersOfTeam?: DataLoader<string, MembershipRecord[]>;
    invitationsOfTeam?: DataLoader<string, TeamInvitationRecord[]>;
  } = {};

  constructor(private readonly db: Queryable) {}

  /** The endpoint, when the caller may see it. */
  async endpointFor(principal: Principal, id: string): Promise<EndpointRecord | undefined> {
    return visibleTo(principal, await this.endpoint.load(id));
  }

  /** The project, when the caller may see it. */
  async projectFor(principal: Principal, id: string): Promise<ProjectRecord | undefined> {
    return visibleTo(principal, await this.project.load(id));
  }

  /** The team, when the caller belongs to it. */
  async teamFor(principal: Principal, id: string): Promise<TeamRecord | undefined> {
    return canAccessTeam(principal, id) ? this.team.load(id) : undefined;
  }

  /** A team's pending invitations, when the caller owns the team (other members see none). */
  async teamInvitationsFor(principal: Principal, teamId: string): Promise<TeamInvitationRecord[]> {
    return isTeamOwner(principal, teamId) ? this.invitationsOfTeam.load(teamId) : [];
  }

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

  get invitationsOfTeam() {
    return (this.made.invitationsOfTeam ??= groupedBy<TeamInvitationRecord>(
      (ids) => listInvitationsOfTeams(this.db, ids),
      (i) => i.teamId,
    ));
  }

  get membersOfTeam() {
    return (this.made.membersOfTeam ??= groupedBy<MembershipRecord>(
      (ids) => listTeamMembers(this.db, ids),
      (m) => m.teamId,
    ));
  }
}
