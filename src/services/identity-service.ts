/**
 * Users, teams, membership, projects and API keys: who may do what. The
 * admin CLI, the GraphQL mutations and the first-start bootstrap all call
 * these functions.
 */
import { FieldChecker } from '../domain/field-checker.js';
import { hashApiKey, newApiKey, newId } from '../domain/ids.js';
import { fail, forbidden, invalidArgument, notFound, ok, type DomainError, type Result } from '../domain/result.js';
import {
  IDENTITY_NAME_MAX_LENGTH,
  namesUser,
  normalizeEmail,
  type ApiKeyRecord,
  type MembershipRecord,
  type ProjectRecord,
  type TeamInvitationRecord,
  type TeamRecord,
  type TeamRole,
  type UserRecord,
} from '../domain/identity.js';
import type { Queryable, Sql } from '../storage/database.js';
import {
  countUsers,
  deleteMember,
  findApiKey,
  findTeams,
  findUserByIdOrEmail,
  insertApiKey,
  insertMemberIfAbsent,
  insertTeam,
  insertUser,
  listApiKeys,
  listMemberships,
  listTeamMembers,
  lockMemberNamed,
  lockMemberRole,
  lockLiveApiKey,
  lockTeamOwners,
  revokeApiKey,
  setDefaultTeamIfNone,
  upsertMember,
} from '../storage/identity-repository.js';
import { findProjects, insertProject } from '../storage/projects-repository.js';
import {
  deleteInvitationFor,
  deleteInvitationsFor,
  deleteTeamInvitation,
  findInvitationTeam,
  listInvitationsFor,
  countPendingInvitations,
  takeInvitation,
  upsertInvitation,
} from '../storage/team-invitations-repository.js';
import {
  addsMembersDirectly,
  canAccessTeam,
  INVALID_KEY,
  isTeamOwner,
  outlastCachedPrincipals,
  visibleTo,
  type Principal,
} from './principal.js';

export interface CreatedApiKey {
  record: ApiKeyRecord;
  /** The key itself; it is shown once and never stored. */
  secret: string;
}

export interface Bootstrap {
  user: UserRecord;
  team: TeamRecord;
  project: ProjectRecord;
  key: CreatedApiKey;
}

/** What addTeamMember did: added a member or changed their role, or recorded an invitation (see there). */
export type TeamAddition = { type: 'member'; member: MembershipRecord } | { type: 'invitation'; invitation: TeamInvitationRecord };

const EMAIL = /^[^\s@]+@[^\s@]+$/;
/** Invitations one team may have waiting at once. */
export const MAX_PENDING_INVITATIONS = 100;
const USER_ID = /^usr_[0-9a-z]+$/;

/** The `user` argument of addTeamMember: a user id, or an email address (normalized). */
function readUserRef(value: unknown): Result<string> {
  const check = new FieldChecker();
  const ref = check.string({ user: value }, 'user', { required: true, maxLength: 254 })?.trim();
  if (ref === undefined) return fail(invalidArgument(check.violations));
  if (EMAIL.test(ref)) return ok(normalizeEmail(ref));
  if (USER_ID.test(ref)) return ok(ref);
  return fail(invalidArgument([{ field: 'user', message: 'must be a user id (usr_…) or an email address' }]));
}

/** A team keeps at least one owner: the conflict when `userId` is its only owner (`owners`, locked) and would stop being one. */
function lastOwnerConflict(owners: readonly string[], userId: string): DomainError | undefined {
  if (owners.length !== 1 || owners[0] !== userId) return undefined;
  return { type: 'CONFLICT', message: 'a team keeps at least one owner: add another owner first' };
}

function readName(field: string, value: unknown): Result<string> {
  const check = new FieldChecker();
  const name = check.string({ [field]: value }, field, { required: true, maxLength: IDENTITY_NAME_MAX_LENGTH });
  return name === undefined ? fail(invalidArgument(check.violations)) : ok(name.trim());
}

/** Whether the caller is a team owner by the team's owner rows as locked now (the system and admins always are). */
function ownsStill(principal: Principal | 'system', owners: readonly string[]): boolean {
  return principal === 'system' || principal.user.isAdmin || owners.includes(principal.user.id);
}

async function createKey(db: Queryable, userId: string, name: string, secret = newApiKey()): Promise<CreatedApiKey> {
  const record = await insertApiKey(db, {
    id: newId('key'),
    userId,
    name,
    prefix: secret.slice(0, 12),
    keyHash: hashApiKey(secret),
  });
  return { record, secret };
}

/** A team with its creator as owner; it becomes the creator's default team when they have none. */
async function createTeamFor(db: Queryable, user: UserRecord, name: string): Promise<TeamRecord> {
  const team = await insertTeam(db, { id: newId('team'), name });
  await upsertMember(db, { teamId: team.id, userId: user.id, role: 'OWNER' });
  await setDefaultTeamIfNone(db, user.id, team.id);
  return team;
}

export class IdentityService {
  constructor(
    private readonly db: Sql,
    /** This process's cached principals (forgotten at once when keys or memberships change). */
    private readonly auth?: { forgetUser(userId: string): void },
  ) {}

  /**
   * After a change that narrows what a user's keys may do: this process
   * forgets their principals at once; the call returns once no process can
   * still hold one read before the change (see principal.ts).
   */
  private async narrowed(userId: string): Promise<void> {
    this.auth?.forgetUser(userId);
    await outlastCachedPrincipals();
  }

  /**
   * On an empty database, creates the admin user with a default team, a
   * default project and an API key (the given one, or a new one). Several
   * processes may call it at once: a transaction-level advisory lock lets
   * exactly one of them do it.
   */
  async bootstrap(adminKey?: string): Promise<Bootstrap | undefined> {
    return this.db.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(7266431002)`;
      if ((await countUsers(tx)) > 0) return undefined;
      const user = (await insertUser(tx, { id: newId('usr'), email: 'admin@localhost', name: 'Admin', isAdmin: true }))!;
      const team = await createTeamFor(tx, user, 'Default team');
      const project = await insertProject(tx, { id: newId('prj'), teamId: team.id, name: 'Default project' });
      const key = await createKey(tx, user.id, 'bootstrap', adminKey);
      return { user: { ...user, defaultTeamId: team.id }, team, project, key };
    });
  }

  async createUser(
    principal: Principal | 'system',
    input: { email: string; name: string; isAdmin?: boolean },
  ): Promise<Result<UserRecord>> {
    if (principal !== 'system' && !principal.user.isAdmin) return fail(forbidden('only an admin can create users'));
    const check = new FieldChecker();
    const email = check.string(input, 'email', { required: true, maxLength: 254, pattern: EMAIL, patternRule: 'must be an email address' });
    const name = check.string(input, 'name', { required: true, maxLength: 128 });
    if (check.violations.length > 0) return fail(invalidArgument(check.violations));
    const user = await this.db.begin(async (tx) => {
      const created = await insertUser(tx, { id: newId('usr'), email: email!, name: name!.trim(), isAdmin: input.isAdmin ?? false });
      if (!created) return undefined;
      // Every user starts with a personal team, so that they can create projects at once.
      const team = await createTeamFor(tx, created, `${created.name}'s team`);
      return { ...created, defaultTeamId: team.id };
    });
    return user ? ok(user) : fail({ type: 'CONFLICT', message: `a user with email '${email}' already exists` });
  }

  async findUser(idOrEmail: string): Promise<UserRecord | undefined> {
    return findUserByIdOrEmail(this.db, idOrEmail);
  }

  /**
   * A user's principal without an API key, acting for their default team:
   * the admin CLI borrows a team owner's identity this way.
   */
  async actAs(idOrEmail: string): Promise<Principal | undefined> {
    const user = await findUserByIdOrEmail(this.db, idOrEmail);
    if (!user) return undefined;
    const memberships = new Map((await listMemberships(this.db, user.id)).map((m) => [m.teamId, m.role]));
    return { user, memberships, actingTeamId: user.defaultTeamId };
  }

  /** The id of a team's earliest member (for the admin CLI, which acts as them); undefined for an unknown or empty team. */
  async earliestMemberOf(teamId: string): Promise<string | undefined> {
    const [first] = await listTeamMembers(this.db, [teamId]);
    return first?.userId;
  }

  /** A team the caller belongs to. */
  async getTeam(principal: Principal, id: string): Promise<Result<TeamRecord>> {
    if (!canAccessTeam(principal, id)) return fail(notFound('team', id));
    const [team] = await findTeams(this.db, [id]);
    return team ? ok(team) : fail(notFound('team', id));
  }

  async createTeam(principal: Principal, input: { name: string }): Promise<Result<TeamRecord>> {
    const name = readName('name', input.name);
    if (name.type === 'error') return name;
    const team = await this.db.begin((tx) => createTeamFor(tx, principal.user, name.value));
    this.auth?.forgetUser(principal.user.id);
    return ok(team);
  }

  /**
   * Adds a user (by id or email) to a team, or changes a member's role: team
   * owners and admins only; a team keeps at least one owner. The system (the
   * admin CLI) and admins add at once. A team owner who names someone not in
   * the team records an invitation instead, which grants nothing until the
   * invitee accepts it. It is answered the same whether or not anyone has
   * that id or email (no user is looked up), and shows the owner only what
   * they typed.
   */
  async addTeamMember(
    principal: Principal | 'system',
    input: { teamId: string; user: string; role?: TeamRole },
  ): Promise<Result<TeamAddition>> {
    const [team] = await findTeams(this.db, [input.teamId]);
    if (!team || (principal !== 'system' && !canAccessTeam(principal, team.id) && !principal.user.isAdmin)) {
      return fail(notFound('team', input.teamId));
    }
    if (principal !== 'system' && !isTeamOwner(principal, team.id)) return fail(forbidden('only a team owner can add members'));
    const ref = readUserRef(input.user);
    if (ref.type === 'error') return ref;
    const role = input.role ?? 'MEMBER';
    const direct = addsMembersDirectly(principal);
    const user = direct ? await findUserByIdOrEmail(this.db, ref.value) : undefined;
    if (direct && !user) return fail(notFound('user', input.user));

    const outcome = await this.db.begin(async (tx): Promise<Result<{ addition: TeamAddition; before?: TeamRole }>> => {
      // The owners first, then the member: the lock order removeTeamMember keeps too.
      const owners = await lockTeamOwners(tx, team.id);
      // Still an owner as the rows are locked (not only when the request was authenticated).
      if (!ownsStill(principal, owners)) return fail(forbidden('only a team owner can add members'));
      const member = user
        ? await lockMemberRole(tx, team.id, user.id).then((r) => r && { userId: user.id, role: r })
        : await lockMemberNamed(tx, team.id, ref.value);
      if (!user && !member) {
        // Bounded, so that a team cannot be made to hold invitations without end (under the owners' lock: counted once).
        if ((await countPendingInvitations(tx, team.id, ref.value)) >= MAX_PENDING_INVITATIONS) {
          return fail({
            type: 'CONFLICT',
            message: `a team has at most ${MAX_PENDING_INVITATIONS} pending invitations: withdraw some first`,
          });
        }
        const invitedBy = principal === 'system' ? null : principal.user.id;
        const invitation = await upsertInvitation(tx, { id: newId('inv'), teamId: team.id, invitee: ref.value, role, invitedBy });
        return ok({ addition: { type: 'invitation', invitation } });
      }
      const userId = user?.id ?? member!.userId;
      const refused = role === 'OWNER' ? undefined : lastOwnerConflict(owners, userId);
      if (refused) return fail(refused);
      const added = await upsertMember(tx, { teamId: team.id, userId, role });
      if (user) {
        await setDefaultTeamIfNone(tx, user.id, team.id);
        await deleteInvitationsFor(tx, team.id, user);
      }
      return ok({ addition: { type: 'member', member: added }, before: member?.role });
    });
    if (outcome.type === 'error') return outcome;
    const { addition, before } = outcome.value;
    if (addition.type === 'member') {
      // A changed role may be a narrower one; a new membership only widens access.
      if (before !== undefined && before !== addition.member.role) await this.narrowed(addition.member.userId);
      else this.auth?.forgetUser(addition.member.userId);
    }
    return ok(addition);
  }

  /** The invitations waiting for the caller to accept or decline them. */
  async invitationsFor(principal: Principal): Promise<TeamInvitationRecord[]> {
    return listInvitationsFor(this.db, principal.user);
  }

  /**
   * Accepts an invitation to the caller: they become a member of its team
   * with its role (someone already a member keeps their role), and their
   * other invitations to that team go.
   */
  async acceptTeamInvitation(principal: Principal, id: string): Promise<Result<MembershipRecord>> {
    const member = await this.db.begin(async (tx) => {
      const taken = await takeInvitation(tx, id, principal.user);
      if (!taken) return undefined;
      const added = await insertMemberIfAbsent(tx, { teamId: taken.teamId, userId: principal.user.id, role: taken.role });
      await setDefaultTeamIfNone(tx, principal.user.id, taken.teamId);
      return added;
    });
    if (!member) return fail(notFound('invitation', id));
    this.auth?.forgetUser(principal.user.id);
    return ok(member);
  }

  /** Declines an invitation to the caller, or withdraws a pending one of a team the caller owns; the invitation's id. */
  async declineTeamInvitation(principal: Principal, id: string): Promise<Result<string>> {
    if (await deleteInvitationFor(this.db, id, principal.user)) return ok(id);
    const teamId = await findInvitationTeam(this.db, id);
    if (teamId && isTeamOwner(principal, teamId) && (await deleteTeamInvitation(this.db, teamId, id))) return ok(id);
    return fail(notFound('invitation', id));
  }

  async removeTeamMember(principal: Principal, input: { teamId: string; userId: string }): Promise<Result<null>> {
    if (!canAccessTeam(principal, input.teamId) && !principal.user.isAdmin) return fail(notFound('team', input.teamId));
    if (!isTeamOwner(principal, input.teamId) && principal.user.id !== input.userId) {
      return fail(forbidden('only a team owner can remove other members'));
    }
    const removed = await this.db.begin(async (tx): Promise<Result<null>> => {
      const owners = await lockTeamOwners(tx, input.teamId);
      if (principal.user.id !== input.userId && !ownsStill(principal, owners)) {
        return fail(forbidden('only a team owner can remove other members'));
      }
      const refused = lastOwnerConflict(owners, input.userId);
      if (refused) return fail(refused);
      return (await deleteMember(tx, input.teamId, input.userId)) ? ok(null) : fail(notFound('member', input.userId));
    });
    if (removed.type === 'ok') await this.narrowed(input.userId);
    return removed;
  }

  async createProject(principal: Principal, input: { teamId?: string | null; name: string }): Promise<Result<ProjectRecord>> {
    const name = readName('name', input.name);
    if (name.type === 'error') return name;
    const teamId = input.teamId ?? principal.actingTeamId;
    if (!teamId) return fail(invalidArgument([{ field: 'teamId', message: 'is required: you belong to no team' }]));
    if (!canAccessTeam(principal, teamId)) return fail(notFound('team', teamId));
    return ok(await insertProject(this.db, { id: newId('prj'), teamId, name: name.value }));
  }

  async getProject(principal: Principal, id: string): Promise<Result<ProjectRecord>> {
    const [found] = await findProjects(this.db, [id]);
    const project = visibleTo(principal, found);
    return project ? ok(project) : fail(notFound('project', id));
  }

  /** A key for oneself, or, for an admin, for any user. */
  async createApiKey(principal: Principal | 'system', input: { name: string; user?: string | null }): Promise<Result<CreatedApiKey>> {
    const name = readName('name', input.name);
    if (name.type === 'error') return name;
    let userId: string;
    if (input.user && (principal === 'system' || !namesUser(principal.user, input.user))) {
      if (principal !== 'system' && !principal.user.isAdmin) return fail(forbidden('only an admin can create keys for other users'));
      const user = await findUserByIdOrEmail(this.db, input.user);
      if (!user) return fail(notFound('user', input.user));
      userId = user.id;
    } else if (principal === 'system') {
      return fail(invalidArgument([{ field: 'user', message: 'is required' }]));
    } else {
      userId = principal.user.id;
    }
    const keyId = principal === 'system' ? undefined : principal.keyId;
    if (!keyId) return ok(await createKey(this.db, userId, name.value));
    // Made by a key: only while that key is unrevoked (checked under its row's lock), so that a key revoked while
    // the request was on its way cannot leave a new key behind.
    return this.db.begin(async (tx) =>
      (await lockLiveApiKey(tx, keyId)) ? ok(await createKey(tx, userId, name.value)) : fail(INVALID_KEY),
    );
  }

  async listApiKeys(principal: Principal): Promise<ApiKeyRecord[]> {
    return listApiKeys(this.db, principal.user.id);
  }

  async revokeApiKey(principal: Principal | 'system', id: string): Promise<Result<ApiKeyRecord>> {
    const key = await findApiKey(this.db, id);
    const allowed = key && (principal === 'system' || principal.user.isAdmin || key.userId === principal.user.id);
    if (!allowed) return fail(notFound('API key', id));
    const revoked = (await revokeApiKey(this.db, id))!;
    if (!key.revokedAt) await this.narrowed(revoked.userId);
    return ok(revoked);
  }
}
