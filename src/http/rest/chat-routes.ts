/**
 * POST /dedicated/v1/chat/completions: the OpenAI-compatible inference route.
 * Authenticates like every surface (../authenticate.ts), routes through the chat router,
 * and relays the answer as it arrives. Errors take the OpenAI shape, so that
 * OpenAI client libraries raise their usual exceptions.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { failureOfDomainError, isServerFailure } from '../../domain/errors.js';
import { openAIError } from '../../domain/openai-errors.js';
import type { ChatRouter } from '../../router/chat-router.js';
import { collectBody, pipeStream } from '../../router/relay.js';
import type { Services } from '../../services/index.js';
import { authenticateRequest } from '../authenticate.js';
import { readJsonBody } from '../body.js';
import { failureOf } from '../failures.js';
import { logFailure, requestIdOf, type Log } from '../request-id.js';
import { openAIErrorOfFailure, sendOpenAIError } from './chat-errors.js';

export const CHAT_PATH = '/dedicated/v1/chat/completions';

export async function handleChatCompletion(
  req: IncomingMessage,
  res: ServerResponse,
  services: Services,
  router: ChatRouter,
  log: Log,
): Promise<void> {
  // A client that disconnects cancels the request wherever it is: queued, or generating upstream.
  const clientGone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) clientGone.abort();
  });
  try {
    if (req.method !== 'POST')
      return sendOpenAIError(res, openAIError(405, 'invalid_request_error', `${CHAT_PATH} accepts POST only`, 'method_not_allowed'), {
        allow: 'POST',
      });
    // The body is read while the key is checked; a bad one is answered only to a caller who authenticated (a 401 comes first).
    const body = readJsonBody(req).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    const auth = await authenticateRequest(services, req);
    if (auth.type === 'error') return sendOpenAIError(res, openAIErrorOfFailure(failureOfDomainError(auth.error)));
    const read = await body;
    if ('error' in read) throw read.error;
    const routed = await router.route(auth.value, read.value, clientGone.signal);
    if (routed.type === 'error') return sendOpenAIError(res, routed.error);

    const { upstream, request } = routed.value;
    if (!request.stream || upstream.statusCode !== 200) {
      const payload = await collectBody(routed.value);
      res.writeHead(upstream.statusCode ?? 502, {
        'content-type': upstream.headers['content-type'] ?? 'application/json',
        'content-length': payload.length,
      });
      res.end(payload);
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    await pipeStream(routed.value, res);
    if (!res.destroyed) res.end();
  } catch (error) {
    if (clientGone.signal.aborted) return;
    const failure = failureOf(error);
    if (isServerFailure(failure)) logFailure(log, requestIdOf(req), CHAT_PATH, error);
    if (!res.headersSent) sendOpenAIError(res, openAIErrorOfFailure(failure));
    else res.destroy();
  }
}
