/**
 * POST /dedicated/v1/tokenize (`{ model, prompt }` → `{ tokens }`) and
 * /dedicated/v1/detokenize (`{ model, tokens }` → `{ text }`), the documented
 * API's: the endpoint's own tokenizer, on one of its ready replicas (a
 * sleeping endpoint is woken first, as for chat). They take no generation
 * slot and are not in the request log. The replica is asked with vLLM's
 * routes (`/tokenize` with `prompt`, `/detokenize`), which the built-in
 * engine serves too.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Failure } from '../../domain/errors.js';
import { parseDetokenizeBody, parseTokenizeBody } from '../../domain/token-request.js';
import type { ChatRouter } from '../../router/chat-router.js';
import { MAX_TOKEN_CALLS_PER_ENDPOINT } from '../../router/token-calls.js';
import { requestRefusal } from '../../router/engine-call.js';
import type { Services } from '../../services/index.js';
import { sendJson } from '../body.js';
import type { Log } from '../request-id.js';
import { sendFailure } from './chat-errors.js';
import { handleOpenAIPost } from './openai-post.js';

export const TOKENIZE_PATH = '/dedicated/v1/tokenize';
export const DETOKENIZE_PATH = '/dedicated/v1/detokenize';
/** How long the replica may take to answer. */
const ANSWER_TIMEOUT_MS = 30_000;
/** The most of a replica's answer read: the tokens of a 1 MiB prompt, as JSON, with room. */
const MAX_ANSWER_BYTES = 32 * 1024 * 1024;

const replicaFailed = (what: string): Failure => ({
  kind: 'upstream',
  message: `the endpoint's replica did not ${what}; try again`,
  code: 'upstream_error',
});

const busy = (endpointId: string): Failure => ({
  kind: 'overloaded',
  message: `endpoint '${endpointId}' is running ${MAX_TOKEN_CALLS_PER_ENDPOINT} tokenize or detokenize calls already; retry in 1 s`,
  code: 'rate_limit_exceeded',
  retryAfter: 1,
});

export function handleTokenRoute(
  req: IncomingMessage,
  res: ServerResponse,
  path: typeof TOKENIZE_PATH | typeof DETOKENIZE_PATH,
  services: Services,
  router: ChatRouter,
  log: Log,
): Promise<void> {
  const tokenize = path === TOKENIZE_PATH;
  return handleOpenAIPost(req, res, services, log, path, async ({ principal, body, clientGone }) => {
    const parsed = tokenize ? parseTokenizeBody(body) : parseDetokenizeBody(body);
    if (parsed.type === 'error') return sendFailure(res, parsed.error);
    const serving = await router.replicaFor(principal, (body as { model?: unknown }).model, clientGone);
    if (serving.type === 'error') return sendFailure(res, serving.error);
    const { endpoint, replica, engines } = serving.value;
    const leave = router.tokenCalls.enter(endpoint.id);
    if (!leave) return sendFailure(res, busy(endpoint.id));
    const signal = AbortSignal.any([clientGone, AbortSignal.timeout(ANSWER_TIMEOUT_MS)]);
    const route = tokenize ? '/tokenize' : '/detokenize';
    const answer = await engines
      .postJson(replica, route, parsed.value, signal, MAX_ANSWER_BYTES)
      .catch(() => undefined)
      .finally(leave);
    if (clientGone.aborted) return;
    const what = tokenize ? 'tokenize the prompt' : 'detokenize the tokens';
    if (!answer) return sendFailure(res, replicaFailed(what));
    // The replica's refusal of the request itself (a token outside its vocabulary) is the client's: relayed as it is.
    // Any other failure (its token refused, a route it lacks) is the replica's.
    const refused = requestRefusal(answer);
    if (refused) return sendFailure(res, refused);
    const result = answer.body as { tokens?: unknown; prompt?: unknown } | undefined;
    if (answer.status === 200 && tokenize && Array.isArray(result?.tokens) && result.tokens.every((t) => Number.isInteger(t)))
      return sendJson(res, 200, { tokens: result.tokens });
    if (answer.status === 200 && !tokenize && typeof result?.prompt === 'string') return sendJson(res, 200, { text: result.prompt });
    sendFailure(res, replicaFailed(what));
  });
}
