/**
 * Business outcomes are values, not exceptions. A service returns
 * `{ type: 'ok', value }` or `{ type: 'error', error }`; each surface maps the
 * error to its own shape (the REST error body, a GraphQL error type). A thrown
 * exception means a bug or an outage.
 */
import { transitionAdvice, type EndpointStatus, type LifecycleAction } from './lifecycle.js';

export interface FieldViolation {
  /** Path of the field in the request, such as `autoscalingPolicy.maxReplica`. */
  field: string;
  /** The rule it breaks, in words. */
  message: string;
}

export type DomainError =
  | { type: 'UNAUTHENTICATED'; message: string }
  | { type: 'NOT_FOUND'; message: string }
  | { type: 'INVALID_ARGUMENT'; message: string; fields: FieldViolation[] }
  | { type: 'INVALID_TRANSITION'; message: string; status: EndpointStatus; action: LifecycleAction }
  | { type: 'FORBIDDEN'; message: string }
  | { type: 'CONFLICT'; message: string };

/** The one outcome shape: services return it with a DomainError; parsers with their own error (a message, a rule). */
export type Result<T, E = DomainError> = { type: 'ok'; value: T } | { type: 'error'; error: E };

export const ok = <T>(value: T): Result<T, never> => ({ type: 'ok', value });
export const fail = <T = never, E = DomainError>(error: E): Result<T, E> => ({ type: 'error', error });

export function notFound(resource: string, id: string): DomainError {
  return { type: 'NOT_FOUND', message: `${resource} '${id}' not found` };
}

export function invalidArgument(fields: FieldViolation[]): DomainError {
  const summary = fields.map((f) => `${f.field}: ${f.message}`).join('; ');
  return { type: 'INVALID_ARGUMENT', message: `invalid request: ${summary}`, fields };
}

export function invalidTransition(action: LifecycleAction, status: EndpointStatus): DomainError {
  const advice = transitionAdvice(action, status);
  return {
    type: 'INVALID_TRANSITION',
    message: `cannot ${action} an endpoint whose status is ${status}${advice ? `: ${advice}` : ''}`,
    status,
    action,
  };
}

export function forbidden(message: string): DomainError {
  return { type: 'FORBIDDEN', message };
}
