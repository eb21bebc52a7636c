/**
 * `response_format` of a chat request: free text, any JSON value (`json_object`), or JSON that
 * follows a schema (`json_schema`). The built-in engine enforces JSON with a grammar while it
 * samples (node-llama-cpp's GBNF grammars), so every token it emits keeps the answer valid.
 *
 * The grammar generator honours a subset of JSON Schema, close to OpenAI's strict mode, and
 * silently drops what it does not know (an `anyOf` would come out as `null`, a `pattern` would be
 * ignored). So a schema is checked here, keyword by keyword, and refused with its path and rule
 * unless every constraint in it can be enforced; `anyOf` is passed on as `oneOf`, which generates
 * the same alternatives.
 */

export type JsonSchema = { [keyword: string]: unknown };

export type ResponseFormat =
  { type: 'text' } | { type: 'json_object' } | { type: 'json_schema'; name: string; schema: JsonSchema; strict: boolean };

/** A refusal: the message and the request field it is about. */
export type FormatError = { message: string; param: string };

/**
 * Bounds that keep a schema's grammar small: building one runs on the engine's event loop (50,000
 * enum values took 5 s there), and llama.cpp refuses large repetition counts.
 */
export const SCHEMA_LIMITS = { nodes: 500, depth: 32, bound: 500, literals: 1000, bytes: 64 * 1024 } as const;

const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null', 'object', 'array']);
const FORMATS = new Set(['date', 'time', 'date-time']);
/** Keywords that say nothing the answer must meet (annotations). */
const ANNOTATIONS = new Set(['description', 'title', '$schema', '$id', '$comment', 'examples', 'default', 'deprecated']);
/** Keywords the grammar enforces, by the type they apply to (`*`: any node). */
const KEYWORDS: Record<string, string> = {
  type: '*',
  enum: '*',
  const: '*',
  anyOf: '*',
  oneOf: '*',
  $ref: '*',
  $defs: '*',
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
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isLiteral = (value: unknown) => value === null || ['string', 'number', 'boolean'].includes(typeof value);

class SchemaError extends Error {}

/** Checks one schema node and returns it as the grammar generator reads it (anyOf as oneOf), or throws SchemaError. */
function checkNode(
  node: unknown,
  path: string,
  depth: number,
  count: { nodes: number; literals: number },
  defs: ReadonlySet<string>,
): JsonSchema {
  if (!isObject(node)) throw new SchemaError(`${path} must be a schema object`);
  if (++count.nodes > SCHEMA_LIMITS.nodes) throw new SchemaError(`the schema has more than ${SCHEMA_LIMITS.nodes} subschemas`);
  if (depth > SCHEMA_LIMITS.depth) throw new SchemaError(`${path} is nested deeper than ${SCHEMA_LIMITS.depth} levels`);
  const type = node.type;
  const types = Array.isArray(type) ? type : type === undefined ? [] : [type];
  for (const t of types)
    if (typeof t !== 'string' || !TYPES.has(t)) throw new SchemaError(`${path}.type must name JSON types (got ${JSON.stringify(t)})`);
  if (Array.isArray(type) && types.some((t) => t === 'object' || t === 'array')) {
    throw new SchemaError(
      `${path}.type may list several types only among string, number, integer, boolean and null: use anyOf for objects and arrays`,
    );
  }
  const single = typeof type === 'string' ? type : undefined;
  const out: JsonSchema = {};
  for (const [keyword, value] of Object.entries(node)) {
    const at = `${path}.${keyword}`;
    if (ANNOTATIONS.has(keyword)) continue;
    const appliesTo = KEYWORDS[keyword];
    if (appliesTo === undefined) throw new SchemaError(`${at} is not supported: the engine cannot enforce it while it generates`);
    if (appliesTo !== '*' && appliesTo !== single) throw new SchemaError(`${at} applies only to a schema of type "${appliesTo}"`);
    out[keyword] = value;
  }
  const says = ['type', 'enum', 'const', 'anyOf', 'oneOf', '$ref'].some((k) => node[k] !== undefined);
  if (!says) throw new SchemaError(`${path} must say what it allows (type, enum, const, anyOf or $ref)`);
  if (node.enum !== undefined && (!Array.isArray(node.enum) || node.enum.length === 0 || !node.enum.every(isLiteral))) {
    throw new SchemaError(`${path}.enum must be a non-empty list of strings, numbers, booleans or null`);
  }
  if (node.const !== undefined && !isLiteral(node.const)) throw new SchemaError(`${path}.const must be a string, number, boolean or null`);
  count.literals += (Array.isArray(node.enum) ? node.enum.length : 0) + (node.const !== undefined ? 1 : 0);
  if (count.literals > SCHEMA_LIMITS.literals)
    throw new SchemaError(`the schema has more than ${SCHEMA_LIMITS.literals} enum and const values`);
  if (node.format !== undefined && !FORMATS.has(node.format as string))
    throw new SchemaError(`${path}.format must be one of date, time, date-time`);
  for (const bound of ['minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties']) {
    const v = node[bound];
    if (v !== undefined && !(Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= SCHEMA_LIMITS.bound))
      throw new SchemaError(`${path}.${bound} must be a whole number from 0 to ${SCHEMA_LIMITS.bound}`);
  }
  const sub = (value: unknown, at: string) => checkNode(value, at, depth + 1, count, defs);
  for (const keyword of ['anyOf', 'oneOf'] as const) {
    if (node[keyword] === undefined) continue;
    const list = node[keyword];
    if (!Array.isArray(list) || list.length === 0) throw new SchemaError(`${path}.${keyword} must be a non-empty list of schemas`);
    delete out[keyword];
    out.oneOf = [...((out.oneOf as JsonSchema[] | undefined) ?? []), ...list.map((s, i) => sub(s, `${path}.${keyword}[${i}]`))];
  }
  if (node.$ref !== undefined) {
    const name = typeof node.$ref === 'string' && node.$ref.startsWith('#/$defs/') ? node.$ref.slice('#/$defs/'.length) : undefined;
    if (name === undefined || !defs.has(name)) throw new SchemaError(`${path}.$ref must be "#/$defs/<name>" naming a definition in $defs`);
  }
  if (single === 'object') {
    const properties = node.properties ?? {};
    if (!isObject(properties)) throw new SchemaError(`${path}.properties must be an object of schemas`);
    out.properties = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, sub(v, `${path}.properties.${k}`)]));
    const required = node.required ?? [];
    const names = Object.keys(properties);
    if (!Array.isArray(required) || required.some((r) => typeof r !== 'string' || !names.includes(r))) {
      throw new SchemaError(`${path}.required must list names of its properties`);
    }
    const optional = names.filter((n) => !required.includes(n));
    if (optional.length > 0) {
      throw new SchemaError(
        `${path}.required must list every property, as in OpenAI's strict mode (missing: ${optional.join(', ')}); make an optional one nullable instead`,
      );
    }
    const extra = node.additionalProperties;
    if (extra !== undefined && typeof extra !== 'boolean') out.additionalProperties = sub(extra, `${path}.additionalProperties`);
  }
  if (single === 'array') {
    if (node.items !== undefined) {
      if (typeof node.items === 'boolean') throw new SchemaError(`${path}.items must be a schema`);
      out.items = sub(node.items, `${path}.items`);
    }
    if (node.prefixItems !== undefined) {
      if (!Array.isArray(node.prefixItems)) throw new SchemaError(`${path}.prefixItems must be a list of schemas`);
      out.prefixItems = node.prefixItems.map((s, i) => sub(s, `${path}.prefixItems[${i}]`));
    }
  }
  return out;
}

/** The schema as the grammar generator reads it, or the rule it breaks (with its path under `schema`). */
export function checkJsonSchema(schema: unknown): { schema: JsonSchema } | { error: string } {
  try {
    if (!isObject(schema)) throw new SchemaError('schema must be a JSON Schema object');
    if (JSON.stringify(schema).length > SCHEMA_LIMITS.bytes)
      throw new SchemaError(`schema is larger than ${SCHEMA_LIMITS.bytes / 1024} KiB as JSON`);
    const defsValue = schema.$defs ?? {};
    if (!isObject(defsValue)) throw new SchemaError('schema.$defs must be an object of schemas');
    const names = new Set(Object.keys(defsValue));
    const count = { nodes: 0, literals: 0 };
    const root = checkNode(schema, 'schema', 0, count, names);
    if (schema.$defs !== undefined) {
      root.$defs = Object.fromEntries(Object.entries(defsValue).map(([k, v]) => [k, checkNode(v, `schema.$defs.${k}`, 1, count, names)]));
    }
    return { schema: root };
  } catch (error) {
    if (error instanceof SchemaError) return { error: error.message };
    throw error;
  }
}

/** Parses `response_format` (absent or null: text). */
export function parseResponseFormat(value: unknown): ResponseFormat | FormatError {
  if (value === undefined || value === null) return { type: 'text' };
  if (!isObject(value)) return { message: 'response_format must be an object', param: 'response_format' };
  const { type } = value;
  if (type === 'text') return { type: 'text' };
  if (type === 'json_object') return { type: 'json_object' };
  if (type !== 'json_schema') {
    return {
      message: `response_format.type must be "text", "json_object" or "json_schema" (got ${JSON.stringify(type)})`,
      param: 'response_format.type',
    };
  }
  const spec = value.json_schema;
  if (!isObject(spec))
    return { message: 'response_format.json_schema must be an object with name and schema', param: 'response_format.json_schema' };
  if (typeof spec.name !== 'string' || !NAME.test(spec.name)) {
    return {
      message: 'response_format.json_schema.name must be 1 to 64 letters, digits, _ or -',
      param: 'response_format.json_schema.name',
    };
  }
  if (spec.strict !== undefined && spec.strict !== null && typeof spec.strict !== 'boolean') {
    return { message: 'response_format.json_schema.strict must be a boolean', param: 'response_format.json_schema.strict' };
  }
  if (spec.description !== undefined && typeof spec.description !== 'string') {
    return { message: 'response_format.json_schema.description must be a string', param: 'response_format.json_schema.description' };
  }
  const checked = checkJsonSchema(spec.schema);
  if ('error' in checked) return { message: `response_format.json_schema.${checked.error}`, param: 'response_format.json_schema.schema' };
  return { type: 'json_schema', name: spec.name, schema: checked.schema, strict: spec.strict === true };
}
