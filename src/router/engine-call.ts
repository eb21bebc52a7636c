/**
 * What an engine's answer to a small JSON call (its `/tokenize` and
 * `/detokenize` routes) means for the client.
 */
import { openAIError, type OpenAIError } from '../domain/openai-errors.js';
import type { EngineAnswer } from '../engine-client/engine-client.js';

function isOpenAIErrorBody(body: unknown): body is { error: { message: string; type: string; param: string | null; code: string | null } } {
  const error = (body as { error?: { message?: unknown } } | undefined)?.error;
  return typeof error === 'object' && error !== null && typeof error.message === 'string';
}

/**
 * The engine's refusal of the request itself (a 400 in OpenAI's shape: a prompt over the
 * limits, a token outside the vocabulary), which is the client's to see; undefined for any other
 * answer (a success, or the replica's own failure).
 */
export function requestRefusal(answer: EngineAnswer): OpenAIError | undefined {
  if (answer.status !== 400 || !isOpenAIErrorBody(answer.body)) return undefined;
  const { message, param, code } = answer.body.error;
  return openAIError(400, 'invalid_request_error', message, code ?? null, param ?? null);
}
