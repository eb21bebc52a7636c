/**
 * Chat completions over GraphQL: a `chatCompletion` subscription streams the
 * same chunks as the REST route (over graphql-ws and SSE), and the
 * `createChatCompletion` mutation returns the whole answer. Both go through
 * the chat router, so routing, limits, waking and cancellation are the same.
 */
import type { Failure } from '../../../domain/errors.js';
import { engineFailure, upstreamInvalid } from '../../../router/engine-call.js';
import type { Outcome } from '../../../router/chat-router.js';
import { relayChunks } from '../../../router/relay-chunks.js';
import { collectJson, UPSTREAM_NOT_JSON, UpstreamCutError } from '../../../router/relay.js';
import { failureOf } from '../../failures.js';
import { builder, type SchemaTypesOf } from '../builder.js';
import { chatErrorOf, graphqlChatError as chatGraphqlError, restFieldName, type ChatError } from '../errors.js';
import { failureInGraphqlNames } from '../field-names.js';
import { SafeInt } from './safe-int.js';

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A tool call as OpenAI sends it (in a delta, with its index; its fields may come in pieces). */
interface ToolCall {
  index?: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

interface Delta {
  role?: string;
  content?: string;
  reasoning_content?: string;
  tool_calls?: ToolCall[];
}

interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

interface TokenLogprob extends TopLogprob {
  top_logprobs: TopLogprob[];
}

/** A choice's `logprobs` (absent or null unless asked for). */
type Logprobs = { content: TokenLogprob[] | null } | null | undefined;

interface Chunk {
  id: string;
  created: number;
  model: string;
  choices: { index: number; delta: Delta; logprobs?: Logprobs; finish_reason: string | null }[];
  usage?: Usage | null;
}

interface Completion {
  id: string;
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: string; content: string | null; reasoning_content?: string; tool_calls?: ToolCall[] };
    logprobs?: Logprobs;
    finish_reason: string | null;
  }[];
  usage: Usage;
}

/** The input fields of type JSON (below them, an error's `param` keeps the client's own key names). */
const JSON_FIELDS: ReadonlySet<string> = new Set(['toolCalls', 'logitBias', 'chatTemplateKwargs', 'responseFormat', 'tools', 'toolChoice']);

const ChatMessageInput = builder.inputType('ChatMessageInput', {
  fields: (t) => ({
    role: t.string({ required: true, description: 'system, user, assistant or tool' }),
    content: t.string({ description: 'Required, except in an assistant message that only calls tools.' }),
    toolCalls: t.field({
      type: 'JSON',
      description: 'An assistant message\'s calls, OpenAI `tool_calls`: `[{id, type: "function", function: {name, arguments}}]`.',
    }),
    toolCallId: t.string({ description: 'A tool message: the id of the call it answers.' }),
  }),
});

const ChatCompletionInput = builder.inputType('ChatCompletionInput', {
  description: 'An OpenAI chat-completion request; `model` is the endpoint id.',
  fields: (t) => ({
    model: t.id({ required: true }),
    messages: t.field({ type: [ChatMessageInput], required: true }),
    temperature: t.float(),
    topP: t.float(),
    topK: t.int({ description: 'Sample from the k most likely tokens only. @default 0 (no filtering)' }),
    minP: t.float({ description: 'Drop tokens less likely than min_p × the most likely one. @default 0' }),
    presencePenalty: t.float({ description: 'OpenAI `presence_penalty`, −2 to 2. @default 0' }),
    frequencyPenalty: t.float({ description: 'OpenAI `frequency_penalty`, −2 to 2. @default 0' }),
    repetitionPenalty: t.float({ description: 'Above 0, at most 10; 1 is none. @default 1' }),
    logitBias: t.field({
      type: 'JSON',
      description: 'OpenAI `logit_bias`: token ids (as strings) to a bias from −100 to 100; −100 bans the token.',
    }),
    logprobs: t.boolean({ description: "Return each answer token's log probability. @default false" }),
    topLogprobs: t.int({ description: 'With logprobs: the most likely alternatives per token, 0 to 20. @default 0' }),
    maxTokens: t.int(),
    stop: t.stringList(),
    seed: t.field({
      type: SafeInt,
      description: 'OpenAI `seed`: an integer within ±(2^53 − 1), as the REST route takes (a 32-bit Int is one).',
    }),
    chatTemplateKwargs: t.field({ type: 'JSON', description: 'Passed to the chat template; `enable_thinking` toggles reasoning.' }),
    includeUsage: t.boolean({ description: 'Streams a final chunk with the token usage. @default false' }),
    responseFormat: t.field({
      type: 'JSON',
      description:
        'OpenAI `response_format`: `{type: "json_object"}`, or `{type: "json_schema", json_schema: {name, schema}}`; the JSON is enforced while the answer is generated. @default text',
    }),
    tools: t.field({
      type: 'JSON',
      description: 'OpenAI `tools`: `[{type: "function", function: {name, description, parameters}}]`, the tools the model may call.',
    }),
    toolChoice: t.field({
      type: 'JSON',
      description: 'OpenAI `tool_choice`: "none", "auto", "required", or `{type: "function", function: {name}}`. @default auto',
    }),
    parallelToolCalls: t.boolean({ description: 'Whether an answer may call several tools. @default true' }),
  }),
});

type Input = typeof ChatCompletionInput.$inferInput;

/** The OpenAI body the router reads; GraphQL's camelCase names become the documented ones. */
/** The input fields passed on as the REST field of the same name in snake_case (`topP` → `top_p`), when set. */
const PASSED_FIELDS = [
  'temperature',
  'topP',
  'topK',
  'minP',
  'presencePenalty',
  'frequencyPenalty',
  'repetitionPenalty',
  'logitBias',
  'logprobs',
  'topLogprobs',
  'maxTokens',
  'stop',
  'seed',
  'chatTemplateKwargs',
  'responseFormat',
  'tools',
  'toolChoice',
  'parallelToolCalls',
] as const satisfies readonly (keyof Input)[];

/**
 * The REST names a validator's message may use for what this input sent (`max_tokens`, `tool_call_id`, and the
 * endpoint's limits, which GraphQL names `maxTokenCount`, `maxInputLength`): GraphQL's errors read them as GraphQL's.
 */
const CHAT_REST_NAMES: ReadonlySet<string> = new Set([
  ...['model', 'messages', 'toolCalls', 'toolCallId', ...PASSED_FIELDS].map(restFieldName),
  'max_token_count',
  'max_input_length',
]);

/** A chat failure in GraphQL's names (field-names.ts); `chatErrorOf` and `chatGraphqlError` name its `param` so too. */
const inGraphqlNames = (failure: Failure) => failureInGraphqlNames(failure, (name) => CHAT_REST_NAMES.has(name), JSON_FIELDS);
const chatError = (failure: Failure) => chatErrorOf(inGraphqlNames(failure), JSON_FIELDS);
const graphqlChatError = (failure: Failure) => chatGraphqlError(inGraphqlNames(failure), JSON_FIELDS);

/** A message's fields by their REST names (`toolCallId` → `tool_call_id`), when set. */
const restMessage = (message: Input['messages'][number]) =>
  Object.fromEntries(Object.entries(message).flatMap(([name, value]) => (value == null ? [] : [[restFieldName(name), value]])));

function toOpenAIBody(input: Input, stream: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = { model: String(input.model), messages: input.messages.map(restMessage), stream };
  for (const field of PASSED_FIELDS) {
    const value = input[field];
    if (value != null) body[restFieldName(field)] = value;
  }
  if (stream && input.includeUsage) body.stream_options = { include_usage: true };
  return body;
}

const UsageRef = builder.objectRef<Usage>('ChatUsage').implement({
  fields: (t) => ({
    promptTokens: t.int({ resolve: (u) => u.prompt_tokens }),
    completionTokens: t.int({ resolve: (u) => u.completion_tokens }),
    totalTokens: t.int({ resolve: (u) => u.total_tokens }),
  }),
});

const ToolCallFunctionRef = builder.objectRef<NonNullable<ToolCall['function']>>('ChatToolCallFunction').implement({
  fields: (t) => ({
    name: t.string({ nullable: true, resolve: (f) => f.name ?? null }),
    arguments: t.string({
      nullable: true,
      description: 'The arguments as JSON text, as the model wrote them.',
      resolve: (f) => f.arguments ?? null,
    }),
  }),
});

const ToolCallRef = builder.objectRef<ToolCall>('ChatToolCall').implement({
  description: 'A tool the answer calls (in a chunk, its index says which call a piece belongs to).',
  fields: (t) => ({
    index: t.int({ nullable: true, resolve: (c) => c.index ?? null }),
    id: t.string({ nullable: true, resolve: (c) => c.id ?? null }),
    type: t.string({ nullable: true, resolve: (c) => c.type ?? null }),
    function: t.field({ type: ToolCallFunctionRef, nullable: true, resolve: (c) => c.function ?? null }),
  }),
});

const toolCallsField = <T extends { tool_calls?: ToolCall[] }>(t: PothosSchemaTypes.ObjectFieldBuilder<SchemaTypesOf, T>) =>
  t.field({
    type: [ToolCallRef],
    nullable: true,
    description: 'The tools called (finish reason `tool_calls`).',
    resolve: (m) => m.tool_calls ?? null,
  });

const DeltaRef = builder.objectRef<Delta>('ChatDelta').implement({
  fields: (t) => ({
    role: t.string({ nullable: true, resolve: (d) => d.role ?? null }),
    toolCalls: toolCallsField(t),
    content: t.string({ nullable: true, resolve: (d) => d.content ?? null }),
    reasoningContent: t.string({
      nullable: true,
      description: 'Text of the think block, when the model reasons.',
      resolve: (d) => d.reasoning_content ?? null,
    }),
  }),
});

const TopLogprobRef = builder.objectRef<TopLogprob>('ChatTopLogprob').implement({
  fields: (t) => ({
    token: t.exposeString('token'),
    logprob: t.exposeFloat('logprob'),
    bytes: t.exposeIntList('bytes', { description: "The token's text as UTF-8 bytes." }),
  }),
});

const TokenLogprobRef = builder.objectRef<TokenLogprob>('ChatTokenLogprob').implement({
  description: 'One answer token: its text, its log probability, and the most likely alternatives (topLogprobs).',
  fields: (t) => ({
    token: t.exposeString('token'),
    logprob: t.exposeFloat('logprob'),
    bytes: t.exposeIntList('bytes', { description: "The token's text as UTF-8 bytes." }),
    topLogprobs: t.field({ type: [TopLogprobRef], resolve: (e) => e.top_logprobs }),
  }),
});

const logprobsField = <T extends { logprobs?: Logprobs }>(t: PothosSchemaTypes.ObjectFieldBuilder<SchemaTypesOf, T>) =>
  t.field({
    type: [TokenLogprobRef],
    nullable: true,
    description: "The tokens' log probabilities, when the input asked for logprobs.",
    resolve: (c) => c.logprobs?.content ?? null,
  });

const ChunkChoiceRef = builder.objectRef<Chunk['choices'][number]>('ChatChunkChoice').implement({
  fields: (t) => ({
    index: t.exposeInt('index'),
    delta: t.field({ type: DeltaRef, resolve: (c) => c.delta }),
    logprobs: logprobsField(t),
    finishReason: t.string({ nullable: true, resolve: (c) => c.finish_reason }),
  }),
});

const ChunkRef = builder.objectRef<Chunk>('ChatCompletionChunk').implement({
  fields: (t) => ({
    id: t.exposeString('id'),
    created: t.exposeInt('created'),
    model: t.exposeString('model'),
    choices: t.field({ type: [ChunkChoiceRef], resolve: (c) => c.choices }),
    usage: t.field({ type: UsageRef, nullable: true, resolve: (c) => c.usage ?? null }),
  }),
});

const MessageRef = builder.objectRef<Completion['choices'][number]['message']>('ChatMessage').implement({
  fields: (t) => ({
    role: t.exposeString('role'),
    content: t.string({ nullable: true, description: 'Null when the answer only calls tools.', resolve: (m) => m.content }),
    reasoningContent: t.string({ nullable: true, resolve: (m) => m.reasoning_content ?? null }),
    toolCalls: toolCallsField(t),
  }),
});

const ChoiceRef = builder.objectRef<Completion['choices'][number]>('ChatChoice').implement({
  fields: (t) => ({
    index: t.exposeInt('index'),
    message: t.field({ type: MessageRef, resolve: (c) => c.message }),
    logprobs: logprobsField(t),
    finishReason: t.string({ nullable: true, resolve: (c) => c.finish_reason }),
  }),
});

const CompletionRef = builder.objectRef<Completion>('ChatCompletion').implement({
  fields: (t) => ({
    id: t.exposeString('id'),
    created: t.exposeInt('created'),
    model: t.exposeString('model'),
    choices: t.field({ type: [ChoiceRef], resolve: (c) => c.choices }),
    usage: t.field({ type: UsageRef, resolve: (c) => c.usage }),
  }),
});

const ChatCompletionError = builder.objectRef<ChatError>('ChatCompletionError').implement({
  description: 'The request could not be served: the same error the REST route answers, with its HTTP status.',
  fields: (t) => ({
    message: t.exposeString('message'),
    errorType: t.exposeString('errorType'),
    code: t.exposeString('code', { nullable: true }),
    param: t.exposeString('param', { nullable: true }),
    status: t.exposeInt('status'),
    retryAfter: t.exposeInt('retryAfter', { nullable: true, description: 'Seconds to wait before retrying (429 and 503).' }),
  }),
});

const CreateChatCompletionSuccess = builder.objectRef<{ completion: Completion }>('CreateChatCompletionSuccess').implement({
  fields: (t) => ({ completion: t.field({ type: CompletionRef, resolve: (p) => p.completion }) }),
});

const CreateChatCompletionResult = builder.unionType('CreateChatCompletionResult', {
  types: [CreateChatCompletionSuccess, ChatCompletionError],
  resolveType: (value) => ('completion' in value ? 'CreateChatCompletionSuccess' : 'ChatCompletionError'),
});

/**
 * An outcome read whole: the completion, or the failure (the core's, the replica's error answer read into the error
 * model, or its answer cut, past its bounds or not JSON: the REST route's 502, in-band as every other).
 */
async function wholeAnswer(outcome: Outcome): Promise<{ completion: Completion } | { failure: Failure }> {
  if (outcome.kind === 'failure') return outcome;
  const { routed } = outcome;
  let body: Record<string, unknown>;
  try {
    body = await collectJson(routed);
  } catch (error) {
    if (error instanceof UpstreamCutError) return { failure: failureOf(error) };
    throw error;
  }
  if ('error' in body || routed.upstream.status !== 200) return { failure: engineFailure({ status: routed.upstream.status, body }) };
  return { completion: body as unknown as Completion };
}

builder.mutationField('createChatCompletion', (t) =>
  t.field({
    type: CreateChatCompletionResult,
    args: { input: t.arg({ type: ChatCompletionInput, required: true }) },
    resolve: async (_, { input }, { principal, chat, signal }) => {
      const answer = await wholeAnswer(await chat.answer(principal, toOpenAIBody(input, false), signal));
      return 'failure' in answer ? chatError(answer.failure) : answer;
    },
  }),
);

builder.subscriptionField('chatCompletion', (t) =>
  t.field({
    type: ChunkRef,
    description: 'Streams a chat completion chunk by chunk. Closing the subscription cancels the generation.',
    args: { input: t.arg({ type: ChatCompletionInput, required: true }) },
    subscribe: async function* (_, { input }, { principal, chat, signal }) {
      const cancel = new AbortController();
      const stop = () => cancel.abort();
      signal.addEventListener('abort', stop, { once: true });
      try {
        const outcome = await chat.answer(principal, toOpenAIBody(input, true), cancel.signal);
        if (outcome.kind !== 'stream') {
          // Refused, or the replica's error answer (an answer that is not a stream where one was asked is not one either).
          const answer = await wholeAnswer(outcome);
          throw graphqlChatError('failure' in answer ? answer.failure : upstreamInvalid());
        }
        try {
          for await (const chunk of relayChunks(outcome.routed)) {
            // The engine's error event inside the stream (it shuts down, its generation failed): the stream's error,
            // with the engine's code, not a chunk (which has no id).
            if ('error' in chunk) throw graphqlChatError(engineFailure({ status: 502, body: chunk }));
            yield chunk as unknown as Chunk;
          }
        } catch (error) {
          // An event past its bound or not JSON: the chat error it is (502 upstream_invalid), as the engine's own.
          // A cut stays the UPSTREAM_DISCONNECTED error it is (the GraphQL table's, docs/chat-api.md).
          if (error instanceof UpstreamCutError && error.code === UPSTREAM_NOT_JSON.code) throw graphqlChatError(failureOf(error));
          throw error;
        }
      } finally {
        signal.removeEventListener('abort', stop);
        cancel.abort();
      }
    },
    resolve: (chunk) => chunk,
  }),
);
