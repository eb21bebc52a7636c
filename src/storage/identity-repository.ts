/** SQL for users, API keys, teams and team membership. */
import {
  normalizeEmail,
  type ApiKeyRecord,
  type MembershipRecord,
  type TeamRecord,
  type TeamRole,
  type UserRecord,
} from '../domain/identity.js';
import type { Queryable } from './database.js';

const USER_COLUMNS = 'u.id, u.email, u.name, u.is_admin, u.default_team_id, u.created_at';

interface UserRow {
  id: string;
  email: string;
  name: string;
  is_admin: boolean;
  default_team_id: string | null;
  created_at: Date;
}

const toUser = (r: UserRow): UserRecord => ({
  id: r.id,
  email: r.email,
  name: r.name,
  isAdmin: r.is_admin,
  defaultTeamId: r.default_team_id,
  createdAt: r.created_at,
});

interface KeyRow {
  id: string;
  user_id: string;
  name: string;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const toKey = (r: KeyRow): ApiKeyRecord => ({
  id: r.id,
  userId: r.user_id,
  name: r.name,
  prefix: r.prefix,
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
});

/** The new user, with their email normalized; undefined when a user has that email in any case. */
export async function insertUser(
  db: Queryable,
  user: { id: string; email: string; name: string; isAdmin: boolean },
): Promise<UserRecord | undefined> {
  // No conflict target: the unique index on lower(email) is the one that can meet a conflict.
  const rows = await db<UserRow[]>`
    INSERT INTO users (id, email, name, is_admin) VALUES (${user.id}, ${normalizeEmail(user.email)}, ${user.name}, ${user.isAdmin})
    ON CONFLICT DO NOTHING
    RETURNING id, email, name, is_admin, default_team_id, created_at`;
  return rows[0] && toUser(rows[0]);
}

/** Makes the team the user's default team, unless they have one already. */
export async function setDefaultTeamIfNone(db: Queryable, userId: string, teamId: string): Promise<void> {
  await db`UPDATE users SET default_team_id = ${teamId} WHERE id = ${userId} AND default_team_id IS NULL`;
}

export async function countUsers(db: Queryable): Promise<number> {
  const [row] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM users`;
  return row!.n;
}

export async function findUsers(db: Queryable, ids: readonly string[]): Promise<UserRecord[]> {
  const rows = await db<UserRow[]>`SELECT ${db.unsafe(USER_COLUMNS)} FROM users u WHERE u.id = ANY(${ids as string[]})`;
  return rows.map(toUser);
}

/** The user with this id, or with this email in any case. */
export async function findUserByIdOrEmail(db: Queryable, idOrEmail: string): Promise<UserRecord | undefined> {
  const rows = await db<UserRow[]>`
    SELECT ${db.unsafe(USER_COLUMNS)} FROM users u WHERE u.id = ${idOrEmail} OR lower(u.email) = ${normalizeEmail(idOrEmail)}`;
  return rows[0] && toUser(rows[0]);
}

export interface KeyHolder {
  user: UserRecord;
  keyId: string;
  keyLastUsedAt: Date | null;
  memberships: { teamId: string; role: TeamRole }[];
}

/** The holder of an unrevoked key with this hash and their memberships, in one statement. */
export async function findKeyHolder(db: Queryable, keyHash: Buffer): Promise<KeyHolder | undefined> {
  const rows = await db<(UserRow & { key_id: string; key_last_used_at: Date | null; memberships: { teamId: string; role: TeamRole }[] })[]>`
    SELECT ${db.unsafe(USER_COLUMNS)}, k.id AS key_id, k.last_used_at AS key_last_used_at,
      coalesce((SELECT json_agg(json_build_object('teamId', m.team_id, 'role', m.role) ORDER BY m.created_at)
                FROM team_members m WHERE m.user_id = u.id), '[]'::json) AS memberships
    FROM api_keys k JOIN users u ON u.id = k.user_id
    WHERE k.key_hash = ${keyHash} AND k.revoked_at IS NULL`;
  const row = rows[0];
  return row && { user: toUser(row), keyId: row.key_id, keyLastUsedAt: row.key_last_used_at, memberships: row.memberships };
}

export async function touchApiKey(db: Queryable, id: string): Promise<void> {
  await db`UPDATE api_keys SET last_used_at = now() WHERE id = ${id}`;
}

export async function insertApiKey(
  db: Queryable,
  key: { id: string; userId: string; name: string; prefix: string; keyHash: Buffer },
): Promise<ApiKeyRecord> {
  const [row] = await db<KeyRow[]>`
    INSERT INTO api_keys (id, user_id, name, prefix, key_hash)
    VALUES (${key.id}, ${key.userId}, ${key.name}, ${key.prefix}, ${key.keyHash})
    RETURNING id, user_id, name, prefix, created_at, last_used_at, revoked_at`;
  return toKey(row!);
}

export async function listApiKeys(db: Queryable, userId: string): Promise<ApiKeyRecord[]> {
  const rows = await db<KeyRow[]>`
    SELECT id, user_id, name, prefix, created_at, last_used_at, revoked_at
    FROM api_keys WHERE user_id = ${userId} ORDER BY created_at, id`;
  return rows.map(toKey);
}

export async function findApiKey(db: Queryable, id: string): Promise<ApiKeyRecord | undefined> {
  const rows = await db<KeyRow[]>`
    SELECT id, user_id, name, prefix, created_at, last_used_at, revoked_at FROM api_keys WHERE id = ${id}`;
  return rows[0] && toKey(rows[0]);
}

/**
 * Whether the key is still unrevoked, its row locked until the transaction ends: a revocation waits for what the key
 * does in that transaction, or that transaction sees it revoked.
 */
export async function lockLiveApiKey(db: Queryable, id: string): Promise<boolean> {
  const rows = await db`SELECT 1 FROM api_keys WHERE id = ${id} AND revoked_at IS NULL FOR SHARE`;
  return rows.length === 1;
}

export async function revokeApiKey(db: Queryable, id: string): Promise<ApiKeyRecord | undefined> {
  const rows = await db<KeyRow[]>`
    UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = ${id}
    RETURNING id, user_id, name, prefix, created_at, last_used_at, revoked_at`;
  return rows[0] && toKey(rows[0]);
}

export async function insertTeam(db: Queryable, team: { id: string; name: string }): Promise<TeamRecord> {
  const [row] = await db<{ id: string; name: string; created_at: Date }[]>`
    INSERT INTO teams (id, name) VALUES (${team.id}, ${team.name}) RETURNING id, name, created_at`;
  return { id: row!.id, name: row!.name, createdAt: row!.created_at };
}

export async function findTeams(db: Queryable, ids: readonly string[]): Promise<TeamRecord[]> {
  const rows = await db<{ id: string; name: string; created_at: Date }[]>`
    SELECT id, name, created_at FROM teams WHERE id = ANY(${ids as string[]})`;
  return rows.map((r) => ({ id: r.id, name: r.name, createdAt: r.created_at }));
}

/** The user's role in the team, locked for the rest of the transaction (undefined: not a member). */
export async function lockMemberRole(db: Queryable, teamId: string, userId: string): Promise<TeamRole | undefined> {
  const [row] = await db<{ role: TeamRole }[]>`
    SELECT role FROM team_members WHERE team_id = ${teamId} AND user_id = ${userId} FOR UPDATE`;
  return row?.role;
}

/**
 * The role of the team's member named by `idOrEmail` (their id, or their
 * email in any case) and their id, locked for the rest of the transaction;
 * undefined when no member of the team is named so.
 */
export async function lockMemberNamed(
  db: Queryable,
  teamId: string,
  idOrEmail: string,
): Promise<{ userId: string; role: TeamRole } | undefined> {
  const [row] = await db<{ user_id: string; role: TeamRole }[]>`
    SELECT m.user_id, m.role FROM team_members m JOIN users u ON u.id = m.user_id
    WHERE m.team_id = ${teamId} AND (u.id = ${idOrEmail} OR lower(u.email) = ${normalizeEmail(idOrEmail)})
    FOR UPDATE OF m`;
  return row && { userId: row.user_id, role: row.role };
}

/** Adds the member, or changes the role of an existing one. */
export async function upsertMember(db: Queryable, m: { teamId: string; userId: string; role: TeamRole }): Promise<MembershipRecord> {
  const [row] = await db<{ team_id: string; user_id: string; role: TeamRole; created_at: Date }[]>`
    INSERT INTO team_members (team_id, user_id, role) VALUES (${m.teamId}, ${m.userId}, ${m.role})
    ON CONFLICT (team_id, user_id) DO UPDATE SET role = excluded.role
    RETURNING team_id, user_id, role, created_at`;
  return { teamId: row!.team_id, userId: row!.user_id, role: row!.role, createdAt: row!.created_at };
}

/** Adds the member; an existing member keeps their role. The membership either way. */
export async function insertMemberIfAbsent(
  db: Queryable,
  m: { teamId: string; userId: string; role: TeamRole },
): Promise<MembershipRecord> {
  await db`INSERT INTO team_members (team_id, user_id, role) VALUES (${m.teamId}, ${m.userId}, ${m.role}) ON CONFLICT DO NOTHING`;
  const [row] = await db<{ team_id: string; user_id: string; role: TeamRole; created_at: Date }[]>`
    SELECT team_id, user_id, role, created_at FROM team_members WHERE team_id = ${m.teamId} AND user_id = ${m.userId}`;
  return { teamId: row!.team_id, userId: row!.user_id, role: row!.role, createdAt: row!.created_at };
}

export async function deleteMember(db: Queryable, teamId: string, userId: string): Promise<boolean> {
  const rows = await db`DELETE FROM team_members WHERE team_id = ${teamId} AND user_id = ${userId} RETURNING 1`;
  return rows.length > 0;
}

export async function listMemberships(db: Queryable, userId: string): Promise<MembershipRecord[]> {
  const rows = await db<{ team_id: string; user_id: string; role: TeamRole; created_at: Date }[]>`
    SELECT team_id, user_id, role, created_at FROM team_members WHERE user_id = ${userId} ORDER BY created_at, team_id`;
  return rows.map((r) => ({ teamId: r.team_id, userId: r.user_id, role: r.role, createdAt: r.created_at }));
}

export async function listTeamMembers(db: Queryable, teamIds: readonly string[]): Promise<MembershipRecord[]> {
  const rows = await db<{ team_id: string; user_id: string; role: TeamRole; created_at: Date }[]>`
    SELECT team_id, user_id, role, created_at FROM team_members
    WHERE team_id = ANY(${teamIds as string[]}) ORDER BY created_at, user_id`;
  return rows.map((r) => ({ teamId: r.team_id, userId: r.user_id, role: r.role, createdAt: r.created_at }));
}

/**
 * Owners of a team, locked, so that the last owner cannot be removed or
 * demoted by two racing requests. Take it before locking a member's row
 * (`lockMemberRole`, `lockMemberNamed`): one order, and always by user id, so
 * that racing transactions wait instead of deadlocking.
 */
export async function lockTeamOwners(db: Queryable, teamId: string): Promise<string[]> {
  const rows = await db<{ user_id: string }[]>`
    SELECT user_id FROM team_members WHERE team_id = ${teamId} AND role = 'OWNER' ORDER BY user_id FOR UPDATE`;
  return rows.map((r) => r.user_id);
}
