/**
 * The migration that makes emails unique whatever their case, on a database
 * that has users already: it refuses, naming them, while two users' emails
 * differ only in case (and changes nothing); once an operator has told them
 * apart it lower-cases every email, and the memberships already there stay.
 */
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { connectDatabase, migrate, MIGRATIONS_DIR } from '../../src/storage/database.js';
import { createEmptyDatabase } from '../support/database.js';

const MIGRATION = '20261125040000_team_invitations_and_email_case.sql';

test('case-duplicate emails stop the migration with their names; once resolved, emails are lower-cased and members stay', async () => {
  // The database as it was before this migration.
  const earlier = await mkdtemp(path.join(os.tmpdir(), 'email-case-'));
  const sql = connectDatabase(await createEmptyDatabase(), { max: 1 });
  try {
    for (const file of (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql') && f < MIGRATION)) {
      await copyFile(path.join(MIGRATIONS_DIR, file), path.join(earlier, file));
    }
    await migrate(sql, earlier);
    await sql`INSERT INTO teams (id, name) VALUES ('team_old', 'Old')`;
    await sql`INSERT INTO users (id, email, name, default_team_id) VALUES
      ('usr_ann1', 'Ann@example.com', 'Ann', 'team_old'),
      ('usr_ann2', 'ann@EXAMPLE.com', 'Ann too', NULL),
      ('usr_bo', 'Bo@Example.COM', 'Bo', 'team_old')`;
    await sql`INSERT INTO team_members (team_id, user_id, role) VALUES ('team_old', 'usr_ann1', 'OWNER'), ('team_old', 'usr_bo', 'MEMBER')`;

    const refused = await migrate(sql).catch((e: unknown) => e as Error);
    expect(refused).toBeInstanceOf(Error);
    expect(refused).toMatchObject({
      message: expect.stringContaining('Ann@example.com (usr_ann1), ann@EXAMPLE.com (usr_ann2)'),
      hint: expect.stringContaining('give one user of each group another email'),
    });
    // Nothing changed: not applied, emails as they were.
    expect((await sql`SELECT name FROM schema_migrations WHERE name = ${MIGRATION}`).length).toBe(0);
    expect((await sql`SELECT email FROM users WHERE id = 'usr_bo'`)[0]!.email).toBe('Bo@Example.COM');

    await sql`UPDATE users SET email = 'ann.two@example.com' WHERE id = 'usr_ann2'`;
    expect(await migrate(sql)).toContain(MIGRATION);
    const users = await sql<{ id: string; email: string }[]>`SELECT id, email FROM users ORDER BY id`;
    expect(users).toEqual([
      { id: 'usr_ann1', email: 'ann@example.com' },
      { id: 'usr_ann2', email: 'ann.two@example.com' },
      { id: 'usr_bo', email: 'bo@example.com' },
    ]);
    // Existing rows are accepted members; no invitation stands in for them.
    const members = await sql`SELECT user_id, role FROM team_members WHERE team_id = 'team_old' ORDER BY user_id`;
    expect(members.map((m) => [m.user_id, m.role])).toEqual([
      ['usr_ann1', 'OWNER'],
      ['usr_bo', 'MEMBER'],
    ]);
    expect((await sql`SELECT count(*)::int AS n FROM team_invitations`)[0]!.n).toBe(0);
  } finally {
    await sql.end({ timeout: 5 });
    await rm(earlier, { recursive: true, force: true });
  }
});
