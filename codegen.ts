import type { CodegenConfig } from '@graphql-codegen/cli';

/**
 * `npm run codegen` prints schema.graphql from the Pothos schema, then
 * generates typed documents for the operations of our SDK (used by the tests
 * and by any TypeScript client), for the web console, and for the W&B
 * registry client.
 */
const config: CodegenConfig = {
  overwrite: true,
  // Written files go through Prettier (the generated ones it ignores stay as generated), so a re-run leaves no diff.
  hooks: { afterAllFileWrite: ['prettier --write'] },
  generates: {
    'src/sdk/generated/graphql.ts': {
      schema: 'schema.graphql',
      documents: 'src/sdk/operations/*.graphql',
      plugins: ['typescript-operations', 'typed-document-node'],
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        skipTypename: false,
        scalars: { DateTime: 'string', JSON: 'unknown', ID: 'string', SafeInt: 'number' },
      },
    },
    // The web console's operations (src/console/api/*.graphql and any page's own .graphql files).
    'src/console/api/generated.ts': {
      schema: 'schema.graphql',
      documents: 'src/console/**/*.graphql',
      plugins: ['typescript-operations', 'typed-document-node'],
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        skipTypename: false,
        nonOptionalTypename: true,
        scalars: { DateTime: 'string', JSON: 'unknown', ID: 'string', SafeInt: 'number' },
      },
    },
    // The registry client's operations, typed against the subset of W&B's schema they use.
    'src/models/wandb/generated.ts': {
      schema: 'src/models/wandb/schema.graphql',
      documents: 'src/models/wandb/documents/*.graphql',
      plugins: ['typescript-operations', 'typed-document-node'],
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        skipTypename: false,
        dedupeOperationSuffix: true,
        scalars: { ID: 'string', Int64: 'number' },
      },
    },
  },
};

export default config;
