/**
 * `response_format` of a chat request: free text, a JSON object (`json_object`), or JSON that
 * follows a schema (`json_schema`, checked against what the engine can enforce:
 * json-schema-subset.ts). The built-in engine enforces JSON with a grammar while it samples
 * (node-llama-cpp's GBNF grammars), so every token it emits keeps the answer valid.
 */

import { isObject } from './field-checker.js';
import { checkJsonSchema, type JsonSchema } from './json-schema-subset.js';

export type ResponseFormat =
  { type: 'text' } | { type: 'json_object' } | { type: 'json_schema'; name: string; schema: JsonSchema; strict: boolean };

/** A refusal: the message and the request field it is about. */
export type FormatError = { message: string; param: string };

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

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
