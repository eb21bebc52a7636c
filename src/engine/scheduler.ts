/**
 * Who generates when, and with what: the context's sequences (one per concurrent generation,
 * `sequences` in all) handed out first come, first served through a {@link Semaphore}, the
 * request's checks and prompt (rendered and counted before it waits), and the generation itself on
 * the sequence it was given. All sequences belong to one llama.cpp context, so every request
 * holding one decodes in the same batches as the others.
 */
import type { LlamaContext, LlamaContextSequence, LlamaModel } from 'node-llama-cpp';
import { checkTokenLimits, type ChatRequest, type GenerationRequest } from '../domain/chat-request.js';
import { invalidRequest, refusalOf, type EngineError } from './openai-errors.js';
import type { CompletionRequest } from '../domain/completion-request.js';
import { checkJsonSchema } from '../domain/json-schema-subset.js';
import { forcedCallsSchema } from '../domain/tools.js';
import { Semaphore } from '../util/semaphore.js';
import type { Token } from 'node-llama-cpp';
import { generate, reusablePrefix, type GenerationHooks, type GenerationParams, type GenerationResult } from './generation.js';
import { ChatTemplateError, type ChatPromptRenderer, type PromptBytes, type RenderedPrompt } from './prompt.js';
import type { Segment } from './reasoning.js';
import { resolveSampling, vocabularySize } from './sampling-options.js';
import { Grammars } from './structured-output.js';
import { toolPlan, type ToolPlan } from './tool-calls.js';
import { completionPromptTokens, detokenizeBody, tokenizePrompt, type TokenSettings } from './tokens.js';
import { promptTooLong, tokenCover, tokensAtLeast, type TokenCover } from './token-cover.js';
import type { TokenLogprob } from './logprobs.js';

export { SemaphoreAbortedError as QueueAbortedError } from '../util/semaphore.js';

export type SchedulerLimits = {
  contextSize: number;
  maxInputLength: number;
  skipSpecialTokens: boolean;
  /** Keep the KV cache of a prompt prefix a sequence already holds (generation.ts). */
  reusePrefix: boolean;
  /** Prepend BOS to a raw prompt when the model wants one (the chat template's prompts: see prompt.ts). */
  addSpecialTokens: boolean;
};

/** A forced call's grammar (from its tools' parameters) that llama.cpp cannot take. */
const FORCED_CALL_REFUSED = invalidRequest(
  'tools cannot be enforced as a forced call: llama.cpp refused the grammar made from their parameters',
  'tools',
);

/**
 * The field a template that cannot render is about: the messages, unless it is one of the request's
 * chat_template_kwargs. @huggingface/jinja refuses a variable named like one it declares itself
 * ("Variable already declared: namespace"); the request's checks refuse the names it declares
 * today, and this names the member should a later version declare more. A wrapper that cannot be
 * made (prompt.ts: "cannot be rendered with these chat_template_kwargs") is the kwargs' fault too:
 * the one without kwargs was made at start-up.
 */
export function templateErrorParam(error: ChatTemplateError, request: Pick<ChatRequest, 'chatTemplateKwargs'>): string {
  // prompt.ts puts the template engine's reason in the message.
  const name = /Variable already declared: ([A-Za-z_][A-Za-z0-9_]*)/.exec(error.message)?.[1];
  if (name !== undefined && Object.hasOwn(request.chatTemplateKwargs, name)) return `chat_template_kwargs.${name}`;
  return error.message.includes('cannot be rendered with these chat_template_kwargs') ? 'chat_template_kwargs' : 'messages';
}

/** A request checked and rendered: what generation needs. */
export type PreparedRequest = { params: GenerationParams; promptTokens: number };

/** A sequence held by one request until release(). */
export type SequenceLease = {
  /**
   * Generates on the held sequence; `onSegment` gets the text as it becomes final, and
   * `onLogprobs` (with logprobs) the entries of its tokens, just before it.
   */
  generate(
    params: GenerationParams,
    onSegment: (segment: Segment) => void,
    signal: AbortSignal,
    onLogprobs?: (entries: TokenLogprob[]) => void,
  ): Promise<GenerationResult>;
  /** Gives the sequence back (idempotent); the oldest waiting request gets it next. */
  release(): void;
};

/**
 * When to decode the batch of tokens that sequences have queued. node-llama-cpp's default waits one
 * event-loop turn (setImmediate) so that other sequences can add theirs, unless every sequence of
 * the context has one queued. With fewer requests than sequences (one request: always), every
 * token then waits a turn for sequences that nobody uses: about a tenth of a decode step of the
 * tiny model. Here the batch goes at once when every sequence a request holds has queued its
 * tokens, and waits the turn, as before, while some holder has not (it may be about to).
 * `_queuedDecodeSequenceIds` is node-llama-cpp's own count (internal, 3.x); without it, the default.
 */
export function dispatchWhenAllQueued(context: () => LlamaContext | undefined, active: () => number): (dispatch: () => void) => void {
  return (dispatch) => {
    const queued = (context() as unknown as { _queuedDecodeSequenceIds?: { size: number } } | undefined)?._queuedDecodeSequenceIds?.size;
    if (queued !== undefined && queued >= active()) dispatch();
    else setImmediate(dispatch);
  };
}

export class Scheduler {
  private readonly free: LlamaContextSequence[];
  private readonly semaphore: Semaphore;
  /** Tokens generated since start, cancelled generations included (throughput metrics). */
  totalCompletionTokens = 0;
  private readonly grammars: Grammars;
  private readonly vocabulary: number | undefined;
  /** The most text one token covers, to refuse a prompt that cannot fit before it is tokenized. */
  private readonly cover: TokenCover;

  constructor(
    private readonly model: LlamaModel,
    private readonly renderer: ChatPromptRenderer,
    sequences: readonly LlamaContextSequence[],
    private readonly limits: SchedulerLimits,
    log?: (line: string) => void,
  ) {
    if (sequences.length === 0) throw new Error('Scheduler needs at least one sequence');
    this.grammars = new Grammars(model.llama, log);
    this.vocabulary = vocabularySize(model);
    this.cover = tokenCover(model);
    this.free = [...sequences];
    this.semaphore = new Semaphore(sequences.length);
  }

  /** Sequences generating now. */
  get active(): number {
    return this.semaphore.active;
  }

  /** Requests waiting for a sequence. */
  get queued(): number {
    return this.semaphore.waiting;
  }

  private get tokenSettings(): TokenSettings {
    return {
      addSpecialTokens: this.limits.addSpecialTokens,
      skipSpecialTokens: this.limits.skipSpecialTokens,
      vocabulary: this.vocabulary,
      cover: this.cover.special,
      maxInputLength: this.limits.maxInputLength,
      maxIds: this.limits.contextSize,
    };
  }

  /** A raw prompt's tokens (`{ prompt }`), or its 400. */
  tokenizePrompt(body: unknown): Token[] | EngineError {
    return tokenizePrompt(this.model, this.tokenSettings, body);
  }

  /** The text of `{ tokens }`, or its 400. */
  detokenize(body: unknown): string | EngineError {
    return detokenizeBody(this.model, this.tokenSettings, body);
  }

  /**
   * Renders the prompt with the chat template (a template that cannot render is the request's 400),
   * and tokenizes it, unless its text is too long to fit in max_input_length tokens whatever they are.
   */
  async render(request: ChatRequest): Promise<RenderedPrompt | EngineError> {
    const { maxInputLength } = this.limits;
    const { text, special } = this.cover;
    const refuse = (bytes: PromptBytes): EngineError | undefined => {
      // Message text is tokenized as text; template text (tools, calls) with its special tokens parsed.
      const total = bytes.text + bytes.special;
      const byText = tokensAtLeast(bytes.text, text, maxInputLength);
      if (byText !== undefined) return promptTooLong(byText, bytes.text, text!, maxInputLength, 'messages');
      const byAll = tokensAtLeast(total, special, maxInputLength);
      return byAll === undefined ? undefined : promptTooLong(byAll, total, special!, maxInputLength, 'messages');
    };
    try {
      return await this.renderer.renderInTurns(request.messages, request.chatTemplateKwargs, request.tools?.definitions, refuse);
    } catch (error) {
      if (error instanceof ChatTemplateError)
        return invalidRequest(error.message, templateErrorParam(error, request), 'chat_template_error');
      throw error;
    }
  }

  /** Every check of a chat request, before it waits for a sequence: its generation parameters, or its error. */
  async prepare(request: ChatRequest): Promise<PreparedRequest | EngineError> {
    const prompt = await this.render(request);
    if ('status' in prompt) return prompt;
    const reasoning = { enabled: this.renderer.supportsThinking, startInReasoning: prompt.opensThinkBlock };
    const { tools } = request;
    if (!tools) return this.prepareTokens(request, prompt.tokens, 'messages', reasoning);
    const plan = toolPlan(tools, this.renderer.toolSyntax(request.chatTemplateKwargs));
    if (plan.mode === 'auto') {
      // A model imagining a tool's result has ended its turn: the answer ends there.
      const stop = plan.syntax.resultPrefix === '' ? request.stop : [...request.stop, plan.syntax.resultPrefix];
      return this.prepareTokens({ ...request, stop }, prompt.tokens, 'messages', reasoning, plan);
    }
    // A forced call: the answer is the JSON list of calls, by a grammar.
    const schema = checkJsonSchema(forcedCallsSchema(tools));
    if ('error' in schema)
      return invalidRequest(
        `tools cannot be enforced as a forced call: their parameters make too large a grammar (${schema.error})`,
        'tools',
      );
    const format = { type: 'json_schema', name: 'tool_calls', schema: schema.schema, strict: true } as const;
    // The grammar ends the answer; a stop string would cut the JSON.
    return this.prepareTokens({ ...request, responseFormat: format, stop: [] }, prompt.tokens, 'messages', reasoning, plan);
  }

  /** The same for a text completion: its raw prompt, no chat template, no think block. */
  async prepareCompletion(request: CompletionRequest): Promise<PreparedRequest | EngineError> {
    const tokens = completionPromptTokens(this.model, this.tokenSettings, request.prompt);
    if ('status' in tokens) return tokens;
    const param = 'text' in request.prompt ? 'prompt' : request.prompt.field;
    // A prompt of text only the tokenizer drops (nothing to continue from).
    if (tokens.length === 0) return invalidRequest(`${param} has no tokens: there is nothing to complete`, param);
    return this.prepareTokens(request, tokens, param, { enabled: false, startInReasoning: false });
  }

  private async prepareTokens(
    request: GenerationRequest,
    tokens: Token[],
    promptParam: 'messages' | 'prompt' | 'tokens',
    reasoning: GenerationParams['reasoning'],
    tools?: ToolPlan,
  ): Promise<PreparedRequest | EngineError> {
    const promptTokens = tokens.length;
    const overLimit = checkTokenLimits(promptTokens, request, this.limits, promptParam);
    if (overLimit) return refusalOf(overLimit);
    const sampling = resolveSampling(this.model, this.vocabulary, request.sampling);
    if ('status' in sampling) return sampling;
    // Text (most requests) takes no grammar, and no turn of the event loop to learn it.
    const format = request.responseFormat;
    const grammar =
      format.type === 'text'
        ? undefined
        : await this.grammars.forFormat(format, tools?.mode === 'forced' ? FORCED_CALL_REFUSED : undefined);
    if (grammar && 'status' in grammar) return grammar;
    return {
      promptTokens,
      params: {
        promptTokens: tokens,
        maxTokens: request.maxTokens ?? this.limits.contextSize - promptTokens,
        temperature: request.temperature,
        topP: request.topP,
        seed: request.seed,
        stop: request.stop,
        reasoning,
        ...(grammar ? { grammar } : {}),
        ...(tools ? { tools } : {}),
        sampling,
      },
    };
  }

  /**
   * Resolves with a sequence once one is free and every earlier request was served; rejects with
   * QueueAbortedError when `signal` aborts first (the request leaves the queue). Of the free
   * sequences, the one holding the longest prefix of `prompt` (a conversation going on, a shared
   * system prompt), else the most recently used.
   */
  async acquire(signal: AbortSignal, prompt?: readonly Token[]): Promise<SequenceLease> {
    const permit = await this.semaphore.acquire(signal);
    const sequence = this.takeSequence(prompt);
    const output = {
      reusePrefix: this.limits.reusePrefix,
      skipSpecialTokens: this.limits.skipSpecialTokens,
      thinkTagTokens: this.renderer.thinkTagTokens,
    };
    const hooks: GenerationHooks = {
      onSegment: (_segment: Segment) => {},
      onToken: () => {
        this.totalCompletionTokens++;
      },
    };
    let released = false;
    return {
      generate: (params, onSegment, generationSignal, onLogprobs) => {
        hooks.onSegment = onSegment;
        hooks.onLogprobs = onLogprobs;
        return generate(sequence, this.model, params, output, hooks, generationSignal);
      },
      release: () => {
        if (released) return;
        released = true;
        this.free.push(sequence);
        permit.release();
      },
    };
  }

  private takeSequence(prompt: readonly Token[] | undefined): LlamaContextSequence {
    let best = this.free.length - 1;
    if (this.limits.reusePrefix && prompt !== undefined && this.free.length > 1) {
      let bestShared = -1;
      for (let i = this.free.length - 1; i >= 0; i--) {
        const shared = reusablePrefix(this.free[i]!.contextTokens, prompt);
        if (shared > bestShared) {
          best = i;
          bestShared = shared;
        }
      }
    }
    return this.free.splice(best, 1)[0]!;
  }
}
