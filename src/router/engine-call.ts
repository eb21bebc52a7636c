/**
 * What an engine's answer means for the client, in the error model: the
 * engine is an OpenAI-compatible server (src/engine/openai-errors.ts), and
 * its error answers are read back here into failures, for the surfaces that
 * do not relay its bytes (GraphQL, tokenize and detokenize, the gateway's
 * own prompt check).
 */
import type { Failure } from '../domain/errors.js';
import { invalidRequest } from '../domain/request-checks.js';
import type { EngineAnswer } from '../engine-client/engine-client.js';
import { UPSTREAM_NOT_JSON } from './relay.js';

/** An OpenAI error body's fields, as far as they are there. */
type ErrorFields = { message?: unknown; param?: unknown; code?: unknown };

function errorFields(body: unknown): ErrorFields | undefined {
  const error = (body as { error?: unknown } | undefined)?.error;
  return typeof error === 'object' && error !== null && typeof (error as ErrorFields).message === 'string'
    ? (error as ErrorFields)
    : undefined;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * The engine's refusal of the request itself (a 400 in OpenAI's shape: a prompt over the
 * limits, a token outside the vocabulary), which is the client's to see; undefined for any other
 * answer (a success, or the replica's own failure).
 */
export function requestRefusal(answer: Pick<EngineAnswer, 'status' | 'body'>): Failure | undefined {
  const error = answer.status === 400 ? errorFields(answer.body) : undefined;
  if (!error) return undefined;
  return invalidRequest(error.message as string, text(error.param) ?? null, text(error.code));
}

/**
 * An engine's error answer (status and OpenAI error body): its refusal of the request,
 * or the replica's own failure with the replica's status, passed on as it is.
 */
export function engineFailure(answer: Pick<EngineAnswer, 'status' | 'body'>): Failure {
  const refusal = requestRefusal(answer);
  if (refusal) return refusal;
  const error = errorFields(answer.body);
  return {
    kind: 'upstream',
    message: (error?.message as string | undefined) ?? `the replica answered with status ${answer.status}`,
    code: text(error?.code) ?? 'upstream_error',
    ...(answer.status >= 400 ? { status: answer.status } : {}),
  };
}

/** A replica's answer that is not the JSON it should be (an engine of one's own gone wrong). */
export const upstreamInvalid = (): Failure => ({ kind: 'upstream', ...UPSTREAM_NOT_JSON });
