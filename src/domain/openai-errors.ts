/**
 * The OpenAI error wire shape `{ error: { message, type, param, code } }`,
 * with the HTTP statuses OpenAI clients turn into their usual exceptions:
 * what the engine answers (src/engine/openai-errors.ts) and what the
 * gateway's OpenAI-compatible routes answer (src/http/rest/chat-errors.ts,
 * the one table from the error model). The inference core never builds one.
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

export function errorBody(error: OpenAIError) {
  return { error: { message: error.message, type: error.type, param: error.param, code: error.code } };
}
