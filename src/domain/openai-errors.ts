/**
 * Errors of the inference route, in the OpenAI shape
 * `{ error: { message, type, param, code } }`, with the HTTP statuses OpenAI
 * clients turn into their usual exceptions.
 */
export interface OpenAIError {
  status: number;
  message: string;
  type: 'invalid_request_error' | 'authentication_error' | 'permission_error' | 'not_found_error' | 'rate_limit_error' | 'server_error';
  param: string | null;
  code: string | null;
  /** Seconds, for 429 and 503. */
  retryAfter?: number;
}

export function openAIError(
  status: number,
  type: OpenAIError['type'],
  message: string,
  code: string | null,
  param: string | null = null,
  retryAfter?: number,
): OpenAIError {
  return { status, type, message, param, code, ...(retryAfter !== undefined ? { retryAfter } : {}) };
}

export function errorBody(error: OpenAIError) {
  return { error: { message: error.message, type: error.type, param: error.param, code: error.code } };
}
