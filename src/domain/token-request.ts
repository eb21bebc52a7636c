/**
 * The bodies of `POST /dedicated/v1/tokenize` (`{ model, prompt }`) and `/detokenize`
 * (`{ model, tokens }`), the documented API's, checked once here for the gateway and the engine
 * (which also checks the ids against its vocabulary).
 */
import { findTextViolation, isObject } from './field-checker.js';
import { checked, fail, tokenIds, type RequestError } from './request-checks.js';
import type { Result } from './result.js';

/** The body as an object, or its refusal. */
function objectBody(body: unknown): Record<string, unknown> {
  if (!isObject(body)) fail('The request body must be a JSON object', null, 'invalid_type');
  return body;
}

export function parseTokenizeBody(body: unknown): Result<{ prompt: string }, RequestError> {
  return checked(() => {
    const { prompt } = objectBody(body);
    if (prompt === undefined || prompt === null) fail('prompt is required: the text to tokenize', 'prompt', 'missing_required_parameter');
    if (typeof prompt !== 'string') fail('prompt must be a string', 'prompt', 'invalid_type');
    const broken = findTextViolation(prompt, 'prompt');
    if (broken) fail(`${broken.field} ${broken.rule}`, broken.field);
    return { prompt };
  });
}

export function parseDetokenizeBody(body: unknown): Result<{ tokens: number[] }, RequestError> {
  return checked(() => {
    const { tokens } = objectBody(body);
    if (tokens === undefined || tokens === null)
      fail('tokens is required: the token ids to detokenize', 'tokens', 'missing_required_parameter');
    if (!Array.isArray(tokens)) fail('tokens must be an array of token ids', 'tokens', 'invalid_type');
    return { tokens: tokenIds(tokens, 'tokens') };
  });
}
