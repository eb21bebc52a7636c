/**
 * Every request has an id, answered in the `x-request-id` header (WebSocket
 * upgrades included) and carried by every log line about it, so that a client
 * reporting a failure can be matched to the log. A sane incoming id (a proxy's,
 * 1 to 128 letters, digits and `._:-`) is kept; otherwise one is made.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export const REQUEST_ID_HEADER = 'x-request-id';

const SANE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

const ids = new WeakMap<IncomingMessage, string>();

/** The request's id: the one given (if sane) or a new one; the same on every call. */
export function requestIdOf(req: IncomingMessage): string {
  let id = ids.get(req);
  if (id === undefined) {
    const given = req.headers[REQUEST_ID_HEADER];
    const value = Array.isArray(given) ? given[0] : given;
    id = value !== undefined && SANE_ID.test(value) ? value : randomUUID();
    ids.set(req, id);
  }
  return id;
}

/** Gives the request its id and sets the response header; returns the id. */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const id = requestIdOf(req);
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** A component's log callback; `fields` are structured context (the request id) for the logger (src/log.ts). */
export type Log = (message: string, error?: unknown, fields?: Record<string, unknown>) => void;

/** The log line of a failure: what failed, and the request it belongs to. */
export function logFailure(log: Log, requestId: string, what: string, error: unknown): void {
  log(`${what} failed (request ${requestId})`, error, { reqId: requestId });
}
