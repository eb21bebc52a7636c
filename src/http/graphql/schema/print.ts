import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { lexicographicSortSchema, printSchema } from 'graphql';
import { schema } from './index.js';

/** The committed copy of the schema, at the repository root. */
export const SCHEMA_FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../schema.graphql');

export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
