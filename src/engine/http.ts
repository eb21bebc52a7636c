/** The engine's answers in the OpenAI error shape, over the one body reader and JSON writer (src/util/http-body.ts). */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody, type EngineError } from './openai-errors.js';
import { readBodyText, sendJson } from '../util/http-body.js';

export { sendJson };

export const MAX_BODY_BYTES = 16 * 1024 * 1024;

export function sendError(res: ServerResponse, error: EngineError, headers: Record<string, string> = {}): void {
  sendJson(res, error.status, errorBody(error), headers);
}

export function serverError(status: number, message: string, code: string): EngineError {
  return { status, message, type: 'server_error', param: null, code };
}

export class BodyTooLargeError extends Error {}

/**
 * The whole body as UTF-8; BodyTooLargeError past MAX_BODY_BYTES (the 413 sent on `res` goes out at
 * once, and the connection closes once the rest is drained, so that it is seen).
 */
export async function readBody(req: IncomingMessage, res: ServerResponse): Promise<string> {
  const text = await readBodyText(req, res, { maxBytes: MAX_BODY_BYTES });
  if (text === null) throw new BodyTooLargeError();
  return text;
}
