/**
 * The expand/contract guard over db/*.sql (docs/development.md, Migrations): a migration newer than the last one
 * written before the guard may not take away what the release before it uses (a column made NOT NULL without a
 * DEFAULT, a dropped default, column or table, a rename) unless a `-- contract: <why it is safe>` comment says why.
 * The checker itself is tested on the migration that broke a rolling upgrade (an invite on an older gateway got 500).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { MIGRATIONS_DIR } from '../../src/storage/database.js';
import { checkMigration, splitStatements } from '../support/migration-rules.js';

/** The last migration written before the guard: those after it are held to the rules. */
const GUARDED_AFTER = '20261205020000_replica_model.sql';

test('every migration after the guard follows the expand/contract rules', async () => {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql') && f > GUARDED_AFTER).sort();
  expect(files.length).toBeGreaterThan(0);
  const broken: string[] = [];
  for (const file of files) {
    for (const v of checkMigration(await readFile(path.join(MIGRATIONS_DIR, file), 'utf8'))) {
      broken.push(`db/${file}: ${v.rule}\n  ${v.statement}\n  (a contract change needs "-- contract: <why it is safe>" before it)`);
    }
  }
  expect(broken, broken.join('\n')).toEqual([]);
});

test('the guard names the migration that broke the rolling upgrade to invitation expiry', async () => {
  const text = await readFile(path.join(MIGRATIONS_DIR, '20261126000000_invitation_expiry.sql'), 'utf8');
  expect(checkMigration(text)).toEqual([
    {
      statement: 'ALTER TABLE team_invitations ALTER COLUMN expires_at SET NOT NULL',
      rule: expect.stringContaining('column EXPIRES_AT made NOT NULL without a DEFAULT'),
    },
  ]);
});

describe('the checker', () => {
  const rules = (sql: string) => checkMigration(sql).map((v) => v.rule.split(':')[0]);

  test('additive changes pass', () => {
    expect(
      rules(`
        CREATE TABLE t (id text PRIMARY KEY, n int NOT NULL);
        ALTER TABLE t ADD COLUMN a text, ADD COLUMN b int NOT NULL DEFAULT 0;
        ALTER TABLE t ADD COLUMN IF NOT EXISTS c timestamptz NOT NULL DEFAULT now();
        ALTER TABLE t ADD CONSTRAINT t_n CHECK (n IS NOT NULL);
        ALTER TABLE t ALTER COLUMN n DROP NOT NULL;
        ALTER TABLE t DROP CONSTRAINT t_n;
        ALTER TABLE t RENAME CONSTRAINT t_pkey TO t_key;
        CREATE INDEX t_a ON t (a);
        DROP INDEX t_a;
      `),
    ).toEqual([]);
  });

  test('contract changes are refused, each named', () => {
    expect(rules('ALTER TABLE t ADD COLUMN a text NOT NULL')).toEqual(['column A added NOT NULL without a DEFAULT']);
    expect(rules('ALTER TABLE t ADD id2 text PRIMARY KEY')).toEqual(['column ID2 added NOT NULL without a DEFAULT']);
    expect(rules('ALTER TABLE t ADD COLUMN a text, ALTER COLUMN b SET NOT NULL')).toEqual(['column B made NOT NULL without a DEFAULT']);
    expect(rules('ALTER TABLE t ALTER b DROP DEFAULT')).toEqual(['DROP DEFAULT on B']);
    expect(rules('ALTER TABLE ONLY t DROP COLUMN a')).toEqual(['DROP COLUMN']);
    expect(rules('ALTER TABLE t DROP a')).toEqual(['DROP COLUMN']);
    expect(rules('DROP TABLE IF EXISTS t')).toEqual(['DROP TABLE']);
    expect(rules('ALTER TABLE t RENAME COLUMN a TO b')).toEqual(['RENAME']);
    expect(rules('ALTER TABLE t RENAME TO u')).toEqual(['RENAME']);
  });

  test('SET NOT NULL passes where the same file gives the column a DEFAULT', () => {
    expect(
      rules('ALTER TABLE t ALTER COLUMN b SET DEFAULT 0;\nUPDATE t SET b = 0 WHERE b IS NULL;\nALTER TABLE t ALTER COLUMN b SET NOT NULL;'),
    ).toEqual([]);
  });

  test('a contract comment before the statement lets it through, that statement only', () => {
    const sql = `
      -- contract: no release since 2026-11 reads legacy_flag (docs/operations.md, Upgrading)
      ALTER TABLE t DROP COLUMN legacy_flag;
      ALTER TABLE t DROP COLUMN other;
    `;
    expect(rules(sql)).toEqual(['DROP COLUMN']);
    expect(rules('-- contract:\nALTER TABLE t DROP COLUMN a')).toEqual(['DROP COLUMN']);
  });

  test('comments, strings and dollar-quoted bodies are not read as statements', () => {
    const sql = `
      -- Not a statement: ALTER TABLE t DROP COLUMN a;
      /* nor this: DROP TABLE t; */
      UPDATE t SET note = 'DROP TABLE t; RENAME';
      DO $$ BEGIN EXECUTE 'ALTER TABLE t RENAME TO u'; END $$;
      DO $body$ BEGIN PERFORM 1; END $body$;
    `;
    expect(rules(sql)).toEqual([]);
    expect(splitStatements(sql).map((s) => s.code.split(' ')[0])).toEqual(['UPDATE', 'DO', 'DO']);
  });
});
