/**
 * The kinds of generation request the router serves, and what differs
 * between them: how the body is read, the engine route it goes to, what the
 * pre-admission checks know of its prompt, and what the content log keeps of
 * its input. Chat completions render messages with the chat template; text
 * completions send a raw prompt (text or token ids).
 */
import { parseChatRequest, type ChatRequest, type GenerationRequest, type RequestError } from '../domain/chat-request.js';
import { parseCompletionRequest, type CompletionRequest } from '../domain/completion-request.js';
import { chatEngineBody, completionEngineBody } from '../domain/engine-body.js';
import type { Result } from '../domain/result.js';
import { chatPromptShape, type PromptShape } from './pre-admission.js';

interface Kind<R extends GenerationRequest> {
  /** The engine's route (the same on an ENGINE_COMMAND server with OpenAI's routes). */
  enginePath: '/v1/chat/completions' | '/v1/completions';
  parse(body: unknown): Result<R, RequestError>;
  /** The body the engine receives: the parsed request in OpenAI's wire form (src/domain/engine-body.ts). */
  engineBody(request: R, model: string | undefined): Record<string, unknown>;
  prompt(request: R, endpointId: string): PromptShape;
  /** The request's input as the content log keeps it (`[{ role, content }]`). */
  loggedInput(request: R): unknown;
}

/** A kind as the router holds it: its requests are those its own `parse` made, so its functions only ever get theirs. */
export type InferenceKind = Kind<GenerationRequest>;

const kind = <R extends GenerationRequest>(k: Kind<R>): InferenceKind => k as unknown as InferenceKind;

export const CHAT_KIND = kind<ChatRequest>({
  enginePath: '/v1/chat/completions',
  parse: parseChatRequest,
  engineBody: chatEngineBody,
  prompt: chatPromptShape,
  loggedInput: (request) => request.messages,
});

export const TEXT_KIND = kind<CompletionRequest>({
  enginePath: '/v1/completions',
  parse: parseCompletionRequest,
  engineBody: completionEngineBody,
  prompt: (request, endpointId) => {
    const { prompt } = request;
    if ('tokens' in prompt) {
      const n = prompt.tokens.length;
      return { tokenBound: n, exactTokens: n, tokenizeBody: {}, param: prompt.field };
    }
    // One token per byte at most, and BOS.
    // count_only: the count is all the check reads (an engine that ignores it answers the tokens too, and a long list is skipped).
    const tokenizeBody = { model: endpointId, prompt: prompt.text, count_only: true };
    return { tokenBound: Buffer.byteLength(prompt.text) + 1, tokenizeBody, param: 'prompt' };
  },
  loggedInput: ({ prompt }) => ['text' in prompt ? { role: 'prompt', content: prompt.text } : { role: 'prompt', tokens: prompt.tokens }],
});
