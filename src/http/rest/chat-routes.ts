/**
 * POST /dedicated/v1/chat/completions and /dedicated/v1/completions: the
 * OpenAI-compatible inference routes (chat, and legacy text completions).
 * Authenticates like every surface (../authenticate.ts), routes through the
 * router, and relays the answer as it arrives. Errors take the OpenAI shape,
 * so that OpenAI client libraries raise their usual exceptions.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ChatRouter } from '../../router/chat-router.js';
import { CHAT_KIND, TEXT_KIND } from '../../router/inference-kinds.js';
import { collectBody, pipeStream } from '../../router/relay.js';
import type { Services } from '../../services/index.js';
import type { Log } from '../request-id.js';
import { CUT_EVENTS, sendFailure } from './chat-errors.js';
import { handleOpenAIPost } from './openai-post.js';

export const CHAT_PATH = '/dedicated/v1/chat/completions';
export const COMPLETIONS_PATH = '/dedicated/v1/completions';

export function handleChatCompletion(
  req: IncomingMessage,
  res: ServerResponse,
  services: Services,
  router: ChatRouter,
  log: Log,
  path: typeof CHAT_PATH | typeof COMPLETIONS_PATH = CHAT_PATH,
  /** How long the answer's stream waits for a client that takes nothing of it (then it is cut, its slot freed). */
  stallMs: number,
): Promise<void> {
  const kind = path === COMPLETIONS_PATH ? TEXT_KIND : CHAT_KIND;
  return handleOpenAIPost(req, res, services, log, path, async ({ principal, body, clientGone }) => {
    const outcome = await router.answer(principal, body, clientGone, kind);
    if (outcome.kind === 'failure') return sendFailure(res, outcome.failure);
    const { routed } = outcome;
    if (outcome.kind === 'whole') {
      // The answer, or the replica's own error answer: the engine speaks this route's shape, so its bytes go as they are.
      const payload = await collectBody(routed);
      const { status } = routed.upstream;
      res.writeHead(status, {
        'content-type': routed.upstream.contentType ?? 'application/json',
        'content-length': payload.length,
        // The replica's own "not now" (its queue full): when to try again, as every 429 and 503 here says.
        ...(status === 429 || status === 503 ? { 'retry-after': '1' } : {}),
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
    await pipeStream(routed, res, CUT_EVENTS, stallMs);
    if (!res.destroyed) res.end();
  });
}
