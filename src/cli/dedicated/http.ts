/**
 * How the CLI reads an error answer's body: at most ERROR_BODY_LIMIT bytes within ERROR_BODY_TIMEOUT_MS, the rest
 * cancelled. A proxy's 500 page that never ends once made the CLI hang and grow to 724 MB; a real error body is a
 * few hundred bytes of JSON, there as soon as the headers are. Used by the chat and tokenize routes (live.ts) and,
 * through `graphqlClient`, by every GraphQL command.
 */
import type { GraphQLClient } from 'graphql-request';
import { createClient } from '../../sdk/client.js';
import type { Settings } from './settings.js';

export const ERROR_BODY_LIMIT = 64 * 1024;
export const ERROR_BODY_TIMEOUT_MS = 3_000;

/** The body as text, or undefined when it is longer than `limit` bytes or not complete in `timeoutMs`. */
export async function readBounded(
  response: Response,
  limit = ERROR_BODY_LIMIT,
  timeoutMs = ERROR_BODY_TIMEOUT_MS,
): Promise<string | undefined> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(() => resolve('expired'), timeoutMs)));
  try {
    for (;;) {
      const read = await Promise.race([reader.read(), expired]);
      if (read === 'expired') return undefined;
      if (read.done) return new TextDecoder().decode(Buffer.concat(chunks));
      size += read.value.byteLength;
      if (size > limit) return undefined;
      chunks.push(read.value);
    }
  } finally {
    clearTimeout(timer);
    // Closes the connection of a body left unread, so that neither the bytes nor the socket keep the CLI running.
    reader.cancel().catch(() => undefined);
  }
}

/**
 * fetch for graphql-request, which reads whole bodies with `text()`: an answer that is not 2xx comes back with its
 * body read as readBounded reads it (empty when cut, so the command reports `HTTP <status>`). Successful answers
 * are left as they are.
 */
export const boundedFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  if (response.ok) return response;
  const text = await readBounded(response);
  return new Response(text || null, { status: response.status, statusText: response.statusText, headers: response.headers });
};

/** The typed SDK's client for the CLI's commands, reading error bodies bounded. */
export function graphqlClient(settings: Settings): GraphQLClient {
  return createClient(settings.baseUrl, settings.apiKey, { fetch: boundedFetch });
}
