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

/** The whole body as UTF-8 (events rather than an async iterator: a small body costs no extra turns). */
export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        cleanup();
        // Stop reading, as leaving a for-await loop did; the 413 answer closes the connection.
        req.destroy();
        reject(new BodyTooLargeError());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onClose = () => {
      cleanup();
      reject(new Error('The request was closed before its body was read'));
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
