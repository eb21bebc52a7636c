/**
 * Parsing and validation of an OpenAI chat-completions request body. Everything the engine uses is
 * checked here, so the rest of the engine works on a typed, trusted value; fields the engine does
 * not use (user, ...) are accepted and ignored, like other OpenAI-compatible servers do, but
 * features it cannot honour (n > 1, the deprecated `functions` and `function_call`) are refused
 * instead of silently ignored. `response_format`, the sampling controls (penalties, logit_bias,
 * logprobs, top_k, min_p), tool calling and `chat_template_kwargs` (with `reasoning_effort`) have
 * their own modules (response-format.ts, sampling.ts, tools.ts, template-kwargs.ts).
 */
import { LIMITS } from '../domain/endpoint-spec.js';
import { findTextViolation, isObject, nestingDepth } from './field-checker.js';
import { checked, describe, fail, invalidRequest, numberText, type RequestError } from './request-checks.js';
import type { Result } from './result.js';
import { parseResponseFormat, type ResponseFormat } from './response-format.js';
import { parseSampling, type Sampling } from './sampling.js';
import { parseTemplateKwargs, withReasoningEffort } from './template-kwargs.js';
import { checkToolTurns, parseMessageToolCalls, parseTools, type ToolCall, type ToolsRequest } from './tools.js';

export { TEMPLATE_KWARGS_LIMITS } from './template-kwargs.js';

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';
/** A message: an assistant's may carry the tool calls it made, a tool's answers one of them. */
export type ChatMessage = { role: ChatRole; content: string; toolCalls?: ToolCall[]; toolCallId?: string };

/** What every generation request has (chat and text completions): all but its prompt. */
export type GenerationRequest = {
  stream: boolean;
  includeUsage: boolean;
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  /** Undefined: as many as fit in the context. */
  maxTokens: number | undefined;
  /** The field maxTokens came from, for error messages. */
  maxTokensParam: 'max_tokens' | 'max_completion_tokens';
  stop: string[];
  seed: number | undefined;
  /** Text, or JSON the engine's grammar enforces. */
  responseFormat: ResponseFormat;
  /** top_k, min_p, penalties, logit_bias, logprobs. */
  sampling: Sampling;
};

export type ChatRequest = GenerationRequest & {
  messages: ChatMessage[];
  chatTemplateKwargs: Record<string, unknown>;
  /** The tools the model may call (absent: none, or `tool_choice: "none"`). */
  tools?: ToolsRequest;
};

export type { RequestError };

/** The request, or the refusal (`invalid`) it gets. */
export type ParseResult = Result<ChatRequest, RequestError>;

export const MAX_STOP_SEQUENCES = 4;
/**
 * The most messages a chat request may hold (OpenAI's own limit). The engine renders the chat
 * template over every message, synchronously, before it can count the prompt's tokens: ~36,000
 * empty messages fit a 1 MiB body and held its event loop for 2.4 s; 2,048 render in about 0.1 s
 * (the tiny test model's template). Tool calls need no bound of their own here: each must be
 * answered by a tool message (checkToolTurns), so they are fewer than the messages; content parts
 * are joined into one text before the template sees them, so they add no rendering.
 */
export const MAX_MESSAGES = 2048;
/** How deep a request body may nest JSON (a response_format schema's own limit is tighter). */
const MAX_BODY_DEPTH = 128;
/** The most tokens a request may ask for: the largest max_token_count an endpoint can have. */
export const MAX_REQUEST_TOKENS = LIMITS.maxTokens;
const ROLES: ReadonlySet<string> = new Set<ChatRole>(['system', 'user', 'assistant', 'tool']);
/** OpenAI's newer name for the system role: such a message is the model's system message. */
const ROLE_ALIASES: Readonly<Record<string, ChatRole>> = { developer: 'system' };

function optionalNumber(body: Record<string, unknown>, name: string, min: number, max: number): number | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number') fail(`${name} must be a number (got ${describe(value)})`, name, 'invalid_type');
  // Infinity is a literal too large for a double (JSON has no Infinity): out of range, like any other.
  if (!Number.isFinite(value) || value < min || value > max)
    fail(`${name} must be between ${min} and ${max} (got ${numberText(value)})`, name);
  return value;
}

function optionalPositiveInteger(body: Record<string, unknown>, name: string, max: number): number | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || (Number.isFinite(value) && !Number.isInteger(value)))
    fail(`${name} must be an integer (got ${describe(value)})`, name, 'invalid_type');
  if (value < 1) fail(`${name} must be at least 1 (got ${numberText(value)})`, name);
  if (value > max)
    fail(`${name} must be at most ${max}, the largest max_token_count an endpoint can have (got ${numberText(value)})`, name);
  return value;
}

function parseContent(value: unknown, param: string, role: ChatRole): string {
  if (typeof value === 'string') return value;
  // Assistant turns that only carried tool calls have null content in OpenAI transcripts.
  if (value === null && role === 'assistant') return '';
  if (Array.isArray(value)) {
    return value
      .map((part, j) => {
        const partParam = `${param}[${j}]`;
        if (!isObject(part))
          fail(`${partParam} must be an object like {"type": "text", "text": "..."} (got ${describe(part)})`, partParam, 'invalid_type');
        if (part.type !== 'text')
          fail(`${partParam}.type must be "text": this model accepts text only (got ${describe(part.type)})`, `${partParam}.type`);
        if (typeof part.text !== 'string')
          fail(`${partParam}.text must be a string (got ${describe(part.text)})`, `${partParam}.text`, 'invalid_type');
        return part.text;
      })
      .join('');
  }
  return fail(`${param} must be a string or an array of text parts (got ${describe(value)})`, param, 'invalid_type');
}

function parseMessages(value: unknown): ChatMessage[] {
  if (value === undefined || value === null) fail('messages is required', 'messages', 'missing_required_parameter');
  if (!Array.isArray(value)) fail(`messages must be an array (got ${describe(value)})`, 'messages', 'invalid_type');
  if (value.length === 0) fail('messages must contain at least one message', 'messages');
  if (value.length > MAX_MESSAGES) fail(`messages may contain at most ${MAX_MESSAGES} messages (got ${value.length})`, 'messages');
  const messages = value.map((message, i) => {
    const param = `messages[${i}]`;
    if (!isObject(message)) fail(`${param} must be an object (got ${describe(message)})`, param, 'invalid_type');
    const given: unknown = message.role;
    const role = typeof given === 'string' && Object.hasOwn(ROLE_ALIASES, given) ? ROLE_ALIASES[given] : given;
    if (typeof role !== 'string' || !ROLES.has(role)) {
      fail(`${param}.role must be one of "system", "developer", "user", "assistant", "tool" (got ${describe(given)})`, `${param}.role`);
    }
    const typedRole = role as ChatRole;
    if (message.function_call !== undefined && message.function_call !== null)
      fail(
        `${param}.function_call is OpenAI's deprecated form of tool_calls, which this API does not take: send the call as ${param}.tool_calls, and its result as a "tool" message with its tool_call_id`,
        `${param}.function_call`,
      );
    const calls = message.tool_calls;
    const toolCalls =
      typedRole === 'assistant' && calls !== undefined && calls !== null ? parseMessageToolCalls(calls, `${param}.tool_calls`) : [];
    // An assistant turn that only called tools may leave its content out.
    if (!('content' in message) && toolCalls.length === 0)
      fail(`${param}.content is required`, `${param}.content`, 'missing_required_parameter');
    const parsed: ChatMessage = { role: typedRole, content: parseContent(message.content ?? null, `${param}.content`, typedRole) };
    if (toolCalls.length > 0) parsed.toolCalls = toolCalls;
    if (typedRole === 'tool') {
      const id = message.tool_call_id;
      if (typeof id !== 'string' || id === '')
        fail(
          `${param}.tool_call_id is required: the id of the call this message answers`,
          `${param}.tool_call_id`,
          'missing_required_parameter',
        );
      parsed.toolCallId = id;
    }
    return parsed;
  });
  checkToolTurns(messages);
  return messages;
}

function parseStop(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list)) fail(`stop must be a string or an array of strings (got ${describe(value)})`, 'stop', 'invalid_type');
  if (list.length > MAX_STOP_SEQUENCES) fail(`stop may contain at most ${MAX_STOP_SEQUENCES} sequences (got ${list.length})`, 'stop');
  return list.map((item, i) => {
    if (typeof item !== 'string') fail(`stop[${i}] must be a string (got ${describe(item)})`, 'stop', 'invalid_type');
    if (item.length === 0) fail(`stop[${i}] must not be empty`, 'stop');
    return item;
  });
}

function refuseUnsupported(body: Record<string, unknown>): void {
  const n = body.n;
  if (n !== undefined && n !== null && n !== 1) fail(`n must be 1: this engine returns one choice per request (got ${describe(n)})`, 'n');
}

/**
 * OpenAI's deprecated function calling, which `tools` and `tool_choice` replaced: refused, so that a
 * client learns why no call comes (ignored, the answer would be plain text and look like the model's choice).
 */
function refuseLegacyFunctions(body: Record<string, unknown>): void {
  const legacy = [
    ['functions', 'tools', 'each function as {"type": "function", "function": {...}}'],
    ['function_call', 'tool_choice', '"auto", "none", "required", or {"type": "function", "function": {"name": "..."}}'],
  ] as const;
  for (const [field, instead, shape] of legacy) {
    if (body[field] !== undefined && body[field] !== null)
      fail(`${field} is OpenAI's deprecated form of ${instead}, which this API does not take: send ${instead} (${shape}) instead`, field);
  }
}

/**
 * Validates a decoded JSON body of a generation request: the checks every
 * body gets (an object, nesting, text), the prompt by `parsePrompt` (which
 * refuses with `fail`), then the fields every kind shares. Never throws.
 */
export function parseGenerationRequest<P extends object>(
  body: unknown,
  parsePrompt: (body: Record<string, unknown>) => P,
): Result<GenerationRequest & P, RequestError> {
  return checked(() => {
    if (!isObject(body)) fail(`The request body must be a JSON object (got ${describe(body)})`, null, 'invalid_type');
    // Deeper than any request needs, and deep enough to overflow the stack of whatever serializes it again (the gateway forwards it).
    if (nestingDepth(body, MAX_BODY_DEPTH) > MAX_BODY_DEPTH)
      fail(`The request body nests JSON more than ${MAX_BODY_DEPTH} levels deep`, null);
    // Every string of the body, those the engine ignores (`name`, `user`) included: free text must be text.
    const broken = findTextViolation(body, '');
    if (broken) fail(`${broken.field} ${broken.rule}`, broken.field);
    if (body.model !== undefined && body.model !== null && typeof body.model !== 'string') {
      fail(`model must be a string (got ${describe(body.model)})`, 'model', 'invalid_type');
    }
    const prompt = parsePrompt(body);

    const stream = body.stream ?? false;
    if (typeof stream !== 'boolean') fail(`stream must be a boolean (got ${describe(stream)})`, 'stream', 'invalid_type');
    let includeUsage = false;
    const streamOptions = body.stream_options;
    if (streamOptions !== undefined && streamOptions !== null) {
      if (!isObject(streamOptions))
        fail(`stream_options must be an object (got ${describe(streamOptions)})`, 'stream_options', 'invalid_type');
      const flag = streamOptions.include_usage ?? false;
      if (typeof flag !== 'boolean')
        fail(`stream_options.include_usage must be a boolean (got ${describe(flag)})`, 'stream_options.include_usage', 'invalid_type');
      includeUsage = flag;
    }

    const temperature = optionalNumber(body, 'temperature', 0, 2) ?? 1;
    const topP = optionalNumber(body, 'top_p', 0, 1) ?? 1;
    // max_completion_tokens is OpenAI's newer name for max_tokens. OpenAI refuses a request that sends both (400
    // invalid_parameter_combination, naming max_tokens), whatever their values: so does this API, before either is read.
    const sent = (value: unknown) => value !== undefined && value !== null;
    if (sent(body.max_tokens) && sent(body.max_completion_tokens))
      fail(
        'max_tokens and max_completion_tokens cannot be sent together: send max_completion_tokens alone (max_tokens is its older name)',
        'max_tokens',
        'invalid_parameter_combination',
      );
    const maxCompletionTokens = optionalPositiveInteger(body, 'max_completion_tokens', MAX_REQUEST_TOKENS);
    const legacyMaxTokens = optionalPositiveInteger(body, 'max_tokens', MAX_REQUEST_TOKENS);
    const maxTokensParam = maxCompletionTokens !== undefined ? 'max_completion_tokens' : 'max_tokens';
    const maxTokens = maxCompletionTokens ?? legacyMaxTokens;

    let seed: number | undefined;
    if (body.seed !== undefined && body.seed !== null) {
      if (typeof body.seed !== 'number' || (Number.isFinite(body.seed) && !Number.isInteger(body.seed)))
        fail(`seed must be an integer (got ${describe(body.seed)})`, 'seed', 'invalid_type');
      if (!Number.isSafeInteger(body.seed))
        fail(`seed must be from ${Number.MIN_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER} (got ${numberText(body.seed)})`, 'seed');
      seed = body.seed;
    }

    refuseUnsupported(body);
    const sampling = parseSampling(body);
    const responseFormat = parseResponseFormat(body.response_format);
    if ('message' in responseFormat) fail(responseFormat.message, responseFormat.param);
    const request: GenerationRequest = {
      stream,
      includeUsage,
      temperature,
      topP,
      maxTokens,
      maxTokensParam,
      stop: parseStop(body.stop),
      seed,
      responseFormat,
      sampling,
    };
    // Not `{ ...prompt, stream, … }`: a literal that starts with a spread and goes on takes V8's slow path (16 µs
    // of a 23 µs parse, measured); assigning the prompt's fields onto the literal keeps it a fast object.
    return Object.assign(request, prompt);
  });
}

/** Validates a decoded chat-completions body. Never throws. */
export function parseChatRequest(body: unknown): ParseResult {
  return parseGenerationRequest(body, (fields) => {
    refuseLegacyFunctions(fields);
    const tools = parseTools(fields);
    return {
      messages: parseMessages(fields.messages),
      chatTemplateKwargs: withReasoningEffort(parseTemplateKwargs(fields.chat_template_kwargs), fields.reasoning_effort),
      ...(tools ? { tools } : {}),
    };
  });
}

/** The token limits of one replica: the endpoint's max_input_length and max_token_count. */
export type TokenLimits = { maxInputLength: number; contextSize: number };

/**
 * What can be refused before the prompt is tokenized: a completion that alone
 * fills max_token_count (every prompt has at least one token). The gateway
 * checks it before a request waits for a slot.
 */
export function checkRequestedTokens(
  request: Pick<GenerationRequest, 'maxTokens' | 'maxTokensParam'>,
  contextSize: number,
): RequestError | undefined {
  if (request.maxTokens === undefined || request.maxTokens < contextSize) return undefined;
  return invalidRequest(
    `This endpoint's max_token_count is ${contextSize} tokens, but ${request.maxTokensParam} asks for ${request.maxTokens}, which leaves no room for the prompt. ` +
      `Lower ${request.maxTokensParam} below ${contextSize}.`,
    request.maxTokensParam,
    'context_length_exceeded',
  );
}

/**
 * The limits a prompt of `promptTokens` tokens must meet, checked by the
 * engine before the request takes a sequence, and by the gateway (with the
 * count the engine's /tokenize gives) before the request waits for a slot.
 */
export function checkTokenLimits(
  promptTokens: number,
  request: Pick<GenerationRequest, 'maxTokens' | 'maxTokensParam'>,
  limits: TokenLimits,
  /** The field that holds the prompt: a chat's messages, a text completion's prompt (or tokens). */
  promptParam: 'messages' | 'prompt' | 'tokens' = 'messages',
): RequestError | undefined {
  const shorten = promptParam === 'messages' ? 'Shorten the messages' : 'Shorten the prompt';
  if (promptTokens > limits.maxInputLength) {
    return invalidRequest(
      `The prompt has ${promptTokens} tokens, more than this endpoint's max_input_length of ${limits.maxInputLength} tokens. ${shorten}.`,
      promptParam,
      'context_length_exceeded',
    );
  }
  if (request.maxTokens !== undefined && promptTokens + request.maxTokens > limits.contextSize) {
    return invalidRequest(
      `This endpoint's max_token_count is ${limits.contextSize} tokens, but the request needs ${promptTokens + request.maxTokens} ` +
        `(${promptTokens} prompt tokens + ${request.maxTokens} ${request.maxTokensParam}). ${shorten} or lower ${request.maxTokensParam}.`,
      request.maxTokensParam,
      'context_length_exceeded',
    );
  }
  if (promptTokens >= limits.contextSize) {
    return invalidRequest(
      `The prompt has ${promptTokens} tokens, which fills this endpoint's max_token_count of ${limits.contextSize} tokens and leaves no room for a completion.`,
      promptParam,
      'context_length_exceeded',
    );
  }
  return undefined;
}
