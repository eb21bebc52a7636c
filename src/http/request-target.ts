/**
 * The request target (and Host) of an incoming request, checked before
 * anything parses them. This server serves paths only: a target must be in
 * origin-form (RFC 9112 §3.2.1), a path that starts with exactly one "/",
 * made of RFC 3986 path characters and well-formed percent-encoded UTF-8,
 * without "." or ".." segments, and an optional query of printable ASCII.
 * Anything else (absolute-form `http://h/x`, authority-form `h:443`, `*`,
 * `//h/x`, which a URL parser reads as another host, `\`, which it reads as
 * "/", broken `%` escapes) is refused with a 400 that names the rule, instead
 * of reaching `new URL`, whose throw would end the process.
 *
 * The URL returned is built from a target that passed, so it cannot throw, and
 * its pathname is the target's path as sent (no normalization happens that a
 * route check could miss).
 */
import type { Duplex } from 'node:stream';
import type { Result } from '../domain/result.js';

export type TargetRule = 'origin-form' | 'path-characters' | 'percent-encoding' | 'dot-segments' | 'query-characters' | 'host';

/** The target as a URL, or the rule it breaks. */
export type RequestTarget = Result<URL, { rule: TargetRule; message: string }>;

/** pchar (RFC 3986 §3.3) and "/", or a percent escape. */
const PATH = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;
/** Printable ASCII but "#", or a percent escape. */
const QUERY = /^(?:[!-"$&-~]|%[0-9A-Fa-f]{2})*$/;
const BROKEN_ESCAPE = /%(?![0-9A-Fa-f]{2})/;
/** reg-name or IPv4 (RFC 3986 §3.2.2), or an IP literal, then an optional port. */
const HOST = /^(?:(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+|\[[0-9A-Fa-f:.]+\])(?::(\d{0,5}))?$/;

const BASE = 'http://gateway';

function quoted(target: string): string {
  return JSON.stringify(target.length > 100 ? `${target.slice(0, 100)}…` : target);
}

function refuse(rule: TargetRule, message: string): RequestTarget {
  return { type: 'error', error: { rule, message } };
}

/** Checks a request's target and Host header; see the module comment for the rules. */
export function parseRequestTarget(target: string | undefined, host?: string | string[]): RequestTarget {
  const raw = target ?? '';
  if (!raw.startsWith('/') || raw.startsWith('//')) {
    const form =
      raw === '*'
        ? 'asterisk-form'
        : /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(raw)
          ? 'absolute-form'
          : raw.startsWith('//')
            ? 'a network-path reference'
            : 'authority-form or not a path';
    return refuse(
      'origin-form',
      `the request target must be a path that starts with a single "/" (origin-form, RFC 9112 §3.2.1); ${quoted(raw)} is ${form}`,
    );
  }
  const queryAt = raw.indexOf('?');
  const path = queryAt === -1 ? raw : raw.slice(0, queryAt);
  const query = queryAt === -1 ? '' : raw.slice(queryAt + 1);
  if (BROKEN_ESCAPE.test(raw)) {
    return refuse('percent-encoding', `the request target ${quoted(raw)} has a "%" that is not followed by two hex digits`);
  }
  if (!PATH.test(path)) {
    return refuse('path-characters', `the path ${quoted(path)} has characters that must be percent-encoded (RFC 3986 §3.3)`);
  }
  for (const segment of path.split('/')) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return refuse('percent-encoding', `the path ${quoted(path)} has percent escapes that are not UTF-8`);
    }
    if (decoded === '.' || decoded === '..') {
      return refuse('dot-segments', `the path ${quoted(path)} has a "." or ".." segment`);
    }
  }
  if (!QUERY.test(query)) {
    return refuse('query-characters', `the query ${quoted(query)} has characters that must be percent-encoded`);
  }
  const hostHeader = Array.isArray(host) ? host[0] : host;
  if (hostHeader !== undefined) {
    const match = HOST.exec(hostHeader);
    if (!match || (match[1] !== undefined && Number(match[1]) > 65535)) {
      return refuse('host', `the Host header ${quoted(hostHeader)} is not a host name with an optional port`);
    }
  }
  try {
    return { type: 'ok', value: new URL(raw, BASE) };
  } catch {
    return refuse('origin-form', `the request target ${quoted(raw)} is not a path`);
  }
}

const CLIENT_ERROR_STATUS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout'],
};

/**
 * The server's `clientError` listener: a request Node's parser refuses (a
 * target that is not a path or an absolute URL, a malformed header) gets the
 * same JSON error as the targets refused above, then the connection closes,
 * as Node's own answer would.
 */
/** Writes a whole JSON error response on a raw socket and closes it (for requests no handler answers). */
export function endWithJson(socket: Duplex, status: number, reason: string, code: string, message: string, rule: string): void {
  const body = JSON.stringify({ error: { code, message, details: { rule } } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * The server's `connect` listener: this is no proxy, so a CONNECT request
 * (whatever its target) is a 405, instead of a connection Node closes unanswered.
 */
export function answerConnect(_req: unknown, socket: Duplex): void {
  if (!socket.writable) return void socket.destroy();
  endWithJson(socket, 405, 'Method Not Allowed', 'INVALID_ARGUMENT', 'CONNECT is not supported: this server is not a proxy', 'method');
}

export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  const current = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (error.code !== 'ECONNRESET' && socket.writable && !current?.headersSent) {
    const [status, reason] = CLIENT_ERROR_STATUS[error.code ?? ''] ?? [400, 'Bad Request'];
    const rule = error.code === 'HPE_INVALID_URL' ? 'origin-form' : 'http-syntax';
    const message =
      rule === 'origin-form'
        ? 'the request target must be a path that starts with a single "/" (origin-form, RFC 9112 §3.2.1)'
        : status === 408
          ? 'the request did not arrive in time'
          : status === 431
            ? 'the request headers are too large'
            : `the request is not HTTP/1.1 this server can read (${error.code ?? 'unknown'})`;
    return endWithJson(socket, status, reason, status === 431 ? 'RESOURCE_EXHAUSTED' : 'INVALID_ARGUMENT', message, rule);
  }
  socket.destroy();
}
