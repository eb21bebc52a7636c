/** The Pothos builder: plugins (none), scalars and the context type. Types live in `schema/`. */
import SchemaBuilder from '@pothos/core';
import type { GraphQLContext } from './context.js';

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
  };
  DefaultFieldNullability: false;
}>({ defaultFieldNullability: false });

builder.scalarType('DateTime', {
  description: 'An ISO 8601 timestamp in UTC.',
  serialize: (value) => value.toISOString(),
  parseValue: (value) => {
    const date = new Date(String(value));
    if (Number.isNaN(date.getTime())) throw new TypeError('DateTime must be an ISO 8601 timestamp');
    return date;
  },
});

builder.scalarType('JSON', {
  description: 'Any JSON value.',
  serialize: (value) => value,
  parseValue: (value) => value,
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
