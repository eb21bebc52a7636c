/**
 * Cursor pagination shared by every list: `limit` (or GraphQL `first`) is an
 * integer from 1 to 100, 20 when omitted, and a cursor is an opaque token
 * that encodes the position after which the next page starts.
 */
import { PAGE_LIMIT } from './page-limit.js';
import { invalidArgument, ok, fail, type Result } from './result.js';

export { PAGE_LIMIT };

export interface PageRequest {
  /** The position after which the page starts (a version index or an endpoint sequence number). */
  after: number;
  limit: number;
}

export interface Page<T> {
  items: T[];
  /** The cursor of each item: a page that starts after it. */
  cursors: string[];
  nextCursor: string | null;
}

export function encodeCursor(kind: string, position: number): string {
  return Buffer.from(`${kind}:${position}`, 'utf8').toString('base64url');
}

/** The largest position of an `integer` column (PostgreSQL's int4). */
export const INT4_MAX = 2 ** 31 - 1;

/**
 * The position a cursor encodes, or undefined when it is not a cursor of this
 * list: positions we issue are whole numbers from 0 up to the column's range,
 * so anything else (negative, past the range, not a number) was never issued.
 */
function decodeCursor(kind: string, cursor: string, maxPosition: number): number | undefined {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const [k, n, extra] = text.split(':');
  if (k !== kind || n === undefined || extra !== undefined || !/^\d{1,15}$/.test(n)) return undefined;
  const position = Number(n);
  // Only the exact text we issue: base64url decoding skips characters it does not know (quotes, padding), which
  // would let other spellings of a cursor through.
  return position <= maxPosition && encodeCursor(kind, position) === cursor ? position : undefined;
}

/** Python's text form of a bytes value, `b'<text>'`: what the official Python SDK puts in the query string. */
const PYTHON_BYTES_REPR = /^b'([A-Za-z0-9_-]+)'$/;

/**
 * The cursor inside the official Python SDK's form of it. The SDK types cursors as `bytes` and sends `str(cursor)`,
 * i.e. `b'<cursor>'`; a cursor we issue is base64url, which never needs escaping in that form, so exactly those
 * characters between `b'` and `'` are accepted. Anything else is passed on unchanged (and must be a cursor itself).
 */
function unwrapBytesRepr(cursor: string): string {
  return PYTHON_BYTES_REPR.exec(cursor)?.[1] ?? cursor;
}

/**
 * Reads a page request. `limit` may be a number (GraphQL) or a query-string
 * value (REST); the field names in errors are the caller's.
 */
export function parsePageRequest(
  kind: string,
  raw: { cursor?: unknown; limit?: unknown },
  names: { cursor: string; limit: string } = { cursor: 'cursor', limit: 'limit' },
  start = -1,
  /** The largest position the list's column holds: int4 unless the caller says (a bigint sequence). */
  maxPosition: number = INT4_MAX,
): Result<PageRequest> {
  const fields = [];
  let limit: number = PAGE_LIMIT.default;
  if (raw.limit !== undefined && raw.limit !== null) {
    const n = typeof raw.limit === 'string' && /^-?\d+$/.test(raw.limit) ? Number(raw.limit) : raw.limit;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < PAGE_LIMIT.min || n > PAGE_LIMIT.max) {
      fields.push({ field: names.limit, message: `must be an integer from ${PAGE_LIMIT.min} to ${PAGE_LIMIT.max}` });
    } else {
      limit = n;
    }
  }
  let after = start;
  if (raw.cursor !== undefined && raw.cursor !== null && raw.cursor !== '') {
    const position = typeof raw.cursor === 'string' ? decodeCursor(kind, unwrapBytesRepr(raw.cursor), maxPosition) : undefined;
    if (position === undefined) fields.push({ field: names.cursor, message: 'is not a cursor returned by this list' });
    else after = position;
  }
  return fields.length > 0 ? fail(invalidArgument(fields)) : ok({ after, limit });
}

/** Builds a page from up to limit + 1 fetched rows: the extra row only tells that more exist. */
export function toPage<T>(kind: string, rows: T[], limit: number, positionOf: (row: T) => number): Page<T> {
  const items = rows.slice(0, limit);
  const cursors = items.map((item) => encodeCursor(kind, positionOf(item)));
  return { items, cursors, nextCursor: rows.length > limit ? (cursors[cursors.length - 1] ?? null) : null };
}
