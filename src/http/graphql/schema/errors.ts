/**
 * Expected failures as GraphQL types. Every mutation returns a union of its
 * success type and the errors it can meet (`<Verb><Noun>Result`), so clients
 * handle them with `__typename` instead of parsing error strings.
 */
import type { ObjectRef, UnionRef } from '@pothos/core';
import { failureOfDomainError } from '../../../domain/errors.js';
import type { DomainError, FieldViolation, Result } from '../../../domain/result.js';
import { graphqlErrorOf, graphqlFieldName } from '../errors.js';
import { inGraphqlNames, advancedNames } from '../field-names.js';
import { builder } from '../builder.js';
import { EndpointStatusValue } from './enums.js';

type SchemaTypesOf = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T> ? T : never;

type ErrorOf<T extends DomainError['type']> = Extract<DomainError, { type: T }>;

export { graphqlFieldName };

export const ErrorInterface = builder.interfaceRef<DomainError>('Error').implement({
  description: 'An expected failure: the request was understood but cannot be carried out.',
  fields: (t) => ({ message: t.exposeString('message') }),
});

const FieldErrorRef = builder.objectRef<FieldViolation>('FieldError').implement({
  description: 'One invalid input field and the rule it breaks.',
  fields: (t) => ({
    field: t.string({ resolve: (v) => graphqlFieldName(v.field) }),
    // The mutations' validators name the advanced settings in REST's snake_case (`advanced.max_batch_size`): GraphQL's names.
    message: t.string({ resolve: (v) => inGraphqlNames(v.message, advancedNames) }),
  }),
});

function errorType<T extends DomainError['type']>(
  name: string,
  type: T,
  description: string,
  extra?: (t: PothosSchemaTypes.ObjectFieldBuilder<SchemaTypesOf, ErrorOf<T>>) => object,
) {
  return builder.objectRef<ErrorOf<T>>(name).implement({
    description,
    interfaces: [ErrorInterface],
    isTypeOf: (value) => (value as DomainError).type === type,
    fields: (t) => ({ ...(extra ? extra(t) : {}) }),
  });
}

export const NotFoundError = errorType('NotFoundError', 'NOT_FOUND', 'The resource does not exist, or is not visible to the caller.');
export const ForbiddenError = errorType('ForbiddenError', 'FORBIDDEN', 'The caller may see the resource but not do this.');
export const ConflictError = errorType('ConflictError', 'CONFLICT', 'The request conflicts with the current state.');
export const InvalidArgumentError = errorType(
  'InvalidArgumentError',
  'INVALID_ARGUMENT',
  'Some input fields break their rules; `fields` names each.',
  (t) => ({
    message: t.string({ resolve: (e: ErrorOf<'INVALID_ARGUMENT'>) => inGraphqlNames(e.message, advancedNames) }),
    fields: t.field({ type: [FieldErrorRef], resolve: (e: ErrorOf<'INVALID_ARGUMENT'>) => e.fields }),
  }),
);

export const InvalidTransitionError = errorType(
  'InvalidTransitionError',
  'INVALID_TRANSITION',
  "The action is not allowed from the endpoint's current status.",
  (t) => ({
    status: t.field({ type: EndpointStatusValue, resolve: (e: ErrorOf<'INVALID_TRANSITION'>) => e.status }),
    action: t.exposeString('action'),
  }),
);

/** The schema's error types. UNAUTHENTICATED has none: authentication fails the whole request (../errors.ts). */
const ERROR_TYPE_NAMES: Partial<Record<DomainError['type'], string>> = {
  NOT_FOUND: 'NotFoundError',
  FORBIDDEN: 'ForbiddenError',
  CONFLICT: 'ConflictError',
  INVALID_ARGUMENT: 'InvalidArgumentError',
  INVALID_TRANSITION: 'InvalidTransitionError',
};

function isDomainError(value: unknown): value is DomainError {
  return (
    typeof value === 'object' && value !== null && 'type' in value && 'message' in value && (value as DomainError).type in ERROR_TYPE_NAMES
  );
}

/**
 * A `<Verb><Noun>Result` union of a success type and the error types it can
 * meet. A mutation that succeeds in two ways names the second success type in
 * `alternative`, with the test that tells its values from the first's.
 */
export function resultUnion<S extends object, A extends object = never>(
  name: string,
  success: ObjectRef<SchemaTypesOf, S>,
  errors: ObjectRef<SchemaTypesOf, DomainError>[],
  alternative?: { type: ObjectRef<SchemaTypesOf, A>; is: (value: S | A) => value is A },
): UnionRef<SchemaTypesOf, S | A | DomainError> {
  const successes: ObjectRef<SchemaTypesOf, S | A>[] = alternative ? [success, alternative.type] : [success];
  return builder.unionType(name, {
    types: [...successes, ...errors],
    resolveType: (value) => {
      if (isDomainError(value)) return ERROR_TYPE_NAMES[value.type]!;
      return alternative?.is(value as S | A) ? alternative.type.name : success.name;
    },
  }) as unknown as UnionRef<SchemaTypesOf, S | A | DomainError>;
}

/** The payload of a result union: the success object, or the error value. */
export function payload<T, S>(result: Result<T>, wrap: (value: T) => S): S | DomainError {
  return result.type === 'ok' ? wrap(result.value) : result.error;
}

/**
 * For queries, where an expected failure is a GraphQL error with a code rather
 * than a result type (the GraphQL table, ../errors.ts): an invalid argument
 * answers 400 over HTTP, like every other error a client causes.
 */
export function unwrapOrThrow<T>(result: Result<T>): T {
  if (result.type === 'ok') return result.value;
  throw graphqlErrorOf(failureOfDomainError(result.error), 'field')!;
}
