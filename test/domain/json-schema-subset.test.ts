/**
 * The client's names in json-schema-subset's messages: a property, definition or keyword name that is not plain
 * (letters, digits, `_`, `-`, `$`) is written `["name"]`, quoted as JSON, and the names a rule lists are quoted,
 * so that a name cannot end the path early or leave a quote open in the message (which GraphQL's surface reads
 * for field names outside quotes). Plain names read as before: `schema.properties.a.minimum`.
 */
import { describe, expect, test } from 'vitest';
import { checkJsonSchema, schemaShapeViolation, violationPath } from '../../src/domain/json-schema-subset.js';

const errorOf = (schema: unknown) => {
  const checked = checkJsonSchema(schema);
  if (!('error' in checked)) throw new Error('the schema was taken');
  return checked.error;
};
const object = (properties: Record<string, unknown>, required = Object.keys(properties)) => ({ type: 'object', properties, required });

/** Whether every quote in `text` is closed (a backslash in quoted text escapes the next character). */
function balanced(text: string): boolean {
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    if (quoted && text[i] === '\\') i++;
    else if (text[i] === '"') quoted = !quoted;
  }
  return !quoted;
}

const HOSTILE = ['"', 'a"b', '\\', '\\"', 'a b', 'a.b', 'x[0]', '', 'naïve'];

describe("the client's names, quoted where they are not plain", () => {
  test('plain names as before', () => {
    expect(errorOf(object({ a: { type: 'integer', minimum: 3 } }))).toBe(
      'schema.properties.a.minimum is not supported: the engine cannot enforce it while it generates',
    );
    expect(errorOf(object({ 'a-b_$1': { type: 'string', pattern: 'x' } }))).toMatch(
      /^schema\.properties\.a-b_\$1\.pattern is not supported/,
    );
  });

  test.each(HOSTILE)('a property named %j: its path names it as JSON', (name) => {
    expect(errorOf(object({ [name]: { type: 'integer', minimum: 3 } }))).toBe(
      `schema.properties[${JSON.stringify(name)}].minimum is not supported: the engine cannot enforce it while it generates`,
    );
  });

  test.each(HOSTILE)('a keyword, a definition, a missing property named %j: quoted, every quote closed', (name) => {
    const messages = [
      errorOf({ type: 'string', [name]: 1 }),
      errorOf({ const: 'a', [name]: 1 }),
      errorOf({ $ref: `#/$defs/${name}`, $defs: { [name]: { type: 'string', pattern: 'x' } } }),
      errorOf({ $ref: `#/$defs/${name}`, $defs: { [name]: { type: 'array', items: { $ref: `#/$defs/${name}` } } } }),
      errorOf(object({ a: { type: 'null' }, [name]: { type: 'null' } }, ['a'])),
    ];
    const quoted = JSON.stringify(name);
    expect(messages).toEqual([
      `schema[${quoted}] is not supported: the engine cannot enforce it while it generates`,
      `schema[${quoted}] cannot be combined with const (the grammar would drop one of them)`,
      `schema.$defs[${quoted}].pattern is not supported: the engine cannot enforce it while it generates`,
      `schema.$defs[${quoted}].items.$ref: recursive definitions (${JSON.stringify(`#/$defs/${name}`)}) are not supported`,
      `schema.required must list every property, as in OpenAI's strict mode (missing: ${quoted}); make an optional one nullable instead`,
    ]);
    for (const message of messages) expect(balanced(message), message).toBe(true);
  });

  test('the names a rule lists are quoted, plain or not', () => {
    expect(errorOf(object({ a: { type: 'null' }, b: { type: 'null' }, max_tokens: { type: 'null' } }, ['a']))).toContain(
      '(missing: "b", "max_tokens")',
    );
  });

  test.each(HOSTILE)('schemaShapeViolation under a property named %j: its path, which violationPath reads back whole', (name) => {
    const message = schemaShapeViolation({ type: 'object', properties: { [name]: { type: 'text' } } }, 'tools[0].function.parameters')!;
    const path = `tools[0].function.parameters.properties[${JSON.stringify(name)}].type`;
    expect(message).toBe(`${path} must be a JSON Schema type name or a list of them (got "text")`);
    expect(violationPath(message)).toBe(path);
  });

  test('violationPath of a plain path: up to the first space', () => {
    expect(violationPath('tools[0].function.parameters.items must be a schema')).toBe('tools[0].function.parameters.items');
    expect(violationPath('schema')).toBe('schema');
  });
});
