/**
 * Migrations that mend two upgrades (an operator's review, with older releases' gateways run beside HEAD):
 * - 20261126000000 made team_invitations.expires_at NOT NULL with no default, and the release before it (118dae4)
 *   inserts invitations without the column: during a rolling upgrade its invites failed (not-null violation, a 500).
 *   The column now has the code's lifetime as its default.
 * - 20261205000000_controller_members.sql was edited after it shipped (cf5a3e4 added `joined_at`): a database that
 *   ran its first version never got the column, and every heartbeat of the current code failed on it.
 */
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { INVITATION_TTL_DAYS } from '../../src/domain/identity.js';
import { connectDatabase, migrate, MIGRATIONS_DIR, type Sql } from '../../src/storage/database.js';
import { heartbeat } from '../../src/storage/leases-repository.js';
import { listInvitationsFor } from '../../src/storage/team-invitations-repository.js';
import { createEmptyDatabase } from '../support/database.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function database(): Promise<Sql> {
  const sql = connectDatabase(await createEmptyDatabase(), { max: 2 });
  cleanups.push(() => sql.end({ timeout: 5 }));
  return sql;
}

test("an invitation inserted as the release before expiry did (no expires_at) gets the code's lifetime", async () => {
  const sql = await database();
  await migrate(sql);
  await sql`INSERT INTO teams (id, name) VALUES ('team_a', 'A')`;
  await sql`INSERT INTO users (id, email, name) VALUES ('usr_owner', 'owner@example.com', 'Owner')`;
  await sql`INSERT INTO team_members (team_id, user_id, role) VALUES ('team_a', 'usr_owner', 'OWNER')`;
  // 118dae4's upsertInvitation, as its gateways still run it while the rollout replaces them.
  await sql`
    INSERT INTO team_invitations (id, team_id, invitee, role, invited_by)
    VALUES ('inv_old', 'team_a', 'usr_b', 'MEMBER', 'usr_owner')
    ON CONFLICT (team_id, invitee) DO UPDATE SET role = excluded.role, invited_by = excluded.invited_by`;
  const [row] = await sql<{ lifetime_days: number }[]>`
    SELECT extract(epoch FROM expires_at - created_at)::int / 86400 AS lifetime_days FROM team_invitations WHERE id = 'inv_old'`;
  expect(row!.lifetime_days).toBe(INVITATION_TTL_DAYS);
  // The current code lists it as pending.
  expect((await listInvitationsFor(sql, { id: 'usr_b', email: 'b@example.com' })).map((i) => i.id)).toEqual(['inv_old']);
});

/** 20261205000000_controller_members.sql as 6f6e1ac committed it, before cf5a3e4 edited it. */
const FIRST_CONTROLLER_MEMBERS = `
CREATE TABLE controller_members (
  owner       text PRIMARY KEY,
  pool        text NOT NULL,
  expires_at  timestamptz NOT NULL
);
`;

test('a database that ran the first controller_members gets joined_at, and the current heartbeat works on it', async () => {
  const sql = await database();
  const earlier = await mkdtemp(path.join(os.tmpdir(), 'members-'));
  cleanups.push(() => rm(earlier, { recursive: true, force: true }));
  const name = '20261205000000_controller_members.sql';
  for (const file of (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql') && f < name)) {
    await copyFile(path.join(MIGRATIONS_DIR, file), path.join(earlier, file));
  }
  await writeFile(path.join(earlier, name), FIRST_CONTROLLER_MEMBERS);
  await migrate(sql, earlier);
  // That database was migrated by a runner that kept no checksums.
  await sql`ALTER TABLE schema_migrations DROP COLUMN IF EXISTS checksum`;
  await sql`INSERT INTO controller_members (owner, pool, expires_at) VALUES ('gw_old', 'local', now() + interval '1 minute')`;

  const applied = await migrate(sql);
  expect(applied).toContain('20261206010000_controller_members_joined_at.sql');
  const [column] = await sql`
    SELECT is_nullable, column_default FROM information_schema.columns
    WHERE table_name = 'controller_members' AND column_name = 'joined_at'`;
  expect(column).toEqual({ is_nullable: 'NO', column_default: 'now()' });
  // The member already there counts as joined now: not yet for the others (it has not run for a TTL since).
  expect(await heartbeat(sql, 'gw_new', 'local', 60_000)).toMatchObject({ others: 0 });
  expect(await heartbeat(sql, 'gw_new', 'local', 0)).toMatchObject({ others: 1 });
});
