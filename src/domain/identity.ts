/** Who may do what: users, their API keys, teams, membership and projects. */

export const TEAM_ROLES = ['OWNER', 'MEMBER'] as const;
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

export interface MembershipRecord {
  teamId: string;
  userId: string;
  role: TeamRole;
  createdAt: Date;
}

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
