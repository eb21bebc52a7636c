/** The Pothos builder: plugins (complexity), scalars and the context type. Types live in `schema/`. */
import SchemaBuilder from '@pothos/core';
import ComplexityPlugin, { type FieldComplexityValue } from '@pothos/plugin-complexity';
import { getNullableType, isListType, type GraphQLField } from 'graphql';
import { ISO_TIMESTAMP } from '../../domain/field-checker.js';
import { PAGE_LIMIT } from '../../domain/pagination.js';
import type { GraphQLContext } from './context.js';

/** What a list without a page size (a team's members, its projects, the caller's keys) is assumed to hold. */
export const UNPAGED_LIST_MULTIPLIER = 10;

/**
 * The cost of a field, for the GRAPHQL_MAX_COST check (`limits.ts`): 1, and
 * what it selects counted once per item it may return. A connection (a field
 * with `first`) returns up to `first` items, PAGE_LIMIT.default when omitted;
 * its `edges` and `nodes` lists are those same items (`connection.ts` counts
 * them once); any other list counts UNPAGED_LIST_MULTIPLIER.
 */
export function fieldComplexity(
  args: Record<string, unknown>,
  _ctx: unknown,
  field: GraphQLField<unknown, GraphQLContext>,
): FieldComplexityValue {
  if (field.args.some((arg) => arg.name === 'first')) {
    const first = typeof args.first === 'number' && Number.isFinite(args.first) ? args.first : PAGE_LIMIT.default;
    // Past the page limit the resolver refuses; what it could return is at most a full page.
    return { field: 1, multiplier: Math.min(Math.max(first, 0), PAGE_LIMIT.max) };
  }
  return isListType(getNullableType(field.type)) ? { field: 1, multiplier: UNPAGED_LIST_MULTIPLIER } : 1;
}

/** The schema's own types, as the builder was made with them. */
export interface BuilderTypes {
  Context: GraphQLContext;
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
  };
  DefaultFieldNullability: false;
}

/** The same, with Pothos's defaults filled in (what ObjectRef and ArgBuilder take). */
export type SchemaTypesOf = PothosSchemaTypes.ExtendDefaultTypes<BuilderTypes>;

export const builder = new SchemaBuilder<BuilderTypes>({
  defaultFieldNullability: false,
  plugins: [ComplexityPlugin],
  // Cost is checked before execution, by a validation rule (`limits.ts`), not by wrapping the root resolvers.
  complexity: { fieldComplexity, disabled: true },
});

builder.scalarType('DateTime', {
  description: 'An ISO 8601 timestamp in UTC.',
  serialize: (value) => value.toISOString(),
  // Any text parses, to an invalid Date when it is no timestamp: the timestamp rule is checked where the
  // argument's name is known (../timestamp-args.ts), so that the error can name it.
  parseValue: (value) => new Date(typeof value === 'string' && ISO_TIMESTAMP.test(value) ? value : Number.NaN),
});

builder.scalarType('JSON', {
  description: 'Any JSON value.',
  serialize: (value) => value,
  parseValue: (value) => value,
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
