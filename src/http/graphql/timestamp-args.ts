/**
 * Every DateTime argument of the schema, at any depth of an input object and
 * whether it came as a literal or a variable, is checked against the one
 * timestamp rule (src/domain/field-checker.ts) before its field resolves or
 * its subscription starts: text that is no timestamp, or one PostgreSQL's
 * timestamptz cannot hold, is an INVALID_ARGUMENT naming the argument
 * (`from`, `filter.to`), never a database error. The DateTime scalar
 * (../builder.ts) parses any text, so that the error can name the argument,
 * which a scalar does not know.
 */
import {
  defaultFieldResolver,
  getNullableType,
  isInputObjectType,
  isListType,
  isObjectType,
  isScalarType,
  type GraphQLArgument,
  type GraphQLFieldResolver,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLSchema,
} from 'graphql';
import { invalidInputError } from '../../domain/errors.js';
import { timestampViolation } from '../../domain/field-checker.js';
import type { FieldViolation } from '../../domain/result.js';

type Check = (value: unknown, path: string, violations: FieldViolation[]) => void;

const checkTimestamp: Check = (value, path, violations) => {
  const broken = value instanceof Date ? timestampViolation(value) : undefined;
  if (broken) violations.push({ field: path, message: broken });
};

/** The check of the DateTime values a value of `type` may hold; undefined when it holds none. */
function checkOf(type: GraphQLInputType, visiting: Set<GraphQLInputObjectType>): Check | undefined {
  const inner = getNullableType(type);
  if (isListType(inner)) {
    const item = checkOf(inner.ofType, visiting);
    if (!item) return undefined;
    return (value, path, violations) => {
      if (Array.isArray(value)) value.forEach((one, i) => item(one, `${path}[${i}]`, violations));
      else item(value, path, violations);
    };
  }
  if (isScalarType(inner)) return inner.name === 'DateTime' ? checkTimestamp : undefined;
  if (!isInputObjectType(inner) || visiting.has(inner)) return undefined;
  visiting.add(inner);
  const members = Object.values(inner.getFields()).flatMap((field) => {
    const check = checkOf(field.type, visiting);
    return check ? [{ name: field.name, check }] : [];
  });
  visiting.delete(inner);
  if (members.length === 0) return undefined;
  return (value, path, violations) => {
    if (typeof value !== 'object' || value === null) return;
    for (const { name, check } of members) {
      const member = (value as Record<string, unknown>)[name];
      if (member !== undefined && member !== null) check(member, `${path}.${name}`, violations);
    }
  };
}

/** Throws an INVALID_ARGUMENT naming each DateTime argument that breaks the rule. */
function argumentsCheck(args: readonly GraphQLArgument[]): ((values: Record<string, unknown>) => void) | undefined {
  const checks = args.flatMap((arg) => {
    const check = checkOf(arg.type, new Set());
    return check ? [{ name: arg.name, check }] : [];
  });
  if (checks.length === 0) return undefined;
  return (values) => {
    const violations: FieldViolation[] = [];
    for (const { name, check } of checks) {
      const value = values[name];
      if (value !== undefined && value !== null) check(value, name, violations);
    }
    if (violations.length > 0) throw invalidInputError(violations);
  };
}

/** The schema, its fields with DateTime arguments checking them first. */
export function checkTimestampArguments(schema: GraphQLSchema): GraphQLSchema {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      const check = argumentsCheck(field.args);
      if (!check) continue;
      // A subscription's arguments are checked once, when it starts; its events resolve without them.
      const key = field.subscribe ? 'subscribe' : 'resolve';
      const original: GraphQLFieldResolver<unknown, unknown> = field[key] ?? defaultFieldResolver;
      field[key] = (source, args: Record<string, unknown>, context, info) => {
        check(args);
        return original(source, args, context, info);
      };
    }
  }
  return schema;
}
