/**
 * SQL for team invitations (db/20261125040000_team_invitations_and_email_case.sql).
 * An invitation is for a user when its `invitee` is their id or their email:
 * `inviteeIs` says so, once, for every statement that acts for the invitee.
 */
import { INVITATION_TTL_DAYS, normalizeEmail, type TeamInvitationRecord, type TeamRole } from '../domain/identity.js';
import type { Queryable } from './database.js';

interface InvitationRow {
  id: string;
  team_id: string;
  team_name: string;
  invitee: string;
  role: TeamRole;
  invited_by_name: string | null;
  created_at: Date;
  expires_at: Date;
}

const toInvitation = (r: InvitationRow): TeamInvitationRecord => ({
  id: r.id,
  teamId: r.team_id,
  teamName: r.team_name,
  invitee: r.invitee,
  role: r.role,
  invitedByName: r.invited_by_name,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
});

/** The invitation's columns, with its team's and inviter's names, from `i` (an invitation) joined as `invitationRows` does. */
const INVITATION_COLUMNS = 'i.id, i.team_id, t.name AS team_name, i.invitee, i.role, b.name AS invited_by_name, i.created_at, i.expires_at';

/** The condition "invitation `i` has not expired": an expired one is neither listed nor taken, as if withdrawn. */
const UNEXPIRED = 'i.expires_at > now()';

/** The condition "invitation `i` is for this user". */
function inviteeIs(db: Queryable, user: { id: string; email: string }) {
  return db`i.invitee IN (${user.id}, ${normalizeEmail(user.email)})`;
}

/**
 * Records an invitation of `invitee` (a user id or a normalized email) to the
 * team, valid for INVITATION_TTL_DAYS, or, when one is there already (pending
 * or expired), gives it the new role and inviter and a fresh validity.
 */
export async function upsertInvitation(
  db: Queryable,
  invitation: { id: string; teamId: string; invitee: string; role: TeamRole; invitedBy: string | null },
): Promise<TeamInvitationRecord> {
  const [row] = await db<InvitationRow[]>`
    WITH i AS (
      INSERT INTO team_invitations (id, team_id, invitee, role, invited_by, expires_at)
      VALUES (${invitation.id}, ${invitation.teamId}, ${invitation.invitee}, ${invitation.role}, ${invitation.invitedBy},
        now() + make_interval(days => ${INVITATION_TTL_DAYS}))
      ON CONFLICT (team_id, invitee) DO UPDATE
        SET role = excluded.role, invited_by = excluded.invited_by, created_at = now(), expires_at = excluded.expires_at
      RETURNING *)
    SELECT ${db.unsafe(INVITATION_COLUMNS)} FROM i JOIN teams t ON t.id = i.team_id LEFT JOIN users b ON b.id = i.invited_by`;
  return toInvitation(row!);
}

/**
 * An invitation holds only while whoever sent it still owns the team: one sent
 * by a member since removed, demoted or deleted grants nothing. (Invitations
 * come from non-admin owners only: admins add members directly.)
 */
function inviterStillOwns(lock: '' | 'FOR SHARE' = ''): string {
  return `EXISTS (SELECT 1 FROM team_members o WHERE o.team_id = i.team_id AND o.user_id = i.invited_by AND o.role = 'OWNER' ${lock})`;
}

/** The invitations waiting for the user, oldest first. */
export async function listInvitationsFor(db: Queryable, user: { id: string; email: string }): Promise<TeamInvitationRecord[]> {
  const rows = await db<InvitationRow[]>`
    SELECT ${db.unsafe(INVITATION_COLUMNS)}
    FROM team_invitations i JOIN teams t ON t.id = i.team_id LEFT JOIN users b ON b.id = i.invited_by
    WHERE ${inviteeIs(db, user)} AND ${db.unsafe(inviterStillOwns())} AND ${db.unsafe(UNEXPIRED)} ORDER BY i.created_at, i.id`;
  return rows.map(toInvitation);
}

/**
 * How many invitations wait for the team, other than one to `invitee` (which
 * an invitation to it would replace). Expired ones count for nothing, and are
 * deleted here (so that a team's rows stay bounded).
 */
export async function countPendingInvitations(db: Queryable, teamId: string, invitee: string): Promise<number> {
  await db`DELETE FROM team_invitations i WHERE i.team_id = ${teamId} AND NOT (${db.unsafe(UNEXPIRED)})`;
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM team_invitations WHERE team_id = ${teamId} AND invitee <> ${invitee}`;
  return row!.n;
}

/** The pending invitations of the teams, oldest first. */
export async function listInvitationsOfTeams(db: Queryable, teamIds: readonly string[]): Promise<TeamInvitationRecord[]> {
  const rows = await db<InvitationRow[]>`
    SELECT ${db.unsafe(INVITATION_COLUMNS)}
    FROM team_invitations i JOIN teams t ON t.id = i.team_id LEFT JOIN users b ON b.id = i.invited_by
    WHERE i.team_id = ANY(${teamIds as string[]}) AND ${db.unsafe(UNEXPIRED)} ORDER BY i.created_at, i.id`;
  return rows.map(toInvitation);
}

/**
 * Deletes the invitation when it is for the user, and with it every other
 * invitation of the user to that team (by id or by email); its team and role,
 * or undefined when there is no such invitation for them (or its inviter no
 * longer owns the team). Of two racing
 * calls (accept and decline, or two accepts) exactly one gets it.
 */
export async function takeInvitation(
  db: Queryable,
  id: string,
  user: { id: string; email: string },
): Promise<{ teamId: string; role: TeamRole } | undefined> {
  const [taken] = await db<{ team_id: string; role: TeamRole }[]>`
    DELETE FROM team_invitations i
    WHERE i.id = ${id} AND ${inviteeIs(db, user)} AND ${db.unsafe(UNEXPIRED)}
      -- The inviter's membership is locked, so that a removal or demotion committing meanwhile is seen.
      AND ${db.unsafe(inviterStillOwns('FOR SHARE'))}
    RETURNING i.team_id, i.role`;
  if (!taken) return undefined;
  await deleteInvitationsFor(db, taken.team_id, user);
  return { teamId: taken.team_id, role: taken.role };
}

/** Deletes the user's pending invitations to the team (they joined it another way). */
export async function deleteInvitationsFor(db: Queryable, teamId: string, user: { id: string; email: string }): Promise<void> {
  await db`DELETE FROM team_invitations i WHERE i.team_id = ${teamId} AND ${inviteeIs(db, user)}`;
}

/** The team of an invitation, whoever it is for; undefined when there is none with this id. */
export async function findInvitationTeam(db: Queryable, id: string): Promise<string | undefined> {
  const [row] = await db<{ team_id: string }[]>`SELECT team_id FROM team_invitations WHERE id = ${id}`;
  return row?.team_id;
}

/** Deletes the invitation when it is of the team; whether it did. */
export async function deleteTeamInvitation(db: Queryable, teamId: string, id: string): Promise<boolean> {
  const rows = await db`DELETE FROM team_invitations WHERE id = ${id} AND team_id = ${teamId} RETURNING 1`;
  return rows.length > 0;
}

/** Deletes the invitation when it is for the user; whether it did. */
export async function deleteInvitationFor(db: Queryable, id: string, user: { id: string; email: string }): Promise<boolean> {
  const rows = await db`DELETE FROM team_invitations i WHERE i.id = ${id} AND ${inviteeIs(db, user)} RETURNING 1`;
  return rows.length > 0;
}
