/**
 * The bodies of `POST /dedicated/v1/tokenize` (`{ model, prompt }`) and `/detokenize`
 * (`{ model, tokens }`), the documented API's, checked once here for the gateway and the engine
 * (which also checks the ids against its vocabulary).
 */
import { invalidRequest, type RequestError } from './chat-request.js';
import { findTextViolation, isObject } from './field-checker.js';
import type { Result } from './result.js';

/** The largest token id any vocabulary can have (llama.cpp's ids are 32-bit). */
const MAX_TOKEN_ID = 2 ** 31 - 1;

const refuse = (message: string, param: string | null, code = 'invalid_value'): { type: 'error'; error: RequestError } => ({
  type: 'error',
  error: invalidRequest(message, param, code),
});

export function parseTokenizeBody(body: unknown): Result<{ prompt: string }, RequestError> {
  if (!isObject(body)) return refuse('The request body must be a JSON object', null, 'invalid_type');
  const { prompt } = body;
  if (prompt === undefined || prompt === null)
    return refuse('prompt is required: the text to tokenize', 'prompt', 'missing_required_parameter');
  if (typeof prompt !== 'string') return refuse('prompt must be a string', 'prompt', 'invalid_type');
  const broken = findTextViolation(prompt, 'prompt');
  if (broken) return refuse(`${broken.field} ${broken.rule}`, broken.field);
  return { type: 'ok', value: { prompt } };
}

export function parseDetokenizeBody(body: unknown): Result<{ tokens: number[] }, RequestError> {
  if (!isObject(body)) return refuse('The request body must be a JSON object', null, 'invalid_type');
  const { tokens } = body;
  if (tokens === undefined || tokens === null)
    return refuse('tokens is required: the token ids to detokenize', 'tokens', 'missing_required_parameter');
  if (!Array.isArray(tokens)) return refuse('tokens must be an array of token ids', 'tokens', 'invalid_type');
  for (let i = 0; i < tokens.length; i++) {
    const id: unknown = tokens[i];
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > MAX_TOKEN_ID)
      return refuse(`tokens[${i}] must be a token id (an integer from 0 to ${MAX_TOKEN_ID})`, `tokens[${i}]`);
  }
  return { type: 'ok', value: { tokens: tokens as number[] } };
}
