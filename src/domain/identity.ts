/** Who may do what: users, their API keys, teams, membership and projects. */

export const TEAM_ROLES = ['OWNER', 'MEMBER'] as const;

/** The most characters a team's, a project's or an API key's name holds. */
export const IDENTITY_NAME_MAX_LENGTH = 128;
export type TeamRole = (typeof TEAM_ROLES)[number];

export interface UserRecord {
  id: string;
  email: string;
  name: string;
  isAdmin: boolean;
  defaultTeamId: string | null;
  createdAt: Date;
}

export interface TeamRecord {
  id: string;
  name: string;
  createdAt: Date;
}

/**
 * Emails are stored and compared in this form, so that one address in any
 * case names one user (the database backs it with a unique index on
 * `lower(email)`). Every email that reaches the users or invitations tables
 * goes through here.
 */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** Whether `idOrEmail` names the user: their id, or their email in any case. */
export function namesUser(user: UserRecord, idOrEmail: string): boolean {
  return idOrEmail === user.id || normalizeEmail(idOrEmail) === normalizeEmail(user.email);
}

export interface MembershipRecord {
  teamId: string;
  userId: string;
  role: TeamRole;
  createdAt: Date;
}

/**
 * A team owner's invitation to join their team. It grants nothing: the
 * invitee becomes a member (a `MembershipRecord`) only by accepting it.
 */
export interface TeamInvitationRecord {
  id: string;
  teamId: string;
  teamName: string;
  /** What the owner typed: a user id, or an email (normalized), whether or not such a user exists. */
  invitee: string;
  role: TeamRole;
  /** The inviting owner's name (null once that user is deleted). */
  invitedByName: string | null;
  createdAt: Date;
  /** Past this, it is neither listed nor accepted (inviting again renews it). */
  expiresAt: Date;
}

/** How long an invitation waits for its invitee. */
export const INVITATION_TTL_DAYS = 14;

export interface ApiKeyRecord {
  id: string;
  userId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

/** A project belongs to one team; its endpoints are that team's. */
export interface ProjectRecord {
  id: string;
  teamId: string;
  name: string;
  createdAt: Date;
}
