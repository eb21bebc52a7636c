/**
 * The engine's errors, in the OpenAI shape (src/domain/openai-errors.ts): the
 * engine is an OpenAI-compatible server of its own, and this is its wire
 * format. The request parsers it shares with the gateway (src/domain) refuse
 * with the error model's `invalid` failure, which `refusalOf` answers here as
 * the 400 naming its field. (The gateway maps the engine's answers back into
 * the error model where it reads them: src/router/engine-call.ts.)
 */
import type { InvalidFailure } from '../domain/errors.js';
import type { OpenAIError } from '../domain/openai-errors.js';

export { errorBody } from '../domain/openai-errors.js';

/** An error the engine answers. */
export type EngineError = OpenAIError;

/** The engine's 400 naming `param` (null: the body as a whole). */
export function invalidRequest(message: string, param: string | null, code: string = 'invalid_value'): EngineError {
  return { status: 400, type: 'invalid_request_error', message, param, code };
}

/** A shared parser's refusal as the engine answers it: the 400 naming its field. */
export function refusalOf(error: InvalidFailure): EngineError {
  return invalidRequest(error.message, error.fields[0]?.field ?? null, error.code);
}
