/** Small node:http helpers: JSON answers in the OpenAI error shape and a bounded body reader. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestError } from '../domain/chat-request.js';
import { errorBody } from '../domain/openai-errors.js';

export const MAX_BODY_BYTES = 16 * 1024 * 1024;

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const payload = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload), ...headers });
  res.end(payload);
}

export function sendError(res: ServerResponse, error: RequestError, headers: Record<string, string> = {}): void {
  sendJson(res, error.status, errorBody(error), headers);
}

export function serverError(status: number, message: string, code: string): RequestError {
  return { status, message, type: 'server_error', param: null, code };
}

export class BodyTooLargeError extends Error {}

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_BODY_BYTES) throw new BodyTooLargeError();
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
