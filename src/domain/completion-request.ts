/**
 * A text-completions body (`POST /dedicated/v1/completions`, OpenAI's legacy
 * completions and the documented API's): the prompt is raw text (`prompt`)
 * or token ids (`tokens`, or `prompt` as a list of ids), with no chat
 * template; every other field is a chat request's (chat-request.ts), except
 * `logprobs`, which is here the number of alternatives per token (0–5), as
 * in OpenAI's legacy API, and `max_tokens`, which defaults to 16 as there.
 * Asks this engine cannot honour (several prompts, `echo`, `suffix`,
 * `best_of`) are refused, not ignored.
 */
import { parseGenerationRequest, type GenerationRequest } from './chat-request.js';
import { describe, fail, invalidRequest, tokenIds, type RequestError } from './request-checks.js';
import type { Result } from './result.js';

/** The prompt: text, or token ids (checked against the vocabulary by the engine). */
export type CompletionPrompt = { text: string } | { tokens: number[]; field: 'prompt' | 'tokens' };

export type CompletionRequest = GenerationRequest & { prompt: CompletionPrompt };

/** OpenAI's legacy limit on `logprobs`. */
const MAX_LEGACY_LOGPROBS = 5;
/** `max_tokens` when the request sets none: OpenAI's legacy default (and vLLM's). */
export const DEFAULT_COMPLETION_TOKENS = 16;
/** A prompt of token ids: each checked, and at least one. */
function promptIds(value: unknown[], param: string): number[] {
  if (value.length === 0) fail(`${param} must hold at least one token`, param);
  return tokenIds(value, param);
}

function parsePrompt(body: Record<string, unknown>): { prompt: CompletionPrompt } {
  const { prompt, tokens } = body;
  if (prompt !== undefined && prompt !== null && tokens !== undefined && tokens !== null)
    fail('Send either prompt or tokens, not both', 'tokens');
  if (tokens !== undefined && tokens !== null) {
    if (!Array.isArray(tokens)) fail(`tokens must be an array of token ids (got ${describe(tokens)})`, 'tokens', 'invalid_type');
    return { prompt: { tokens: promptIds(tokens, 'tokens'), field: 'tokens' } };
  }
  if (prompt === '') fail('prompt must not be empty', 'prompt');
  if (prompt === undefined || prompt === null)
    fail('prompt is required: the text to complete (or tokens: its token ids)', 'prompt', 'missing_required_parameter');
  if (typeof prompt === 'string') return { prompt: { text: prompt } };
  if (Array.isArray(prompt)) {
    if (prompt.every((p) => typeof p === 'number')) return { prompt: { tokens: promptIds(prompt, 'prompt'), field: 'prompt' } };
    if (prompt.length === 1 && typeof prompt[0] === 'string') return { prompt: { text: prompt[0] } };
    fail('prompt must be one prompt: a string, or a list of token ids (several prompts in one request are not supported)', 'prompt');
  }
  return fail(`prompt must be a string or a list of token ids (got ${describe(prompt)})`, 'prompt', 'invalid_type');
}

function refuseUnsupported(body: Record<string, unknown>): void {
  const { echo, suffix } = body;
  if (echo !== undefined && echo !== null && typeof echo !== 'boolean')
    fail(`echo must be a boolean (got ${describe(echo)})`, 'echo', 'invalid_type');
  if (echo === true) fail('echo is not supported by this engine', 'echo');
  if (suffix !== undefined && suffix !== null && typeof suffix !== 'string')
    fail(`suffix must be a string (got ${describe(suffix)})`, 'suffix', 'invalid_type');
  if (typeof suffix === 'string' && suffix !== '') fail('suffix is not supported by this engine', 'suffix');
  const bestOf = body.best_of;
  if (bestOf !== undefined && bestOf !== null && bestOf !== 1) fail(`best_of must be 1 (got ${describe(bestOf)})`, 'best_of');
}

/** Validates a decoded text-completions body. Never throws. */
export function parseCompletionRequest(body: unknown): Result<CompletionRequest, RequestError> {
  let fields = body;
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const { logprobs, top_logprobs: topLogprobs } = body as Record<string, unknown>;
    if (topLogprobs !== undefined && topLogprobs !== null) {
      const rule = 'top_logprobs is not a field of text completions: logprobs is the number of alternatives per token (0 to 5)';
      return { type: 'error', error: invalidRequest(rule, 'top_logprobs') };
    }
    // Legacy logprobs (a count) checked here, then read as chat's logprobs + top_logprobs.
    if (logprobs !== undefined && logprobs !== null) {
      if (typeof logprobs !== 'number' || !Number.isInteger(logprobs) || logprobs < 0 || logprobs > MAX_LEGACY_LOGPROBS) {
        const rule = `logprobs must be an integer from 0 to ${MAX_LEGACY_LOGPROBS}: the alternatives listed per token (got ${describe(logprobs)})`;
        return { type: 'error', error: invalidRequest(rule, 'logprobs') };
      }
      fields = { ...(body as Record<string, unknown>), logprobs: true, top_logprobs: logprobs };
    }
  }
  const parsed = parseGenerationRequest(fields, (checked) => {
    refuseUnsupported(checked);
    return parsePrompt(checked);
  });
  if (parsed.type === 'ok' && parsed.value.maxTokens === undefined) parsed.value.maxTokens = DEFAULT_COMPLETION_TOKENS;
  return parsed;
}
