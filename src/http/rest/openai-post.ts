/**
 * What every POST route under /dedicated/v1 shares: POST only (405 with
 * Allow otherwise), the JSON body read while the key is checked (a bad body
 * is answered only to a caller who authenticated: a 401 comes first), a
 * signal that aborts when the client leaves, and one catch that answers any
 * failure in the OpenAI shape (logged when it is the server's).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { failureOfDomainError, isServerFailure } from '../../domain/errors.js';
import type { Services } from '../../services/index.js';
import type { Principal } from '../../services/principal.js';
import { authenticateRequest } from '../authenticate.js';
import { readJsonBody } from '../body.js';
import { failureOf } from '../failures.js';
import { logFailure, requestIdOf, type Log } from '../request-id.js';
import { sendFailure, sendMethodNotAllowed } from './chat-errors.js';

/** An authenticated POST: the caller, its body, and a signal that aborts when the client leaves. */
export interface OpenAIPost {
  principal: Principal;
  body: unknown;
  clientGone: AbortSignal;
}

/** Runs `work` for an authenticated POST to `path`; everything before it and every failure in it are answered here. */
export async function handleOpenAIPost(
  req: IncomingMessage,
  res: ServerResponse,
  services: Services,
  log: Log,
  path: string,
  work: (call: OpenAIPost) => Promise<void>,
): Promise<void> {
  // A client that disconnects cancels the request wherever it is: queued, or at work upstream.
  const clientGone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) clientGone.abort();
  });
  try {
    if (req.method !== 'POST') {
      return sendMethodNotAllowed(res, path, 'POST');
    }
    const body = readJsonBody(req, res).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    // The key before the body is awaited (a request without a valid one is refused unread), and again once it has
    // arrived (from the cache the revocations clear): a key revoked while a slow client sent its body acts no more.
    const early = await authenticateRequest(services, req);
    if (early.type === 'error') return sendFailure(res, failureOfDomainError(early.error));
    const read = await body;
    if ('error' in read) throw read.error;
    const auth = await authenticateRequest(services, req);
    if (auth.type === 'error') return sendFailure(res, failureOfDomainError(auth.error));
    await work({ principal: auth.value, body: read.value, clientGone: clientGone.signal });
  } catch (error) {
    if (clientGone.signal.aborted) return;
    const failure = failureOf(error);
    if (isServerFailure(failure)) logFailure(log, requestIdOf(req), path, error);
    if (!res.headersSent) sendFailure(res, failure);
    else res.destroy();
  }
}
