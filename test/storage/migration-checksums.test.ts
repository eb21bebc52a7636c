/**
 * Each applied migration's sha256 is recorded, and a file whose text changed after it was applied stops the start,
 * naming it (the database never ran the change: the runner tracks files by name). A database migrated before
 * checksums were kept gets them recorded on first sight; a row for a migration this release has no file for (a newer
 * release's, after a rollback) is left alone.
 */
import { createHash } from 'node:crypto';
import { appendFile, cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { connectDatabase, migrate, MIGRATIONS_DIR, type Sql } from '../../src/storage/database.js';
import { createEmptyDatabase } from '../support/database.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A migrated database, and a copy of db/ that the test may change. */
async function migrated(): Promise<{ sql: Sql; dir: string; files: string[] }> {
  const sql = connectDatabase(await createEmptyDatabase(), { max: 2 });
  cleanups.push(() => sql.end({ timeout: 5 }));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'checksums-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  await cp(MIGRATIONS_DIR, dir, { recursive: true });
  await migrate(sql, dir);
  return { sql, dir, files: (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort() };
}

const EDITED = '20261205000000_controller_members.sql';

test('an applied migration edited since stops the start, naming it, and nothing is applied', async () => {
  const { sql, dir } = await migrated();
  await appendFile(path.join(dir, EDITED), 'ALTER TABLE controller_members ADD COLUMN note text;\n');
  const refused = (await migrate(sql, dir).catch((e: unknown) => e)) as Error;
  expect(refused).toBeInstanceOf(Error);
  expect(refused.message).toContain(`migration db/${EDITED} was changed after it was applied to this database`);
  expect(refused.message).toContain('restore the file as it was applied and put the change in a new migration');

  // With a migration pending as well: still refused before anything is applied.
  await writeFile(path.join(dir, '29990101000000_pending.sql'), 'CREATE TABLE pending_one (id int);\n');
  await expect(migrate(sql, dir)).rejects.toThrow(`migration db/${EDITED} was changed`);
  expect((await sql`SELECT to_regclass('pending_one') AS t`)[0]!.t).toBeNull();
  expect((await sql`SELECT count(*)::int AS n FROM schema_migrations WHERE name = '29990101000000_pending.sql'`)[0]!.n).toBe(0);
});

test('a database migrated before checksums were kept gets them recorded, then refuses an edit', async () => {
  const { sql, dir, files } = await migrated();
  await sql`ALTER TABLE schema_migrations DROP COLUMN checksum`;
  expect(await migrate(sql, dir)).toEqual([]);
  const rows = await sql<{ name: string; checksum: string }[]>`SELECT name, checksum FROM schema_migrations ORDER BY name`;
  const expected = await Promise.all(
    files.map(async (name) => ({
      name,
      checksum: createHash('sha256')
        .update(await readFile(path.join(dir, name), 'utf8'))
        .digest('hex'),
    })),
  );
  expect(rows).toEqual(expected);

  // Rows an older runner wrote without one (null) are recorded too.
  await sql`UPDATE schema_migrations SET checksum = NULL WHERE name = ${EDITED}`;
  expect(await migrate(sql, dir)).toEqual([]);
  expect((await sql`SELECT checksum FROM schema_migrations WHERE name = ${EDITED}`)[0]!.checksum).toBe(
    expected.find((e) => e.name === EDITED)!.checksum,
  );

  await appendFile(path.join(dir, EDITED), '-- an edit\n');
  await expect(migrate(sql, dir)).rejects.toThrow(`migration db/${EDITED} was changed after it was applied`);
});

test('a checkout with CRLF line ends is the same text', async () => {
  const { sql, dir } = await migrated();
  const file = path.join(dir, EDITED);
  await writeFile(file, (await readFile(file, 'utf8')).replace(/\n/g, '\r\n'));
  expect(await migrate(sql, dir)).toEqual([]);
});

test("an older release (after a rollback) leaves a newer release's migrations alone", async () => {
  const { sql, dir, files } = await migrated();
  await writeFile(path.join(dir, '29990101000000_newer.sql'), 'CREATE TABLE newer_one (id int);\n');
  expect(await migrate(sql, dir)).toEqual(['29990101000000_newer.sql']);
  await rm(path.join(dir, '29990101000000_newer.sql'));
  expect(await migrate(sql, dir)).toEqual([]);
  expect((await sql`SELECT count(*)::int AS n FROM schema_migrations`)[0]!.n).toBe(files.length + 1);
});
