/**
 * Reads an untrusted JSON object field by field, collecting one violation per
 * bad field instead of stopping at the first, so that an error can name every
 * field and its rule.
 */
import type { FieldViolation } from './result.js';

type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// Printable text: no control characters (C0, DEL, C1: a C1 CSI, U+009B, drives some terminals as ESC [ does).
// eslint-disable-next-line no-control-regex -- control characters are what this rule finds
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f]/;
/**
 * The bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069): in a name they reorder
 * what is shown around them ("Trojan Source"), so that one endpoint's name can pass for another's in the console, the
 * CLI or a log. Free text (a comment, a message) may hold them; the marks (U+200E, U+200F) stay allowed everywhere.
 */
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/;

/**
 * Rules every string a client sends must meet before it goes near the
 * database: PostgreSQL cannot store NUL in text (it answers SQLSTATE 22021),
 * and a UTF-16 surrogate without its pair has no UTF-8 encoding (it would be
 * stored silently replaced by U+FFFD).
 */
export const TEXT_RULES = {
  nul: 'must not contain NUL (\\u0000) characters',
  surrogate: 'must be valid Unicode text (it contains an unpaired UTF-16 surrogate)',
} as const;

// eslint-disable-next-line no-control-regex -- NUL is what this rule finds
const NUL = /\u0000/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE = new RegExp(`${NUL.source}|${LONE_SURROGATE.source}`, 'g');
/** Blank: nothing but whitespace and format characters (Unicode category Cf: zero-width spaces, bidi controls). */
const BLANK = /^[\s\p{Cf}]*$/u;

/** The text rule a string breaks, if any. */
export function textViolation(value: string): string | undefined {
  if (NUL.test(value)) return TEXT_RULES.nul;
  if (LONE_SURROGATE.test(value)) return TEXT_RULES.surrogate;
  return undefined;
}

/**
 * The same text with what TEXT_RULES forbids (NUL, unpaired surrogates)
 * replaced by U+FFFD: for text the service did not take from a client and
 * cannot refuse (a model's answer), before it is stored.
 */
export function storableText(value: string): string {
  return value.replace(UNSTORABLE, '\ufffd');
}

/**
 * The first string (or member name) inside a decoded JSON value that `breaks`
 * a rule, as a field path under `path` (`advanced.name`, `messages[2].content`)
 * with the rule. Iterative, so that input nested thousands deep is walked, not
 * a stack overflow.
 */
function findBroken(
  value: unknown,
  path: string,
  breaks: (text: string) => string | undefined,
): { field: string; rule: string } | undefined {
  type Step = { value: unknown; parent: Step | undefined; key: string | number | undefined };
  const pathOf = (step: Step | undefined, last?: string): string => {
    const parts: string[] = last === undefined ? [] : [last];
    for (let at = step; at?.key !== undefined; at = at.parent) parts.push(typeof at.key === 'number' ? `[${at.key}]` : `.${at.key}`);
    const joined = parts.reverse().join('');
    return path ? `${path}${joined}` : joined.replace(/^\./, '');
  };
  const stack: Step[] = [{ value, parent: undefined, key: undefined }];
  while (stack.length > 0) {
    const step = stack.pop()!;
    const current = step.value;
    if (typeof current === 'string') {
      const rule = breaks(current);
      if (rule) return { field: pathOf(step), rule };
    } else if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) stack.push({ value: current[i], parent: step, key: i });
    } else if (typeof current === 'object' && current !== null) {
      const entries = Object.entries(current);
      for (const [key] of entries) {
        const rule = breaks(key);
        if (rule) return { field: pathOf(step, `.${key}`), rule };
      }
      for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i]![1], parent: step, key: entries[i]![0] });
    }
  }
  return undefined;
}

/** How deep a JSON value nests, walked without recursion (input may nest thousands deep), stopping past `limit`. */
export function nestingDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current !== 'object' || current === null) continue;
    deepest = Math.max(deepest, depth);
    if (deepest > limit) return deepest;
    for (const child of Object.values(current)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/**
 * Where a decoded JSON value holds NUL, which no field may (PostgreSQL cannot
 * store it): boundaries run it over whole inputs, so that no NUL reaches a
 * statement whatever the field.
 */
export function findNul(value: unknown, path: string): string | undefined {
  return findBroken(value, path, (text) => (NUL.test(text) ? TEXT_RULES.nul : undefined))?.field;
}

/** The first string (or member name) inside a decoded JSON value that breaks a text rule, with the rule. */
export function findTextViolation(value: unknown, path: string): { field: string; rule: string } | undefined {
  return findBroken(value, path, textViolation);
}

/**
 * Timestamps a client sends: ones PostgreSQL's timestamptz holds, and a
 * calendar can show (JavaScript's dates reach year 275760, PostgreSQL's
 * 294276, but not back to -271821).
 */
export const TIMESTAMP_RANGE = { min: new Date('0001-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z') } as const;
export const TIMESTAMP_RULE = 'must be an ISO 8601 timestamp from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z';

/**
 * The text of a timestamp: an ISO 8601 date, or date and time with `Z` or an
 * offset (a time without one would be read in the server's own zone).
 */
export const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** The timestamp rule a date breaks (an invalid Date: text that is no timestamp), if any. */
export function timestampViolation(date: Date): string | undefined {
  const time = date.getTime();
  return Number.isNaN(time) || time < TIMESTAMP_RANGE.min.getTime() || time > TIMESTAMP_RANGE.max.getTime() ? TIMESTAMP_RULE : undefined;
}

/** A field name without case, '_' or '-': `maxBatchSize`, `max_batch_size` and `max-batch-size` are one. */
const foldName = (name: string) => name.toLowerCase().replace(/[_-]/g, '');

/** Edits (insert, delete, replace, swap two neighbours) between two strings, or `limit + 1` once past `limit`. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, before[j - 2]! + 1);
      row.push(best);
    }
    if (Math.min(...row) > limit) return limit + 1;
    before = previous;
    previous = row;
  }
  return previous[b.length]!;
}

/**
 * The known field an unknown one most likely meant: the same name in another
 * case or separator style (`maxBatchSize` for `max_batch_size`), or the only
 * closest within a typo or two (one edit per three characters, at least one).
 */
export function nearestField(name: string, known: readonly string[]): string | undefined {
  const folded = foldName(name);
  if (folded === '') return undefined;
  const limit = Math.max(1, Math.floor(folded.length / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  let tied = false;
  for (const candidate of known) {
    const distance = editDistance(folded, foldName(candidate), limit);
    if (distance < bestDistance) [best, bestDistance, tied] = [candidate, distance, false];
    else if (distance === bestDistance && distance <= limit) tied = true;
  }
  return bestDistance <= limit && !tied ? best : undefined;
}

export class FieldChecker {
  readonly violations: FieldViolation[] = [];

  constructor(private readonly prefix = '') {}

  path(field: string): string {
    return this.prefix ? `${this.prefix}.${field}` : field;
  }

  fail(field: string, message: string): undefined {
    this.violations.push({ field: this.path(field), message });
    return undefined;
  }

  /** A checker for a nested object, reporting into the same list. */
  nested(field: string): FieldChecker {
    const child = new FieldChecker(this.path(field));
    (child as { violations: FieldViolation[] }).violations = this.violations;
    return child;
  }

  /** Rejects members that the request shape does not have, so typos are not silently ignored; a near miss names the field it resembles. */
  onlyKnown(obj: Json, known: readonly string[]): void {
    for (const key of Object.keys(obj)) {
      if (known.includes(key)) continue;
      const near = nearestField(key, known);
      this.fail(key, near === undefined ? 'is not a known field' : `is not a known field; did you mean '${near}'?`);
    }
  }

  string(
    obj: Json,
    field: string,
    rule: { required?: boolean; minLength?: number; maxLength: number; pattern?: RegExp; patternRule?: string },
  ): string | undefined {
    const value = obj[field];
    if (value === undefined || value === null) return rule.required ? this.fail(field, 'is required') : undefined;
    if (typeof value !== 'string') return this.fail(field, 'must be a string');
    const min = rule.minLength ?? 1;
    if (BLANK.test(value)) return this.fail(field, 'must not be empty');
    if (value.trim().length < min) return this.fail(field, `must have at least ${min} characters`);
    if (value.length > rule.maxLength) return this.fail(field, `must be at most ${rule.maxLength} characters`);
    if (CONTROL_CHARS.test(value)) return this.fail(field, 'must not contain control characters');
    if (BIDI_CONTROLS.test(value))
      return this.fail(field, 'must not contain bidirectional embeddings, overrides or isolates (U+202A to U+202E, U+2066 to U+2069)');
    if (LONE_SURROGATE.test(value)) return this.fail(field, TEXT_RULES.surrogate);
    if (rule.pattern && !rule.pattern.test(value)) return this.fail(field, rule.patternRule ?? 'has an invalid format');
    return value;
  }

  /** Free text (a comment): any characters but those the text rules forbid. */
  text(obj: Json, field: string, rule: { maxLength: number }): string | undefined {
    const value = obj[field];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string') return this.fail(field, 'must be a string');
    if (value.length > rule.maxLength) return this.fail(field, `must be at most ${rule.maxLength} characters`);
    const broken = textViolation(value);
    if (broken) return this.fail(field, broken);
    return value;
  }

  integer(obj: Json, field: string, rule: { required?: boolean; min: number; max: number }): number | undefined {
    const value = obj[field];
    if (value === undefined || value === null) return rule.required ? this.fail(field, 'is required') : undefined;
    if (typeof value !== 'number' || !Number.isInteger(value)) return this.fail(field, 'must be an integer');
    if (value < rule.min || value > rule.max) return this.fail(field, `must be from ${rule.min} to ${rule.max}`);
    return value;
  }

  boolean(obj: Json, field: string): boolean | undefined {
    const value = obj[field];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'boolean') return this.fail(field, 'must be a boolean');
    return value;
  }

  object(obj: Json, field: string, rule: { required?: boolean } = {}): Json | undefined {
    const value = obj[field];
    if (value === undefined || value === null) return rule.required ? this.fail(field, 'is required') : undefined;
    if (!isObject(value)) return this.fail(field, 'must be an object');
    return value;
  }
}
