/**
 * How a request body is refused, shared by every body parser (chat, text
 * completions, sampling controls, tokenize) of the gateway and the engine:
 * an `invalid` failure of the error model (errors.ts) naming the field
 * (`param`: its path, the failure's one field) and its rule, with a `code`
 * (`invalid_value`, `invalid_type`, `missing_required_parameter`, ...),
 * thrown from deep inside a parser with `fail` and turned into a result by
 * `checked`; how a client's value is described in a message; and the rule
 * for token ids. Each surface answers it in its own shape (the gateway's
 * OpenAI-compatible routes and the engine: a 400 naming `param`).
 */
import type { InvalidFailure } from './errors.js';
import type { Result } from './result.js';

/** A request refused: the field it names (none for the body as a whole), the rule, and a code. */
export type RequestError = InvalidFailure & { code: string };

export function invalidRequest(message: string, param: string | null, code: string = 'invalid_value'): RequestError {
  return { kind: 'invalid', message, fields: param === null ? [] : [{ field: param, message }], reason: 'invalid_value', code };
}

/** The field a refusal names (OpenAI's `param`), or null for the body as a whole. */
export const paramOf = (error: InvalidFailure): string | null => error.fields[0]?.field ?? null;

class ValidationError extends Error {
  constructor(readonly error: RequestError) {
    super(error.message);
  }
}

/** Refuses the request being parsed (inside `checked`): an `invalid` failure naming `param`. */
export function fail(message: string, param: string | null, code: string = 'invalid_value'): never {
  throw new ValidationError(invalidRequest(message, param, code));
}

/** Runs a parser that refuses with `fail`: its value, or its refusal. Never throws a refusal. */
export function checked<T>(parse: () => T): Result<T, RequestError> {
  try {
    return { type: 'ok', value: parse() };
  } catch (error) {
    if (error instanceof ValidationError) return { type: 'error', error: error.error };
    throw error;
  }
}

/**
 * What to say of a number JSON.parse did not keep as the client sent it: a
 * literal past 1.8e308 reads as Infinity, and one past 2^53 is rounded, so
 * neither is quoted back as a value the client never sent.
 */
function inexact(value: number): string | undefined {
  const sign = value < 0 ? 'a negative number' : 'a number';
  if (!Number.isFinite(value)) return `${sign} too large`;
  if (Math.abs(value) > Number.MAX_SAFE_INTEGER) return `${sign} too large to be read exactly`;
  return undefined;
}

export const numberText = (value: number): string => inexact(value) ?? String(value);

/** A client's value as a message quotes it. */
export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number') return inexact(value) ?? `number ${value}`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)}`;
}

/** The largest token id any vocabulary can have (llama.cpp's ids are 32-bit). */
export const MAX_TOKEN_ID = 2 ** 31 - 1;

/** Whether a value is a token id (not yet checked against any vocabulary). */
export const isTokenId = (id: unknown): id is number => typeof id === 'number' && Number.isInteger(id) && id >= 0 && id <= MAX_TOKEN_ID;

/** A list of token ids, each checked (`param[i]` names the first that is not one); the model's vocabulary is the engine's check. */
export function tokenIds(value: unknown[], param: string): number[] {
  value.forEach((id, i) => {
    if (!isTokenId(id))
      fail(`${param}[${i}] must be a token id (an integer from 0 to ${MAX_TOKEN_ID}; got ${describe(id)})`, `${param}[${i}]`);
  });
  return value as number[];
}
