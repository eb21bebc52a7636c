/** Prints the Pothos schema to schema.graphql (`npm run codegen` runs this first). */
import { writeFileSync } from 'node:fs';
import { printedSchema, SCHEMA_FILE } from '../src/http/graphql/schema/print.js';

writeFileSync(SCHEMA_FILE, printedSchema());
console.log(`wrote ${SCHEMA_FILE}`);
