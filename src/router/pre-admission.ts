/**
 * Checks that refuse a bad chat request before it waits for a slot, so that
 * its refusal (`invalid`) comes at once however busy the endpoint is (the engine would refuse
 * it too, but only once admitted, after the queue):
 *
 * - without the tokenizer, against the endpoint's spec: `max_tokens` that
 *   alone fills max_token_count;
 * - with the tokenizer, when the request would have to wait: the replica's
 *   `POST /tokenize` renders the prompt and counts its tokens without taking a
 *   sequence, and the engine's own rules (checkTokenLimits) are applied to
 *   the count. An engine without the route (a custom ENGINE_COMMAND), or one
 *   that does not answer in time, is skipped: the request queues as before.
 *   A prompt too short to break the limits whatever the tokenizer (see
 *   `mayBreakTokenLimits`) is not counted, so that a request refused for
 *   capacity learns it without a round trip to a busy replica.
 */
import { wireMessage, wireTools } from '../domain/tools.js';
import { checkRequestedTokens, checkTokenLimits, type ChatRequest, type GenerationRequest } from '../domain/chat-request.js';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import type { Failure } from '../domain/errors.js';
import { requestRefusal } from './engine-call.js';
import type { EngineAnswer, EngineClient } from '../engine-client/engine-client.js';

/** How long the gateway waits for a replica's token count before it lets the request queue unchecked. */
export const TOKENIZE_TIMEOUT_MS = 5_000;
/** The most of a /tokenize answer read (it is a few numbers). */
const MAX_ANSWER_BYTES = 64 * 1024;

/** The checks that need only the endpoint's spec. */
export function checkAgainstSpec(request: GenerationRequest, endpoint: EndpointRecord): Failure | undefined {
  return checkRequestedTokens(request, endpoint.current.spec.advanced.maxTokenCount);
}

/** What the checks need of a request's prompt (each kind of request says it: inference-kinds.ts). */
export interface PromptShape {
  /** At most how many tokens the prompt has, whatever the tokenizer. */
  tokenBound: number;
  /** Exactly how many, when the gateway knows (a prompt of token ids): then no replica is asked. */
  exactTokens?: number;
  /** The replica's `/tokenize` body that counts them (vLLM's chat or prompt form). */
  tokenizeBody: Record<string, unknown>;
  /** The field that holds the prompt, for errors. */
  param: 'messages' | 'prompt' | 'tokens';
}

/** Tokens a chat template may add per message (role markers), and in all (a default system prompt, the generation prompt). */
const TEMPLATE_TOKENS_PER_MESSAGE = 32;
const TEMPLATE_TOKENS = 256;
/** What a prompt with tools may add besides them: node-llama-cpp's instructions (about 1.2 KB) for a template that knows no tools. */
const TOOLS_PROMPT_TOKENS = 2048;

/**
 * A chat prompt: at most one token per byte of every message, plus a
 * template's markers (a token covers at least one byte in the byte-level and
 * byte-fallback tokenizers GGUF models use).
 */
export function chatPromptShape(request: ChatRequest, endpointId: string): PromptShape {
  let bound = TEMPLATE_TOKENS + Buffer.byteLength(JSON.stringify(request.chatTemplateKwargs ?? {}));
  const tools = wireTools(request.tools);
  // The tools are written into the prompt (as JSON, or as a description that is no longer), and so are the calls.
  if (request.tools) bound += 2 * Buffer.byteLength(JSON.stringify(tools.tools)) + TOOLS_PROMPT_TOKENS;
  for (const message of request.messages) {
    bound += TEMPLATE_TOKENS_PER_MESSAGE + Buffer.byteLength(message.content);
    for (const call of message.toolCalls ?? [])
      bound += TEMPLATE_TOKENS_PER_MESSAGE + Buffer.byteLength(call.name) + Buffer.byteLength(call.arguments);
  }
  const tokenizeBody = {
    model: endpointId,
    messages: request.messages.map(wireMessage),
    ...tools,
    chat_template_kwargs: request.chatTemplateKwargs,
    add_generation_prompt: true,
  };
  return { tokenBound: bound, tokenizeBody, param: 'messages' };
}

/** Whether the prompt might break the endpoint's token limits; when it cannot, the count is not needed. */
export function mayBreakTokenLimits(request: GenerationRequest, prompt: PromptShape, endpoint: EndpointRecord): boolean {
  const { maxInputLength, maxTokenCount } = endpoint.current.spec.advanced;
  const bound = prompt.tokenBound;
  return bound > maxInputLength || bound + (request.maxTokens ?? 0) >= maxTokenCount;
}

/**
 * The prompt's checks, by the replica's tokenizer: the refusal the completion
 * would get, or undefined when it would pass (or cannot be told).
 */
export async function checkPromptTokens(
  engines: EngineClient,
  replica: ReplicaRecord,
  endpoint: EndpointRecord,
  request: GenerationRequest,
  prompt: PromptShape,
  signal: AbortSignal,
): Promise<Failure | undefined> {
  const { advanced } = endpoint.current.spec;
  if (prompt.exactTokens !== undefined) {
    const limits = { maxInputLength: advanced.maxInputLength, contextSize: advanced.maxTokenCount };
    return checkTokenLimits(prompt.exactTokens, request, limits, prompt.param);
  }
  let answer: EngineAnswer;
  try {
    answer = await engines.postJson(
      replica,
      '/tokenize',
      prompt.tokenizeBody,
      AbortSignal.any([signal, AbortSignal.timeout(TOKENIZE_TIMEOUT_MS)]),
      MAX_ANSWER_BYTES,
    );
  } catch {
    return undefined;
  }
  const refused = requestRefusal(answer);
  if (refused) return refused;
  const counted = answer.body as { count?: unknown; max_model_len?: unknown; max_input_length?: unknown } | undefined;
  if (answer.status !== 200 || typeof counted?.count !== 'number' || !Number.isInteger(counted.count)) return undefined;
  // The replica's own limits where it tells them (it may run an older version during a rollout).
  const limits = {
    maxInputLength: typeof counted.max_input_length === 'number' ? counted.max_input_length : advanced.maxInputLength,
    contextSize: typeof counted.max_model_len === 'number' ? counted.max_model_len : advanced.maxTokenCount,
  };
  return checkTokenLimits(counted.count, request, limits, prompt.param);
}
