/** Migrations: two processes starting together on one empty database apply each file exactly once. */
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';
import { connectDatabase, MIGRATIONS_DIR } from '../../src/storage/database.js';
import { createEmptyDatabase } from '../support/database.js';

const run = promisify(execFile);

const MIGRATE = `
import { connectDatabase, migrate } from './src/storage/database.ts';
const sql = connectDatabase(process.env.DATABASE_URL, { max: 1 });
const applied = await migrate(sql);
console.log(JSON.stringify(applied));
await sql.end();
`;

test('two processes migrating at once', async () => {
  const url = await createEmptyDatabase();
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
  const runs = await Promise.all(
    [1, 2].map(() =>
      run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', MIGRATE], { env: { ...process.env, DATABASE_URL: url } }),
    ),
  );
  const applied = runs.map((r) => JSON.parse(r.stdout) as string[]);
  // One process applied everything, the other found it done.
  expect(applied.map((a) => a.length).sort()).toEqual([0, files.length]);
  const sql = connectDatabase(url, { max: 1 });
  const rows = await sql`SELECT name FROM schema_migrations ORDER BY name`;
  expect(rows.map((r) => r.name)).toEqual(files);
  const tables = await sql`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`;
  expect(tables.map((r) => r.table_name)).toEqual(
    expect.arrayContaining(['api_keys', 'endpoint_events', 'endpoint_versions', 'endpoints', 'projects', 'team_members', 'teams', 'users']),
  );
  await sql.end();
});
