import type { CodegenConfig } from '@graphql-codegen/cli';

/**
 * `npm run codegen` prints schema.graphql from the Pothos schema, then
 * generates typed documents for the operations of our SDK (used by the tests
 * and by any TypeScript client).
 */
const config: CodegenConfig = {
  overwrite: true,
  generates: {
    'src/sdk/generated/graphql.ts': {
      schema: 'schema.graphql',
      documents: 'src/sdk/operations/*.graphql',
      plugins: ['typescript-operations', 'typed-document-node'],
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        skipTypename: false,
        scalars: { DateTime: 'string', JSON: 'unknown', ID: 'string' },
      },
    },
  },
};

export default config;
