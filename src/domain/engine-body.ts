/**
 * What the engine receives: the request as the gateway validated it, written
 * back in OpenAI's wire form. Nothing the gateway did not read reaches an
 * engine (a field it ignores, an option of some engine's own), and what the
 * engine parses again is what the gateway checked: parsing the body written
 * here gives the same request (test/domain/engine-body.test.ts).
 */
import type { ChatRequest, GenerationRequest } from './chat-request.js';
import type { CompletionRequest } from './completion-request.js';
import type { ResponseFormat } from './response-format.js';
import { wireMessage, wireTools } from './tools.js';

/** `model` is passed on as the client named it (an ENGINE_COMMAND server may check it against its served name). */
type Model = string | undefined;

function responseFormat(format: ResponseFormat): Record<string, unknown> | undefined {
  if (format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  return { type: 'json_schema', json_schema: { name: format.name, schema: format.schema, strict: format.strict } };
}

/** The fields every generation request has; `legacyLogprobs`: text completions' count instead of chat's flag and top_logprobs. */
function generationFields(request: GenerationRequest, model: Model, legacyLogprobs: boolean): Record<string, unknown> {
  const { sampling } = request;
  const body: Record<string, unknown> = { stream: request.stream };
  if (model !== undefined) body.model = model;
  // A setting at its neutral value is left out, as a client leaves it out: an ENGINE_COMMAND server may not know
  // an option (top_k, min_p, repetition_penalty are not OpenAI's) or read 0 otherwise.
  if (request.temperature !== 1) body.temperature = request.temperature;
  if (request.topP !== 1) body.top_p = request.topP;
  if (sampling.topK !== 0) body.top_k = sampling.topK;
  if (sampling.minP !== 0) body.min_p = sampling.minP;
  if (sampling.presencePenalty !== 0) body.presence_penalty = sampling.presencePenalty;
  if (sampling.frequencyPenalty !== 0) body.frequency_penalty = sampling.frequencyPenalty;
  if (sampling.repetitionPenalty !== 1) body.repetition_penalty = sampling.repetitionPenalty;
  if (request.stream && request.includeUsage) body.stream_options = { include_usage: true };
  // Under the name the client used, so that an engine's refusal names the client's field.
  if (request.maxTokens !== undefined) body[request.maxTokensParam] = request.maxTokens;
  if (request.stop.length > 0) body.stop = request.stop;
  if (request.seed !== undefined) body.seed = request.seed;
  const format = responseFormat(request.responseFormat);
  if (format) body.response_format = format;
  if (sampling.logitBias.size > 0) body.logit_bias = Object.fromEntries(sampling.logitBias);
  if (sampling.logprobs) {
    if (legacyLogprobs) body.logprobs = sampling.topLogprobs;
    else {
      body.logprobs = true;
      if (sampling.topLogprobs > 0) body.top_logprobs = sampling.topLogprobs;
    }
  }
  return body;
}

export function chatEngineBody(request: ChatRequest, model: Model): Record<string, unknown> {
  return {
    ...generationFields(request, model, false),
    messages: request.messages.map(wireMessage),
    ...(Object.keys(request.chatTemplateKwargs).length > 0 ? { chat_template_kwargs: request.chatTemplateKwargs } : {}),
    ...wireTools(request.tools),
  };
}

export function completionEngineBody(request: CompletionRequest, model: Model): Record<string, unknown> {
  const { prompt } = request;
  return {
    ...generationFields(request, model, true),
    ...('text' in prompt ? { prompt: prompt.text } : { [prompt.field]: prompt.tokens }),
  };
}
