/**
 * A small JSON call to a replica's engine (its `/tokenize` and `/detokenize` routes), with the
 * replica's token, a bound on the answer's size, and the caller's signal (a deadline included).
 */
import http from 'node:http';
import { openAIError, type OpenAIError } from '../domain/openai-errors.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { engineAuthHeaders } from '../runtime/runtime.js';

export interface EngineAnswer {
  status: number;
  /** The parsed JSON, or undefined when the answer was not JSON. */
  body: unknown;
}

export class EngineAnswerTooLargeError extends Error {}

/** POSTs `payload` to `path` on the replica; rejects when it cannot be reached, the signal aborts, or the answer passes `maxBytes`. */
export function postToEngine(
  agent: http.Agent,
  replica: Pick<ReplicaRecord, 'address' | 'token'>,
  path: string,
  payload: unknown,
  signal: AbortSignal,
  maxBytes: number,
): Promise<EngineAnswer> {
  const text = JSON.stringify(payload);
  return new Promise((resolve, reject) => {
    const req = http.request(`${replica.address}${path}`, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...engineAuthHeaders(replica.token) },
      signal,
    });
    req.once('error', reject);
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) return void res.destroy(new EngineAnswerTooLargeError(`the answer of ${path} is over ${maxBytes} bytes`));
        chunks.push(chunk);
      });
      res.once('error', reject);
      res.once('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 502, body });
      });
    });
    req.end(text);
  });
}

function isOpenAIErrorBody(body: unknown): body is { error: { message: string; type: string; param: string | null; code: string | null } } {
  const error = (body as { error?: { message?: unknown } } | undefined)?.error;
  return typeof error === 'object' && error !== null && typeof error.message === 'string';
}

/**
 * The engine's refusal of the request itself (a 400 in OpenAI's shape: a prompt over the
 * limits, a token outside the vocabulary), which is the client's to see; undefined for any other
 * answer (a success, or the replica's own failure).
 */
export function requestRefusal(answer: EngineAnswer): OpenAIError | undefined {
  if (answer.status !== 400 || !isOpenAIErrorBody(answer.body)) return undefined;
  const { message, param, code } = answer.body.error;
  return openAIError(400, 'invalid_request_error', message, code ?? null, param ?? null);
}
