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

// Printable text: no control characters.
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

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

  /** Rejects members that the request shape does not have, so typos are not silently ignored. */
  onlyKnown(obj: Json, known: readonly string[]): void {
    for (const key of Object.keys(obj)) {
      if (!known.includes(key)) this.fail(key, 'is not a known field');
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
    if (value.trim().length < min) return this.fail(field, min === 1 ? 'must not be empty' : `must have at least ${min} characters`);
    if (value.length > rule.maxLength) return this.fail(field, `must be at most ${rule.maxLength} characters`);
    if (CONTROL_CHARS.test(value)) return this.fail(field, 'must not contain control characters');
    if (rule.pattern && !rule.pattern.test(value)) return this.fail(field, rule.patternRule ?? 'has an invalid format');
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
