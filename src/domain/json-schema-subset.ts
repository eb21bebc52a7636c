/**
 * The JSON Schema a `json_schema` response format may use: what node-llama-cpp's grammar generator
 * (utils/gbnfJson) really enforces, close to OpenAI's strict mode. The generator reads one keyword
 * per node ($ref, then oneOf, const, enum, type) and silently drops the rest, so a schema is checked
 * here keyword by keyword, and anything that would be dropped, weakened or contradicted is refused
 * with its path and rule:
 *
 * - a node is one of: `$ref`, `anyOf`, `const`, `enum` (each with annotations only, `type` allowed
 *   beside `const` and `enum` when every value has that type), or a `type` with its keywords;
 * - objects list every property in `required`; extra properties only where no property is named
 *   (a map), since the generator would otherwise let a named key come twice;
 * - bounds are whole numbers within SCHEMA_LIMITS.bound, and never contradict each other.
 *
 * The result is the schema inlined: every `$ref` replaced by its definition, so that the grammar is
 * a tree. Shared definitions cannot then multiply llama.cpp's parse stacks (two refs to a def that
 * has two refs to the next, 28 deep, took 8 s to build on the engine's event loop), their size
 * counts against SCHEMA_LIMITS.nodes as expanded, and a recursive definition is refused.
 */

import { isObject, nestingDepth } from './field-checker.js';

export type JsonSchema = { [keyword: string]: unknown };

/**
 * Bounds that keep a schema's grammar small: building one runs on the engine's event loop (50,000
 * enum values took 5 s there), and llama.cpp refuses large repetition counts.
 */
export const SCHEMA_LIMITS = {
  nodes: 500,
  depth: 32,
  bound: 500,
  literals: 1000,
  bytes: 64 * 1024,
  /** The schema once every `$ref` is replaced by its definition (what the grammar is made from, and what the engine keeps). */
  inlinedBytes: 256 * 1024,
  jsonDepth: 64,
  repetitions: 5000,
} as const;

const SCALARS = new Set(['string', 'number', 'integer', 'boolean', 'null']);
const FORMATS = new Set(['date', 'time', 'date-time']);
/** Keywords that say nothing the answer must meet. */
const ANNOTATIONS = new Set(['description', 'title', '$schema', '$id', '$comment', 'examples', 'default', 'deprecated']);
/** Keywords of a `type` node, by the type they apply to. */
const TYPE_KEYWORDS: Record<string, string> = {
  properties: 'object',
  required: 'object',
  additionalProperties: 'object',
  minProperties: 'object',
  maxProperties: 'object',
  items: 'array',
  prefixItems: 'array',
  minItems: 'array',
  maxItems: 'array',
  minLength: 'string',
  maxLength: 'string',
  format: 'string',
};
const DEFS_PREFIX = '#/$defs/';
/** Control characters other than those JSON's short escapes cover: the grammar generator writes them raw, which JSON forbids. */
// eslint-disable-next-line no-control-regex -- control characters are what this rule finds
const RAW_CONTROL = /[\u0001-\u0008\u000b\u000c\u000e-\u001f]/;

/**
 * `path` with the member `name` as the messages write it: `.name` when the name is plain (letters, digits, `_`,
 * `-`, `$`), else `["name"]` quoted as JSON. The names are the client's: quoted, a name cannot end the path early
 * or open a quote it never closes (the GraphQL surface renames REST field names outside quotes, field-names.ts).
 */
const member = (path: string, name: string) => (/^[\w$-]+$/.test(name) ? `${path}.${name}` : `${path}[${JSON.stringify(name)}]`);

const isLiteral = (value: unknown) => value === null || ['string', 'boolean'].includes(typeof value) || Number.isFinite(value);

class SchemaError extends Error {}

/** The JSON types a literal has (an integral number is also a number). */
function typesOf(value: unknown): string[] {
  if (value === null) return ['null'];
  if (typeof value === 'number') return Number.isInteger(value) ? ['integer', 'number'] : ['number'];
  return [typeof value];
}

interface Walk {
  nodes: number;
  literals: number;
  defs: Record<string, unknown>;
  /** Definitions being expanded (a ref to one of them is a recursion). */
  expanding: Set<string>;
  /** Repetition bounds already counted, by kind, minimum and maximum: each distinct one is a grammar rule of its size. */
  repetitions: Set<string>;
  repeated: number;
}

class Checker {
  constructor(private readonly walk: Walk) {}

  node(node: unknown, path: string, depth: number): JsonSchema {
    if (!isObject(node)) throw new SchemaError(`${path} must be a schema object`);
    if (++this.walk.nodes > SCHEMA_LIMITS.nodes) {
      throw new SchemaError(`the schema has more than ${SCHEMA_LIMITS.nodes} subschemas (with each $ref counted as its definition)`);
    }
    if (depth > SCHEMA_LIMITS.depth) throw new SchemaError(`${path} is nested deeper than ${SCHEMA_LIMITS.depth} levels`);
    if (node.$defs !== undefined && depth > 0) throw new SchemaError(`${path}.$defs: definitions are allowed only at the schema's root`);
    const keys = Object.keys(node).filter((k) => !ANNOTATIONS.has(k) && k !== '$defs');
    const only = (keyword: string, allowed: string[] = []) => {
      const other = keys.find((k) => k !== keyword && !allowed.includes(k));
      // An empty name is a key too (found, but falsy).
      if (other !== undefined)
        throw new SchemaError(`${member(path, other)} cannot be combined with ${keyword} (the grammar would drop one of them)`);
    };
    if (node.oneOf !== undefined) throw new SchemaError(`${path}.oneOf is not supported: use anyOf (the grammar cannot exclude overlaps)`);
    if (node.$ref !== undefined) {
      only('$ref');
      return this.ref(node.$ref, path, depth);
    }
    if (node.anyOf !== undefined) {
      only('anyOf');
      const list = node.anyOf;
      if (!Array.isArray(list) || list.length === 0) throw new SchemaError(`${path}.anyOf must be a non-empty list of schemas`);
      return { oneOf: list.map((s, i) => this.node(s, `${path}.anyOf[${i}]`, depth + 1)) };
    }
    if (node.const !== undefined || node.enum !== undefined) return this.literals(node, path, only);
    if (node.type === undefined) throw new SchemaError(`${path} must say what it allows (type, enum, const, anyOf or $ref)`);
    return this.typed(node, path, depth, keys);
  }

  private ref(ref: unknown, path: string, depth: number): JsonSchema {
    const name = typeof ref === 'string' && ref.startsWith(DEFS_PREFIX) ? ref.slice(DEFS_PREFIX.length) : undefined;
    if (name === undefined || !Object.hasOwn(this.walk.defs, name)) {
      throw new SchemaError(`${path}.$ref must be "${DEFS_PREFIX}<name>" naming a definition in the root's $defs`);
    }
    if (this.walk.expanding.has(name))
      throw new SchemaError(`${path}.$ref: recursive definitions (${JSON.stringify(ref)}) are not supported`);
    this.walk.expanding.add(name);
    const expanded = this.node(this.walk.defs[name], member('schema.$defs', name), depth + 1);
    this.walk.expanding.delete(name);
    return expanded;
  }

  private literals(node: Record<string, unknown>, path: string, only: (keyword: string, allowed?: string[]) => void): JsonSchema {
    const keyword = node.const !== undefined ? 'const' : 'enum';
    only(keyword, ['type']);
    const values = keyword === 'const' ? [node.const] : node.enum;
    if (!Array.isArray(values) || values.length === 0 || !values.every(isLiteral)) {
      throw new SchemaError(
        keyword === 'const'
          ? `${path}.const must be a string, a finite number, a boolean or null`
          : `${path}.enum must be a non-empty list of strings, finite numbers, booleans or null`,
      );
    }
    const raw = values.find((v) => typeof v === 'string' && RAW_CONTROL.test(v));
    if (raw !== undefined) throw new SchemaError(`${path}.${keyword} holds ${JSON.stringify(raw)}: control characters cannot be enforced`);
    this.walk.literals += values.length;
    if (this.walk.literals > SCHEMA_LIMITS.literals)
      throw new SchemaError(`the schema has more than ${SCHEMA_LIMITS.literals} enum and const values`);
    if (node.type !== undefined) {
      const types = this.types(node.type, path);
      const stray = values.find((v) => !typesOf(v).some((t) => types.includes(t)));
      if (stray !== undefined) throw new SchemaError(`${path}.${keyword} holds ${JSON.stringify(stray)}, which is not of its type`);
    }
    return keyword === 'const' ? { const: node.const } : { enum: values };
  }

  private types(type: unknown, path: string): string[] {
    const types = Array.isArray(type) ? type : [type];
    if (types.length === 0) throw new SchemaError(`${path}.type must name at least one type`);
    for (const t of types) {
      if (typeof t !== 'string' || !(SCALARS.has(t) || t === 'object' || t === 'array')) {
        throw new SchemaError(`${path}.type must name JSON types (got ${JSON.stringify(t)})`);
      }
    }
    if (Array.isArray(type) && types.some((t) => !SCALARS.has(t as string))) {
      throw new SchemaError(
        `${path}.type may list several types only among string, number, integer, boolean and null: use anyOf for objects and arrays`,
      );
    }
    return types as string[];
  }

  private bound(node: Record<string, unknown>, path: string, name: string): number | undefined {
    const v = node[name];
    if (v === undefined) return undefined;
    if (!(Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= SCHEMA_LIMITS.bound)) {
      throw new SchemaError(`${path}.${name} must be a whole number from 0 to ${SCHEMA_LIMITS.bound}`);
    }
    return v as number;
  }

  private range(node: Record<string, unknown>, path: string, min: string, max: string): [number | undefined, number | undefined] {
    const low = this.bound(node, path, min);
    const high = this.bound(node, path, max);
    if (low !== undefined && high !== undefined && low > high)
      throw new SchemaError(`${path}.${min} is more than ${max}: nothing could match`);
    // Each distinct bound is a rule repeated that many times; many distinct large ones took 300 ms to build.
    const key = `${min}:${low}:${high}`;
    if ((low !== undefined || high !== undefined) && !this.walk.repetitions.has(key)) {
      this.walk.repetitions.add(key);
      this.walk.repeated += Math.max(low ?? 0, high ?? 0);
      if (this.walk.repeated > SCHEMA_LIMITS.repetitions) {
        throw new SchemaError(`the schema's distinct lengths and counts add up to more than ${SCHEMA_LIMITS.repetitions}`);
      }
    }
    return [low, high];
  }

  private typed(node: Record<string, unknown>, path: string, depth: number, keys: string[]): JsonSchema {
    const types = this.types(node.type, path);
    const single = Array.isArray(node.type) ? undefined : (node.type as string);
    for (const keyword of keys) {
      if (keyword === 'type') continue;
      const appliesTo = Object.hasOwn(TYPE_KEYWORDS, keyword) ? TYPE_KEYWORDS[keyword] : undefined;
      if (appliesTo === undefined)
        throw new SchemaError(`${member(path, keyword)} is not supported: the engine cannot enforce it while it generates`);
      if (appliesTo !== single) throw new SchemaError(`${path}.${keyword} applies only to a schema whose type is "${appliesTo}"`);
    }
    const out: JsonSchema = { type: Array.isArray(node.type) ? [...types] : single };
    const sub = (value: unknown, at: string) => this.node(value, at, depth + 1);
    if (single === 'string') {
      const [minLength, maxLength] = this.range(node, path, 'minLength', 'maxLength');
      if (node.format !== undefined) {
        if (!FORMATS.has(node.format as string)) throw new SchemaError(`${path}.format must be one of date, time, date-time`);
        if (minLength !== undefined || maxLength !== undefined)
          throw new SchemaError(`${path}.format cannot be combined with minLength or maxLength`);
        out.format = node.format;
      }
      if (minLength !== undefined) out.minLength = minLength;
      if (maxLength !== undefined) out.maxLength = maxLength;
    }
    if (single === 'array') {
      const [minItems, maxItems] = this.range(node, path, 'minItems', 'maxItems');
      if (node.items !== undefined) out.items = sub(node.items, `${path}.items`);
      if (node.prefixItems !== undefined) {
        if (!Array.isArray(node.prefixItems)) throw new SchemaError(`${path}.prefixItems must be a list of schemas`);
        if (maxItems !== undefined && maxItems < node.prefixItems.length)
          throw new SchemaError(`${path}.maxItems is less than prefixItems' length`);
        out.prefixItems = node.prefixItems.map((s, i) => sub(s, `${path}.prefixItems[${i}]`));
      }
      if (minItems !== undefined) out.minItems = minItems;
      if (maxItems !== undefined) out.maxItems = maxItems;
    }
    if (single === 'object') Object.assign(out, this.object(node, path, sub));
    return out;
  }

  private object(node: Record<string, unknown>, path: string, sub: (value: unknown, at: string) => JsonSchema): JsonSchema {
    const properties = node.properties ?? {};
    if (!isObject(properties)) throw new SchemaError(`${path}.properties must be an object of schemas`);
    const names = Object.keys(properties);
    const rawName = names.find((n) => RAW_CONTROL.test(n));
    if (rawName !== undefined)
      throw new SchemaError(`${path}.properties has the name ${JSON.stringify(rawName)}: control characters cannot be enforced`);
    const required = node.required ?? [];
    if (!Array.isArray(required) || required.some((r) => typeof r !== 'string' || !names.includes(r))) {
      throw new SchemaError(`${path}.required must list names of its properties`);
    }
    const optional = names.filter((n) => !required.includes(n));
    if (optional.length > 0) {
      throw new SchemaError(
        `${path}.required must list every property, as in OpenAI's strict mode (missing: ${optional.map((n) => JSON.stringify(n)).join(', ')}); make an optional one nullable instead`,
      );
    }
    const extra = node.additionalProperties;
    const [minProperties, maxProperties] = this.range(node, path, 'minProperties', 'maxProperties');
    const isMap = extra !== undefined && extra !== false;
    if (names.length === 0 && extra === undefined) {
      throw new SchemaError(
        `${path} names no properties: say additionalProperties (true for any object, a schema for its values, or false for {})`,
      );
    }
    if (isMap && names.length > 0) {
      throw new SchemaError(
        `${path}.additionalProperties is allowed only without named properties (a map): use additionalProperties false`,
      );
    }
    if (!isMap && (minProperties !== undefined || maxProperties !== undefined)) {
      throw new SchemaError(`${path}.minProperties and maxProperties apply only to a map (additionalProperties true or a schema)`);
    }
    const out: JsonSchema = {
      properties: Object.fromEntries(names.map((k) => [k, sub(properties[k], member(`${path}.properties`, k))])),
      required: names,
    };
    if (isMap) out.additionalProperties = extra === true ? true : sub(extra, `${path}.additionalProperties`);
    // Kept, so that the result checks again as it is (a tool's schema inlined into the forced calls' schema).
    else if (extra === false) out.additionalProperties = false;
    if (minProperties !== undefined) out.minProperties = minProperties;
    if (maxProperties !== undefined) out.maxProperties = maxProperties;
    return out;
  }
}

/** Keywords whose value is one schema (`items` may also be a list of them, as in draft 4). */
const ONE_SCHEMA = [
  'items',
  'additionalProperties',
  'additionalItems',
  'not',
  'if',
  'then',
  'else',
  'contains',
  'propertyNames',
  'unevaluatedProperties',
  'unevaluatedItems',
];
/** Keywords whose value is a list of schemas, or a map of names to schemas. */
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];

const kindOf = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value);

/**
 * Where a JSON Schema is not shaped as one, whatever it asks for: a subschema that is neither an
 * object nor a boolean, a `type` that is not a type name or a list of them, a `required` that is
 * not a list of names, an `enum` that is not a list. The path of the first such value and the
 * rule; undefined when the shape is sound. The caller bounds the nesting first.
 */
export function schemaShapeViolation(schema: unknown, path: string): string | undefined {
  if (typeof schema === 'boolean') return undefined;
  if (!isObject(schema)) return `${path} must be a schema: an object or a boolean (got ${kindOf(schema)})`;
  const { type, required } = schema;
  const isTypeName = (t: unknown) => typeof t === 'string' && (SCALARS.has(t) || t === 'object' || t === 'array');
  if (type !== undefined && !(isTypeName(type) || (Array.isArray(type) && type.every(isTypeName))))
    return `${path}.type must be a JSON Schema type name or a list of them (got ${JSON.stringify(type)?.slice(0, 60)})`;
  if (required !== undefined && !(Array.isArray(required) && required.every((r) => typeof r === 'string')))
    return `${path}.required must be a list of property names (got ${kindOf(required)})`;
  if (schema.enum !== undefined && !Array.isArray(schema.enum)) return `${path}.enum must be a list of values (got ${kindOf(schema.enum)})`;
  for (const keyword of ONE_SCHEMA) {
    const value = schema[keyword];
    if (value === undefined) continue;
    const found =
      keyword === 'items' && Array.isArray(value)
        ? value.map((item, i) => schemaShapeViolation(item, `${path}.items[${i}]`)).find((v) => v !== undefined)
        : schemaShapeViolation(value, `${path}.${keyword}`);
    if (found) return found;
  }
  for (const keyword of SCHEMA_LISTS) {
    const value = schema[keyword];
    if (value === undefined) continue;
    if (!Array.isArray(value)) return `${path}.${keyword} must be a list of schemas (got ${kindOf(value)})`;
    for (let i = 0; i < value.length; i++) {
      const found = schemaShapeViolation(value[i], `${path}.${keyword}[${i}]`);
      if (found) return found;
    }
  }
  for (const keyword of SCHEMA_MAPS) {
    const value = schema[keyword];
    if (value === undefined) continue;
    if (!isObject(value)) return `${path}.${keyword} must be an object of schemas (got ${kindOf(value)})`;
    for (const [name, sub] of Object.entries(value)) {
      const found = schemaShapeViolation(sub, member(`${path}.${keyword}`, name));
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * The path a message of `schemaShapeViolation` starts with (its field): up to the first space outside a quoted
 * name (`["a b"]`).
 */
export function violationPath(message: string): string {
  let quoted = false;
  for (let i = 0; i < message.length; i++) {
    const c = message[i];
    if (quoted && c === '\\') i++;
    else if (c === '"') quoted = !quoted;
    else if (c === ' ' && !quoted) return message.slice(0, i);
  }
  return message;
}

/** The schema inlined as the grammar generator reads it, or the rule it breaks (with its path under `schema`). */
export function checkJsonSchema(schema: unknown): { schema: JsonSchema } | { error: string } {
  try {
    if (!isObject(schema)) throw new SchemaError('schema must be a JSON Schema object');
    if (nestingDepth(schema, SCHEMA_LIMITS.jsonDepth) > SCHEMA_LIMITS.jsonDepth) {
      throw new SchemaError(`schema nests JSON more than ${SCHEMA_LIMITS.jsonDepth} levels deep`);
    }
    if (JSON.stringify(schema).length > SCHEMA_LIMITS.bytes)
      throw new SchemaError(`schema is larger than ${SCHEMA_LIMITS.bytes / 1024} KiB as JSON`);
    const defs = schema.$defs ?? {};
    if (!isObject(defs)) throw new SchemaError('schema.$defs must be an object of schemas');
    const checker = new Checker({ nodes: 0, literals: 0, defs, expanding: new Set(), repetitions: new Set(), repeated: 0 });
    const inlined = checker.node(schema, 'schema', 0);
    // A large definition referenced many times inlines to many times the schema's own size.
    if (JSON.stringify(inlined).length > SCHEMA_LIMITS.inlinedBytes)
      throw new SchemaError(`schema is larger than ${SCHEMA_LIMITS.inlinedBytes / 1024} KiB as JSON once its $refs are inlined`);
    return { schema: inlined };
  } catch (error) {
    if (error instanceof SchemaError) return { error: error.message };
    throw error;
  }
}
