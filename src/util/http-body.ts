/**
 * The one body reader and JSON writer for node:http, used by the gateway's
 * surfaces (src/http/body.ts adds its rules: content type, JSON, NUL) and by
 * the engine (src/engine/http.ts adds its OpenAI error answers).
 *
 * A body over the limit is refused as soon as that is known (its
 * Content-Length, or the byte past the limit), and the connection then
 * lingers: the rest of the body is read and dropped, up to LINGER_BYTES or
 * LINGER_MS, whichever comes first, before the answer ends and the connection
 * closes. A connection closed while the client is still sending shows it a
 * reset, never the 413 (RFC 9112 §9.6); one kept for the whole upload would
 * let a client hold it as long as it likes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The most of a refused body read and dropped (counted from its first byte), and for how long at most. */
export const LINGER_BYTES = 64 * 1024 * 1024;
export const LINGER_MS = 5_000;

export interface BodyLimits {
  /** Bytes kept; a longer body reads as null. */
  maxBytes: number;
  /** How much of a refused body is read and dropped at most. @default LINGER_BYTES */
  drainBytes?: number;
  /** How long a refused body is read and dropped at most. @default LINGER_MS */
  lingerMs?: number;
}

/** Requests whose client sends the body only after a `100 Continue` (`Expect: 100-continue`), with their keep-alive. */
const awaitingContinue = new WeakMap<IncomingMessage, { res: ServerResponse; keepAlive: boolean }>();

/** Answers to a refused body: their end waits for the rest of the body to be drained (or the bound). */
const lingering = new WeakMap<ServerResponse, Promise<void>>();

/**
 * For a server's `checkContinue` event: the `100 Continue` goes only when a handler reads the
 * body, so a request refused first (no key, no such route) is answered before anything is
 * uploaded. Such an answer closes the connection: the body the client held back never came.
 */
export function deferContinue(req: IncomingMessage, res: ServerResponse): void {
  awaitingContinue.set(req, { res, keepAlive: res.shouldKeepAlive });
  res.shouldKeepAlive = false;
}

/** The announced body length, when there is a valid one. */
function contentLength(req: IncomingMessage): number | undefined {
  const value = req.headers['content-length'];
  if (value === undefined || !/^\d+$/.test(value)) return undefined;
  return Number(value);
}

/**
 * Drains what is left of a refused body, `read` bytes of it already read: the answer written
 * with sendJson goes out at once, and ends (closing the connection) once the body has been read
 * to its end, the client has gone, or `drainBytes` or `lingerMs` is reached.
 */
function linger(req: IncomingMessage, res: ServerResponse, read: number, limits: BodyLimits): void {
  const drainBytes = limits.drainBytes ?? LINGER_BYTES;
  res.setHeader('connection', 'close');
  let size = read;
  lingering.set(
    res,
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        req.off('data', onData);
        req.off('end', done);
        req.off('close', done);
        resolve();
      };
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        if (size > drainBytes) done();
      };
      const timer = setTimeout(done, limits.lingerMs ?? LINGER_MS);
      if (req.complete || req.destroyed) return done();
      req.on('data', onData);
      req.once('end', done);
      req.once('close', done);
      // An aborted request emits 'error': nothing to answer it with, the connection is gone.
      req.on('error', () => {});
      res.once('close', done);
    }),
  );
}

/**
 * A request's body as UTF-8 text, or null when it is larger than `maxBytes`: known from its
 * Content-Length before anything is read (and before a `100 Continue`, which is then never
 * sent), or at the byte past the limit. A refused body is drained (see `linger`); the caller
 * answers it with sendJson. Listeners, not `for await`: leaving an async iterator early destroys
 * the request, and with it the answer; a small body costs no extra turns. A request closed before
 * its end rejects.
 */
export function readBodyText(req: IncomingMessage, res: ServerResponse, limits: BodyLimits): Promise<string | null> {
  const waiting = awaitingContinue.get(req);
  awaitingContinue.delete(req);
  const announced = contentLength(req);
  if (announced !== undefined && announced > limits.maxBytes) {
    // Refused unread: a client waiting for `100 Continue` gets the answer instead, and sends nothing.
    linger(req, res, 0, limits);
    return Promise.resolve(null);
  }
  if (waiting) {
    waiting.res.shouldKeepAlive = waiting.keepAlive;
    if (!waiting.res.headersSent) waiting.res.writeContinue();
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limits.maxBytes) return void chunks.push(chunk);
      cleanup();
      chunks.length = 0;
      linger(req, res, size, limits);
      resolve(null);
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

/**
 * Writes a whole JSON response (nothing when the answer already began or the socket is gone).
 * The answer to a refused body is sent at once, and ended once that body is drained.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  const drained = lingering.get(res);
  if (drained === undefined) return void res.end(payload);
  res.write(payload);
  void drained.then(() => {
    if (!res.destroyed) res.end();
  });
}
