/**
 * The one body reader and JSON writer for node:http, used by the gateway's
 * surfaces (src/http/body.ts adds its rules: content type, JSON, NUL) and by
 * the engine (src/engine/http.ts adds its OpenAI error answers).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface BodyLimits {
  /** Bytes kept; a longer body reads as null. */
  maxBytes: number;
  /**
   * How much of an oversized body is still read (and dropped), so that the
   * 413 reaches the client: a connection closed while a client is still
   * sending shows it a reset, not the answer. Past this the connection is cut.
   * @default 16 x maxBytes
   */
  drainBytes?: number;
}

/** Requests whose client sends the body only after a `100 Continue` (`Expect: 100-continue`), with their keep-alive. */
const awaitingContinue = new WeakMap<IncomingMessage, { res: ServerResponse; keepAlive: boolean }>();

/**
 * For a server's `checkContinue` event: the `100 Continue` goes only when a handler reads the
 * body, so a request refused first (no key, no such route) is answered before anything is
 * uploaded. Such an answer closes the connection: the body the client held back never came.
 */
export function deferContinue(req: IncomingMessage, res: ServerResponse): void {
  awaitingContinue.set(req, { res, keepAlive: res.shouldKeepAlive });
  res.shouldKeepAlive = false;
}

/**
 * A request's body as UTF-8 text, or null when it is larger than `maxBytes`.
 * Listeners, not `for await`: leaving an async iterator early destroys the
 * request, and with it the answer; a small body costs no extra turns. A
 * request closed before its end rejects.
 */
export function readBodyText(req: IncomingMessage, limits: BodyLimits): Promise<string | null> {
  const drainBytes = limits.drainBytes ?? 16 * limits.maxBytes;
  const waiting = awaitingContinue.get(req);
  if (waiting) {
    awaitingContinue.delete(req);
    waiting.res.shouldKeepAlive = waiting.keepAlive;
    if (!waiting.res.headersSent) waiting.res.writeContinue();
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limits.maxBytes) chunks.push(chunk);
      else if (size > drainBytes) {
        cleanup();
        resolve(null);
        req.destroy();
      }
    };
    const onEnd = () => {
      cleanup();
      if (size > limits.maxBytes) resolve(null);
      else resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onClose = () => {
      cleanup();
      reject(new Error('the request was closed before its body was read'));
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

/** Writes a whole JSON response (nothing when the answer already began or the socket is gone). */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}
