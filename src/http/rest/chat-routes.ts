/**
 * POST /dedicated/v1/chat/completions: the OpenAI-compatible inference route.
 * Authenticates like the management routes, routes through the chat router,
 * and relays the answer as it arrives. Errors take the OpenAI shape, so that
 * OpenAI client libraries raise their usual exceptions.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ChatRouter } from '../../router/chat-router.js';
import { errorBody, openAIError, type OpenAIError } from '../../domain/openai-errors.js';
import { collectBody, pipeStream } from '../../router/relay.js';
import type { Services } from '../../services/index.js';
import { openAIErrorOf } from '../failures.js';
import { authenticateRequest } from './endpoint-routes.js';
import { sendJson } from './responses.js';
import { readJsonBody } from './router.js';

export const CHAT_PATH = '/dedicated/v1/chat/completions';

function sendOpenAIError(res: ServerResponse, error: OpenAIError): void {
  if (res.headersSent || res.destroyed) return;
  sendJson(res, error.status, errorBody(error), error.retryAfter !== undefined ? { 'retry-after': String(error.retryAfter) } : {});
}

export async function handleChatCompletion(
  req: IncomingMessage,
  res: ServerResponse,
  services: Services,
  router: ChatRouter,
  log: (message: string, error?: unknown) => void,
): Promise<void> {
  // A client that disconnects cancels the request wherever it is: queued, or generating upstream.
  const clientGone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) clientGone.abort();
  });
  try {
    if (req.method !== 'POST')
      return sendOpenAIError(res, openAIError(405, 'invalid_request_error', `${CHAT_PATH} accepts POST only`, 'method_not_allowed'));
    const auth = await authenticateRequest(services, req);
    if (auth.type === 'error') {
      const status = auth.error.type === 'FORBIDDEN' ? 403 : 401;
      return sendOpenAIError(
        res,
        openAIError(
          status,
          status === 401 ? 'authentication_error' : 'permission_error',
          auth.error.message,
          status === 401 ? 'invalid_api_key' : 'forbidden',
        ),
      );
    }
    let body: unknown;
    try {
      body = await readJsonBody(req);
    } catch (error) {
      return sendOpenAIError(res, openAIErrorOf(error));
    }
    const routed = await router.route(auth.value, body, clientGone.signal);
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
    const mapped = openAIErrorOf(error);
    if (mapped.status === 500) log(`${CHAT_PATH} failed`, error);
    if (!res.headersSent) sendOpenAIError(res, mapped);
    else res.destroy();
  }
}
