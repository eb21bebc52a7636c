/** Users, API keys, teams, members and projects, with their queries and mutations. */
import type { CreatedApiKey } from '../../../services/identity-service.js';
import type {
  ApiKeyRecord,
  MembershipRecord,
  ProjectRecord,
  TeamInvitationRecord,
  TeamRecord,
  UserRecord,
} from '../../../domain/identity.js';
import { builder } from '../builder.js';
import { TeamRole } from './enums.js';
import { ConflictError, ForbiddenError, InvalidArgumentError, NotFoundError, payload, resultUnion } from './errors.js';

export const User = builder.objectRef<UserRecord>('User');
export const Team = builder.objectRef<TeamRecord>('Team');
export const Project = builder.objectRef<ProjectRecord>('Project');
const ApiKey = builder.objectRef<ApiKeyRecord>('ApiKey');
const TeamMember = builder.objectRef<MembershipRecord>('TeamMember');
const TeamInvitation = builder.objectRef<TeamInvitationRecord>('TeamInvitation');

User.implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    email: t.exposeString('email'),
    name: t.exposeString('name'),
    isAdmin: t.exposeBoolean('isAdmin'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

ApiKey.implement({
  description: 'An API key. The key itself is shown only once, by createApiKey; `prefix` tells keys apart.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    prefix: t.exposeString('prefix'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    lastUsedAt: t.expose('lastUsedAt', { type: 'DateTime', nullable: true }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
  }),
});

TeamMember.implement({
  fields: (t) => ({
    role: t.expose('role', { type: TeamRole }),
    joinedAt: t.expose('createdAt', { type: 'DateTime' }),
    user: t.field({ type: User, resolve: async (m, _, { loaders }) => (await loaders.user.load(m.userId))! }),
  }),
});

TeamInvitation.implement({
  description:
    'An invitation to join a team. It grants nothing until the invitee accepts it (acceptTeamInvitation). ' +
    "It shows the team's owners only what they typed, and the invitee the team's id and name and who invited them.",
  fields: (t) => ({
    id: t.exposeID('id'),
    teamId: t.exposeID('teamId'),
    teamName: t.exposeString('teamName'),
    invitee: t.exposeString('invitee', { description: 'What the inviting owner typed: a user id, or an email address (lower-cased).' }),
    role: t.expose('role', { type: TeamRole, description: 'The role the invitee gets by accepting.' }),
    invitedBy: t.exposeString('invitedByName', { nullable: true, description: "The inviting owner's name." }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When it was sent (or last sent again).' }),
    expiresAt: t.expose('expiresAt', {
      type: 'DateTime',
      description: 'Past this it lapses: no longer listed, and accepting it is NotFoundError. Inviting again renews it.',
    }),
  }),
});

Team.implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    myRole: t.field({
      type: TeamRole,
      nullable: true,
      resolve: async (team, _, { principal, loaders }) =>
        (await loaders.membersOfTeam.load(team.id)).find((m) => m.userId === principal.user.id)?.role ?? null,
    }),
    members: t.field({ type: [TeamMember], resolve: (team, _, { loaders }) => loaders.membersOfTeam.load(team.id) }),
    invitations: t.field({
      type: [TeamInvitation],
      description: "Pending invitations to the team: the team's owners see them, other members none.",
      resolve: (team, _, { principal, loaders }) => loaders.teamInvitationsFor(principal, team.id),
    }),
    projects: t.field({ type: [Project], resolve: (team, _, { loaders }) => loaders.projectsOfTeam.load(team.id) }),
  }),
});

Project.implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    team: t.field({ type: Team, resolve: async (p, _, { loaders }) => (await loaders.team.load(p.teamId))! }),
  }),
});

const Me = builder.objectRef<UserRecord>('Me').implement({
  description: 'The caller.',
  fields: (t) => ({
    user: t.field({ type: User, resolve: (u) => u }),
    defaultTeam: t.field({
      type: Team,
      nullable: true,
      resolve: (_, __, { principal, loaders }) => (principal.actingTeamId ? loaders.team.load(principal.actingTeamId) : null),
    }),
    apiKeys: t.field({ type: [ApiKey], resolve: (_, __, { principal, services }) => services.identity.listApiKeys(principal) }),
    invitations: t.field({
      type: [TeamInvitation],
      description: 'Invitations to teams, waiting for the caller to accept or decline them.',
      resolve: (_, __, { principal, services }) => services.identity.invitationsFor(principal),
    }),
  }),
});

builder.queryFields((t) => ({
  me: t.field({ type: Me, resolve: (_, __, { principal }) => principal.user }),
  teams: t.field({
    type: [Team],
    description: 'The teams the caller belongs to.',
    resolve: async (_, __, { principal, loaders }) =>
      (await loaders.team.loadMany([...principal.memberships.keys()])).filter((t): t is TeamRecord => !!t && !(t instanceof Error)),
  }),
  team: t.field({
    type: Team,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_, { id }, { principal, loaders }) => (await loaders.teamFor(principal, String(id))) ?? null,
  }),
  project: t.field({
    type: Project,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_, { id }, { principal, loaders }) => (await loaders.projectFor(principal, String(id))) ?? null,
  }),
}));

const CreateUserSuccess = builder.objectRef<{ user: UserRecord }>('CreateUserSuccess').implement({
  fields: (t) => ({ user: t.field({ type: User, resolve: (p) => p.user }) }),
});
const CreateTeamSuccess = builder.objectRef<{ team: TeamRecord }>('CreateTeamSuccess').implement({
  fields: (t) => ({ team: t.field({ type: Team, resolve: (p) => p.team }) }),
});
const AddTeamMemberSuccess = builder.objectRef<{ member: MembershipRecord }>('AddTeamMemberSuccess').implement({
  fields: (t) => ({ member: t.field({ type: TeamMember, resolve: (p) => p.member }) }),
});
const InviteTeamMemberSuccess = builder.objectRef<{ invitation: TeamInvitationRecord }>('InviteTeamMemberSuccess').implement({
  description:
    'addTeamMember by a team owner (not an admin) naming someone not in the team: an invitation was recorded, ' +
    'whether or not anyone has that id or email. They become a member once they accept it.',
  fields: (t) => ({ invitation: t.field({ type: TeamInvitation, resolve: (p) => p.invitation }) }),
});
const AcceptTeamInvitationSuccess = builder.objectRef<{ member: MembershipRecord }>('AcceptTeamInvitationSuccess').implement({
  fields: (t) => ({
    member: t.field({ type: TeamMember, resolve: (p) => p.member }),
    team: t.field({ type: Team, resolve: async (p, _, { loaders }) => (await loaders.team.load(p.member.teamId))! }),
  }),
});
const DeclineTeamInvitationSuccess = builder.objectRef<{ invitationId: string }>('DeclineTeamInvitationSuccess').implement({
  fields: (t) => ({ invitationId: t.exposeID('invitationId') }),
});
const RemoveTeamMemberSuccess = builder.objectRef<{ teamId: string; userId: string }>('RemoveTeamMemberSuccess').implement({
  fields: (t) => ({ teamId: t.exposeID('teamId'), userId: t.exposeID('userId') }),
});
const CreateProjectSuccess = builder.objectRef<{ project: ProjectRecord }>('CreateProjectSuccess').implement({
  fields: (t) => ({ project: t.field({ type: Project, resolve: (p) => p.project }) }),
});
const CreateApiKeySuccess = builder.objectRef<CreatedApiKey>('CreateApiKeySuccess').implement({
  fields: (t) => ({
    apiKey: t.field({ type: ApiKey, resolve: (p) => p.record }),
    secret: t.string({ description: 'The key. It is shown only here; store it now.', resolve: (p) => p.secret }),
  }),
});
const RevokeApiKeySuccess = builder.objectRef<{ apiKey: ApiKeyRecord }>('RevokeApiKeySuccess').implement({
  fields: (t) => ({ apiKey: t.field({ type: ApiKey, resolve: (p) => p.apiKey }) }),
});

builder.mutationFields((t) => ({
  createUser: t.field({
    type: resultUnion('CreateUserResult', CreateUserSuccess, [ForbiddenError, InvalidArgumentError, ConflictError]),
    description: 'Admins only. The new user gets a personal team; give them a key with createApiKey.',
    args: { email: t.arg.string({ required: true }), name: t.arg.string({ required: true }), isAdmin: t.arg.boolean() },
    resolve: async (_, args, { principal, services }) =>
      payload(
        await services.identity.createUser(principal, { email: args.email, name: args.name, isAdmin: args.isAdmin ?? false }),
        (user) => ({ user }),
      ),
  }),
  createTeam: t.field({
    type: resultUnion('CreateTeamResult', CreateTeamSuccess, [InvalidArgumentError]),
    args: { name: t.arg.string({ required: true }) },
    resolve: async (_, args, { principal, services }) => payload(await services.identity.createTeam(principal, args), (team) => ({ team })),
  }),
  addTeamMember: t.field({
    type: resultUnion('AddTeamMemberResult', AddTeamMemberSuccess, [NotFoundError, ForbiddenError, ConflictError, InvalidArgumentError], {
      type: InviteTeamMemberSuccess,
      is: (value): value is { invitation: TeamInvitationRecord } => 'invitation' in value,
    }),
    description:
      "Adds a user (by id or email) to a team, or changes a member's role: team owners and admins only; a team keeps one owner. " +
      'Admins add at once (AddTeamMemberSuccess). A team owner naming someone not in the team invites them (InviteTeamMemberSuccess): ' +
      'they become a member only by accepting.',
    args: { teamId: t.arg.id({ required: true }), user: t.arg.string({ required: true }), role: t.arg({ type: TeamRole }) },
    resolve: async (_, args, { principal, services }) =>
      payload(
        await services.identity.addTeamMember(principal, { teamId: String(args.teamId), user: args.user, role: args.role ?? 'MEMBER' }),
        (added) => (added.type === 'member' ? { member: added.member } : { invitation: added.invitation }),
      ),
  }),
  acceptTeamInvitation: t.field({
    type: resultUnion('AcceptTeamInvitationResult', AcceptTeamInvitationSuccess, [NotFoundError]),
    description: "Accepts an invitation to the caller (me.invitations): they become a member of its team, with the invitation's role.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_, args, { principal, services }) =>
      payload(await services.identity.acceptTeamInvitation(principal, String(args.id)), (member) => ({ member })),
  }),
  declineTeamInvitation: t.field({
    type: resultUnion('DeclineTeamInvitationResult', DeclineTeamInvitationSuccess, [NotFoundError]),
    description: 'Declines an invitation to the caller, or withdraws a pending invitation of a team the caller owns (team.invitations).',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_, args, { principal, services }) =>
      payload(await services.identity.declineTeamInvitation(principal, String(args.id)), (invitationId) => ({ invitationId })),
  }),
  removeTeamMember: t.field({
    type: resultUnion('RemoveTeamMemberResult', RemoveTeamMemberSuccess, [NotFoundError, ForbiddenError, ConflictError]),
    args: { teamId: t.arg.id({ required: true }), userId: t.arg.id({ required: true }) },
    resolve: async (_, args, { principal, services }) => {
      const input = { teamId: String(args.teamId), userId: String(args.userId) };
      return payload(await services.identity.removeTeamMember(principal, input), () => input);
    },
  }),
  createProject: t.field({
    type: resultUnion('CreateProjectResult', CreateProjectSuccess, [NotFoundError, InvalidArgumentError]),
    description: 'Creates a project in the given team, or in the acting team.',
    args: { name: t.arg.string({ required: true }), teamId: t.arg.id() },
    resolve: async (_, args, { principal, services }) =>
      payload(
        await services.identity.createProject(principal, { name: args.name, teamId: args.teamId ? String(args.teamId) : null }),
        (project) => ({
          project,
        }),
      ),
  }),
  createApiKey: t.field({
    type: resultUnion('CreateApiKeyResult', CreateApiKeySuccess, [NotFoundError, ForbiddenError, InvalidArgumentError]),
    description: 'A new key for the caller, or (admins only) for the user given by id or email.',
    args: { name: t.arg.string({ required: true }), user: t.arg.string() },
    resolve: async (_, args, { principal, services }) =>
      payload(await services.identity.createApiKey(principal, { name: args.name, user: args.user ?? null }), (key) => key),
  }),
  revokeApiKey: t.field({
    type: resultUnion('RevokeApiKeyResult', RevokeApiKeySuccess, [NotFoundError]),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_, args, { principal, services }) =>
      payload(await services.identity.revokeApiKey(principal, String(args.id)), (apiKey) => ({ apiKey })),
  }),
}));
