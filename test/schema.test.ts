import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { printedSchema, SCHEMA_FILE } from '../src/http/graphql/schema/print.js';

test('schema.graphql is the printed Pothos schema (run `npm run codegen` after changing the schema)', () => {
  expect(readFileSync(SCHEMA_FILE, 'utf8')).toBe(printedSchema());
});
