/**
 * The expand/contract rules a migration follows (docs/development.md, Migrations), checked on its text: during a
 * rolling upgrade the release before it keeps serving on the new schema, and after a rollback it runs on it for good,
 * so a migration may not take away what that release uses. Refused, unless the statement's comment carries
 * `contract: <why it is safe>`:
 *
 * - a column added NOT NULL (or as a PRIMARY KEY) without a DEFAULT: the older release's inserts leave it out;
 * - SET NOT NULL on a column the same file gives no DEFAULT: the same, and any NULL it still writes;
 * - DROP DEFAULT: the older release's inserts may rely on it;
 * - DROP COLUMN, DROP TABLE, a table's or column's RENAME: the older release's statements name what is gone.
 *
 * This reads SQL as far as those rules need: comments, quoted strings and dollar-quoted bodies (a DO block's) are
 * told apart from statements, which are split at their semicolons; ALTER TABLE's actions at their top-level commas.
 */

export interface Violation {
  /** The statement, as written, shortened. */
  statement: string;
  rule: string;
}

interface Statement {
  /** The statement with comments and quoted text blanked out, upper-cased, whitespace collapsed. */
  code: string;
  /** The comments written within the statement or before it (after the previous one's semicolon). */
  comments: string;
  text: string;
}

/** Splits SQL into statements, keeping each one's comments apart. */
export function splitStatements(sql: string): Statement[] {
  const statements: Statement[] = [];
  let code = '';
  let comments = '';
  let start = 0;
  let i = 0;
  const end = (at: number) => {
    const text = sql.slice(start, at).trim();
    const squeezed = code.replace(/\s+/g, ' ').trim().toUpperCase();
    if (squeezed) statements.push({ code: squeezed, comments, text });
    code = '';
    comments = '';
    start = at + 1;
  };
  while (i < sql.length) {
    const rest = sql.slice(i);
    if (rest.startsWith('--')) {
      const stop = sql.indexOf('\n', i);
      const last = stop === -1 ? sql.length : stop;
      comments += sql.slice(i + 2, last) + '\n';
      code += ' ';
      i = last;
    } else if (rest.startsWith('/*')) {
      const stop = sql.indexOf('*/', i + 2);
      const last = stop === -1 ? sql.length : stop + 2;
      comments += sql.slice(i + 2, last - 2) + '\n';
      code += ' ';
      i = last;
    } else if (rest[0] === "'" || rest[0] === '"') {
      // A string or a quoted name: '' (or "") inside is the quote itself, which this scan reads as two quoted runs.
      const stop = sql.indexOf(rest[0], i + 1);
      const last = stop === -1 ? sql.length : stop + 1;
      code += rest[0] === '"' ? sql.slice(i, last) : "''";
      i = last;
    } else if (rest[0] === '$' && /^\$[A-Za-z_]*\$/.test(rest)) {
      const tag = /^\$[A-Za-z_]*\$/.exec(rest)![0];
      const stop = sql.indexOf(tag, i + tag.length);
      const last = stop === -1 ? sql.length : stop + tag.length;
      code += ' $BODY$ ';
      i = last;
    } else if (rest[0] === ';') {
      end(i);
      i++;
    } else {
      code += rest[0];
      i++;
    }
  }
  end(sql.length);
  return statements;
}

/** Splits at the commas outside parentheses (ALTER TABLE's actions). */
function topLevelParts(code: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < code.length; i++) {
    if (code[i] === '(') depth++;
    else if (code[i] === ')') depth--;
    else if (code[i] === ',' && depth === 0) {
      parts.push(code.slice(from, i).trim());
      from = i + 1;
    }
  }
  parts.push(code.slice(from).trim());
  return parts;
}

/** A marker comment that says why a contract change is safe: `contract:` and a reason. */
export function hasContractMarker(comments: string): boolean {
  return /(^|\s)contract:\s*\S/i.test(comments);
}

const NAME = '("[^"]*"|[A-Z_][A-Z0-9_$]*)';

/** The rules the migration `sql` breaks (empty when it follows them). */
export function checkMigration(sql: string): Violation[] {
  const violations: Violation[] = [];
  const statements = splitStatements(sql);
  // The columns this file gives a DEFAULT (SET NOT NULL on them is what the backfill's later release does).
  const defaults = new Set<string>();
  for (const { code } of statements) {
    for (const m of code.matchAll(new RegExp(`ALTER (?:COLUMN )?${NAME} SET DEFAULT`, 'g'))) defaults.add(m[1]!);
  }
  for (const statement of statements) {
    if (hasContractMarker(statement.comments)) continue;
    const refuse = (rule: string) => violations.push({ statement: statement.text.replace(/\s+/g, ' ').slice(0, 160), rule });
    const { code } = statement;
    if (/^DROP TABLE\b/.test(code)) refuse('DROP TABLE: the previous release may still use the table');
    const table = new RegExp(`^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?${NAME}\\*? `).exec(code);
    if (!table) continue;
    for (const action of topLevelParts(code.slice(table[0].length))) {
      const added = new RegExp(
        `^ADD (?:COLUMN )?(?:IF NOT EXISTS )?(?!(?:CONSTRAINT|PRIMARY|UNIQUE|CHECK|FOREIGN|EXCLUDE)\\b)${NAME} (.*)$`,
      ).exec(action);
      if (added && /\b(NOT NULL|PRIMARY KEY)\b/.test(added[2]!) && !/\bDEFAULT\b/.test(added[2]!)) {
        refuse(`column ${added[1]} added NOT NULL without a DEFAULT: the previous release's inserts leave it out`);
      }
      const altered = new RegExp(`^ALTER (?:COLUMN )?${NAME} (.*)$`).exec(action);
      if (altered && /^SET NOT NULL\b/.test(altered[2]!) && !defaults.has(altered[1]!)) {
        refuse(`column ${altered[1]} made NOT NULL without a DEFAULT: the previous release's inserts leave it out`);
      }
      if (altered && /^DROP DEFAULT\b/.test(altered[2]!)) {
        refuse(`DROP DEFAULT on ${altered[1]}: the previous release's inserts may leave the column to its default`);
      }
      if (/^DROP (?!CONSTRAINT\b)/.test(action)) refuse('DROP COLUMN: the previous release may still read or write the column');
      if (/^RENAME (?!CONSTRAINT\b)/.test(action)) refuse('RENAME: the previous release still uses the old name');
    }
  }
  return violations;
}
