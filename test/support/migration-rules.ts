/**
 * The expand/contract rules a migration follows (docs/development.md, Migrations), checked on its text: during a
 * rolling upgrade the release before it keeps serving on the new schema, and after a rollback it runs on it for good,
 * so a migration may not take away what that release uses, nor refuse what it writes. Refused, unless the statement's
 * comment carries `contract: <why it is safe>`:
 *
 * - a column added NOT NULL (or as a PRIMARY KEY) without a DEFAULT (DEFAULT NULL is none): the older release's
 *   inserts leave it out;
 * - SET NOT NULL on a column of a table the same file gives no DEFAULT for it: the same, and any NULL it still writes;
 * - DROP DEFAULT, or SET DEFAULT NULL, which is the same: the older release's inserts may rely on the default;
 * - a column's TYPE changed: the older release's statements and parameters are typed for the old one;
 * - a new constraint (CHECK, NOT NULL, UNIQUE, PRIMARY KEY, EXCLUDE, FOREIGN KEY) or a CREATE UNIQUE INDEX on a
 *   table this file did not create: the older release's writes may break it (CHECK (c IS NOT NULL) is a NOT NULL);
 * - every DROP statement (table, view, function, type, trigger, sequence, index...) and ALTER TABLE's DROP COLUMN
 *   and DROP CONSTRAINT: the older release may use what is gone, and its ON CONFLICT (columns) fails (42P10)
 *   without the unique index or constraint that matches it;
 * - a RENAME (a table's, a column's, a type's value...) and a SET SCHEMA: the older release still uses the old name.
 *   A constraint's or index's rename passes: the code names none (ON CONFLICT names columns).
 *
 * This reads SQL as far as those rules need: comments, quoted strings (E'...' with its backslash escapes) and
 * dollar-quoted bodies (a DO block's, not read) are told apart from statements, which are split at their semicolons;
 * ALTER TABLE's actions at their top-level commas. Names may be schema-qualified and quoted; a table is known by its
 * last part (the schema is the search path's).
 */

export interface Violation {
  /** The statement, as written, shortened. */
  statement: string;
  rule: string;
}

interface Statement {
  /** The statement with comments and quoted text blanked out, upper-cased, whitespace collapsed. */
  code: string;
  /**
   * The comments written within the statement or before it (after the previous one's semicolon), and those that
   * begin on the line it ends on, after its semicolon (`DROP ...; -- contract: why`).
   */
  comments: string;
  text: string;
}

/** A character that continues an identifier: E'...' and $tag$ only begin where none comes before. */
const IDENT_CHAR = /[A-Za-z0-9_$\u0080-\uffff]/;
/** A dollar quote's opening: $$ or $tag$, the tag an identifier without `$`. */
const DOLLAR_TAG = /\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y;

/** Where the quoted run opened at `i` (a ' or ") ends: past its closing quote. */
function quotedEnd(sql: string, i: number, backslashEscapes: boolean): number {
  const quote = sql[i]!;
  let j = i + 1;
  while (j < sql.length) {
    if (backslashEscapes && sql[j] === '\\') j += 2;
    else if (sql[j] !== quote) j++;
    // A doubled quote is the quote itself, inside the run.
    else if (sql[j + 1] === quote) j += 2;
    else return j + 1;
  }
  return sql.length;
}

/** Where the block comment opened at `i` ends: PostgreSQL's block comments nest. */
function blockCommentEnd(sql: string, i: number): number {
  let depth = 0;
  let j = i;
  while (j < sql.length) {
    if (sql.startsWith('/*', j)) {
      depth++;
      j += 2;
    } else if (sql.startsWith('*/', j)) {
      j += 2;
      if (--depth === 0) return j;
    } else j++;
  }
  return sql.length;
}

/** Splits SQL into statements, keeping each one's comments apart. */
export function splitStatements(sql: string): Statement[] {
  const statements: Statement[] = [];
  let code = '';
  let comments = '';
  let start = 0;
  // The statement that ended on the line being read, with nothing but blanks after its semicolon yet.
  let endedOnThisLine: Statement | undefined;
  const end = (at: number) => {
    const text = sql.slice(start, at).trim();
    const squeezed = code.replace(/\s+/g, ' ').trim().toUpperCase();
    endedOnThisLine = squeezed ? { code: squeezed, comments, text } : undefined;
    if (endedOnThisLine) statements.push(endedOnThisLine);
    code = '';
    comments = '';
    start = at + 1;
  };
  /** A comment's text, without its delimiters; `to` is where it ends. */
  const comment = (text: string, to: number) => {
    if (endedOnThisLine) {
      endedOnThisLine.comments += text + '\n';
      // Not in the next statement's text either.
      start = to;
    } else comments += text + '\n';
    code += ' ';
  };
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    const before = sql[i - 1] ?? ' ';
    DOLLAR_TAG.lastIndex = i;
    if (sql.startsWith('--', i)) {
      const stop = sql.indexOf('\n', i);
      const last = stop === -1 ? sql.length : stop;
      comment(sql.slice(i + 2, last), last);
      i = last;
    } else if (sql.startsWith('/*', i)) {
      const last = blockCommentEnd(sql, i);
      comment(sql.slice(i + 2, last - 2), last);
      i = last;
    } else if (c === "'" || c === '"') {
      // In E'...' (an E right before the quote, not ending a name) a backslash escapes the next character: E'it\'s'.
      const escapes = c === "'" && /[Ee]/.test(before) && !IDENT_CHAR.test(sql[i - 2] ?? ' ');
      const last = quotedEnd(sql, i, escapes);
      // A quoted name stays (it names what a rule reads); a string's text is blanked.
      code += c === '"' ? sql.slice(i, last) : "''";
      endedOnThisLine = undefined;
      i = last;
    } else if (c === '$' && !IDENT_CHAR.test(before) && DOLLAR_TAG.test(sql)) {
      const tag = sql.slice(i, DOLLAR_TAG.lastIndex);
      const stop = sql.indexOf(tag, i + tag.length);
      code += ' $BODY$ ';
      endedOnThisLine = undefined;
      i = stop === -1 ? sql.length : stop + tag.length;
    } else if (c === ';') {
      end(i);
      i++;
    } else {
      if (c === '\n' || !/\s/.test(c)) endedOnThisLine = undefined;
      code += c;
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

/** A name, quoted ("" inside is a quote) or not. */
const IDENT = '(?:"(?:[^"]|"")*"|[A-Z_][A-Z0-9_$]*)';
/** A name that may be qualified: schema.table (blanks around the dot are allowed). */
const QUALIFIED = `(${IDENT}(?: ?\\. ?${IDENT})*)`;
/** ALTER TABLE's target: `ALTER TABLE IF EXISTS ONLY public.t *` included. */
const ALTER_TABLE = new RegExp(`^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?${QUALIFIED}(?: ?\\*)? `);
/** A table this file creates (not with IF NOT EXISTS, which may find one the previous release uses). */
const CREATE_TABLE = new RegExp(`^CREATE (?:(?:GLOBAL |LOCAL )?(?:TEMP|TEMPORARY|UNLOGGED) )?TABLE (?!IF NOT EXISTS )${QUALIFIED}`);
const UNIQUE_INDEX = new RegExp(`^CREATE UNIQUE INDEX (?:CONCURRENTLY )?(?:(?:IF NOT EXISTS )?${IDENT} )?ON (?:ONLY )?${QUALIFIED}`);
/** ADD COLUMN's column and the rest of its definition (ADD alone may begin a constraint instead). */
const ADD_COLUMN = new RegExp(
  `^ADD (?:COLUMN )?(?:IF NOT EXISTS )?(?!(?:CONSTRAINT|PRIMARY|UNIQUE|CHECK|FOREIGN|EXCLUDE)\\b)(${IDENT}) (.*)$`,
);
const ADD_CONSTRAINT = new RegExp(`^ADD (?:CONSTRAINT ${IDENT} )?(CHECK|NOT NULL|UNIQUE|PRIMARY KEY|EXCLUDE|FOREIGN KEY)\\b`);
const ALTER_COLUMN = new RegExp(`^ALTER (?:COLUMN )?(${IDENT}) (.*)$`);
/** A default that gives a value: DEFAULT NULL (or (NULL), NULL::int) is none. */
const REAL_DEFAULT = /\bDEFAULT (?!\(* ?NULL\b)/;

/** How a rule knows a table or column: its last name part, unquoted. */
function key(name: string): string {
  const last = name.match(new RegExp(IDENT, 'g'))!.at(-1)!;
  return last.startsWith('"') ? last.slice(1, -1).replace(/""/g, '"') : last;
}

/** Whether a column's definition (after its name) fills it when an insert leaves it out. */
function fillsItself(definition: string): boolean {
  return REAL_DEFAULT.test(definition) || /\bGENERATED\b/.test(definition) || /^(SMALL|BIG)?SERIAL[248]?\b/.test(definition);
}

/** The tables the file creates, and the `table.column`s it gives a DEFAULT (SET NOT NULL on them then passes). */
function readDeclarations(statements: Statement[]): { created: Set<string>; defaults: Set<string> } {
  const created = new Set<string>();
  const defaults = new Set<string>();
  for (const { code } of statements) {
    const creates = CREATE_TABLE.exec(code);
    if (creates) created.add(key(creates[1]!));
    const table = ALTER_TABLE.exec(code);
    if (!table) continue;
    for (const action of topLevelParts(code.slice(table[0].length))) {
      const column = ALTER_COLUMN.exec(action) ?? ADD_COLUMN.exec(action);
      const defined = column && (/^SET DEFAULT /.test(column[2]!) ? REAL_DEFAULT.test(column[2]!) : fillsItself(column[2]!));
      if (defined) defaults.add(`${key(table[1]!)}.${key(column[1]!)}`);
    }
  }
  return { created, defaults };
}

/** The rules the migration `sql` breaks (empty when it follows them). */
export function checkMigration(sql: string): Violation[] {
  const violations: Violation[] = [];
  const statements = splitStatements(sql);
  const { created, defaults } = readDeclarations(statements);
  for (const statement of statements) {
    if (hasContractMarker(statement.comments)) continue;
    const refuse = (rule: string) => violations.push({ statement: statement.text.replace(/\s+/g, ' ').slice(0, 160), rule });
    const { code } = statement;

    const drop = /^DROP (MATERIALIZED VIEW|FOREIGN TABLE|EVENT TRIGGER|ACCESS METHOD|TEXT SEARCH \w+|[A-Z]+)\b/.exec(code);
    if (drop) {
      refuse(
        drop[1] === 'INDEX'
          ? "DROP INDEX: the previous release's ON CONFLICT (columns) needs a unique index that matches it (42P10 without)"
          : `DROP ${drop[1]}: the previous release may still use it`,
      );
    }
    const unique = UNIQUE_INDEX.exec(code);
    if (unique && !created.has(key(unique[1]!))) {
      refuse("CREATE UNIQUE INDEX on an existing table: the previous release's writes may break it");
    }
    if (/^ALTER /.test(code) && !/^ALTER TABLE /.test(code)) {
      // ALTER TYPE, VIEW, FUNCTION, SEQUENCE...: a rename (RENAME VALUE, ATTRIBUTE or TO), a move to another schema,
      // or a dropped attribute. An index's rename passes, as a constraint's does below.
      if (/ RENAME /.test(code) && !/^ALTER INDEX /.test(code)) refuse('RENAME: the previous release still uses the old name');
      if (/ SET SCHEMA /.test(code)) refuse('SET SCHEMA: the previous release still uses the old schema');
      if (/ DROP ATTRIBUTE\b/.test(code)) refuse('DROP ATTRIBUTE: the previous release may still use it');
    }

    const table = ALTER_TABLE.exec(code);
    // A table this file creates is one the previous release knows nothing of.
    if (!table || created.has(key(table[1]!))) continue;
    const tableKey = key(table[1]!);
    for (const action of topLevelParts(code.slice(table[0].length))) {
      const added = ADD_COLUMN.exec(action);
      // CHECK (c IS NOT NULL) in the column's definition is a NOT NULL too.
      if (added && /\b(NOT NULL|PRIMARY KEY)\b/.test(added[2]!) && !fillsItself(added[2]!)) {
        refuse(`column ${added[1]} added NOT NULL without a DEFAULT: the previous release's inserts leave it out`);
      }
      const constraint = ADD_CONSTRAINT.exec(action);
      if (constraint) {
        // NOT VALID spares only the rows already there: the previous release's next writes are checked.
        refuse(`new ${constraint[1]} constraint: the previous release's writes may break it (CHECK (c IS NOT NULL) is a NOT NULL)`);
      }
      const altered = ALTER_COLUMN.exec(action);
      const [column, change] = altered ? [altered[1]!, altered[2]!] : ['', ''];
      if (/^SET NOT NULL\b/.test(change) && !defaults.has(`${tableKey}.${key(column)}`)) {
        refuse(`column ${column} made NOT NULL without a DEFAULT: the previous release's inserts leave it out`);
      }
      if (/^DROP (DEFAULT|IDENTITY|EXPRESSION)\b/.test(change)) {
        refuse(`DROP DEFAULT on ${column}: the previous release's inserts may leave the column to its default`);
      }
      if (/^SET DEFAULT /.test(change) && !REAL_DEFAULT.test(change)) {
        refuse(`SET DEFAULT NULL on ${column}: a dropped default, the previous release's inserts may leave the column to it`);
      }
      if (/^(SET DATA )?TYPE /.test(change)) {
        refuse(`TYPE of ${column} changed: the previous release's statements and parameters are typed for the old one`);
      }
      if (/^DROP CONSTRAINT\b/.test(action)) {
        refuse("DROP CONSTRAINT: the previous release's writes, or its ON CONFLICT (columns), may rely on it");
      } else if (/^DROP /.test(action)) refuse('DROP COLUMN: the previous release may still read or write the column');
      if (/^RENAME (?!CONSTRAINT\b)/.test(action)) refuse('RENAME: the previous release still uses the old name');
      if (/^SET SCHEMA\b/.test(action)) refuse('SET SCHEMA: the previous release still uses the old schema');
    }
  }
  return violations;
}
