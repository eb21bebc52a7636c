/**
 * Renders chat messages into prompt tokens with the model's own Jinja chat template
 * (`tokenizer.chat_template` in the GGUF).
 *
 * node-llama-cpp's JinjaTemplateChatWrapper does the rendering: it runs the template with
 * @huggingface/jinja and takes `additionalRenderParameters`, which is where the request's
 * `chat_template_kwargs` (and `add_generation_prompt`) go. It also keeps message text apart from
 * template text while tokenizing, so a user typing "<|im_end|>" gets plain text, not a control
 * token: only what the template itself writes is parsed for special tokens.
 *
 * With tools (or tool turns in the conversation) a second wrapper renders, one that reads the
 * template's tool-call syntax (node-llama-cpp's `functionCallMessageTemplate: "auto"`): the tools
 * go to the template as `tools`, an assistant's calls as its `tool_calls` and each `tool` message
 * as the result of the call it answers: as sent to a template that writes it as text, else the JSON
 * value it holds (or the text). A template that knows no tools gets them in its
 * system prompt, in node-llama-cpp's own syntax.
 *
 * The parts: chat-history.ts (the messages as node-llama-cpp's chat history), prompt-tokens.ts
 * (the rendered template to tokens).
 */
import {
  JinjaTemplateChatWrapper,
  LlamaText,
  SpecialTokensText,
  type ChatModelFunctions,
  type LlamaModel,
  type Token,
  type Tokenizer,
} from 'node-llama-cpp';
import type { ChatMessage } from '../domain/chat-request.js';
import type { EngineError } from './openai-errors.js';
import type { ToolDefinition } from '../domain/tools.js';
import { historyItem, historyWithTools } from './chat-history.js';
import { cachingTokenizer, tokenizeInTurns } from './prompt-tokens.js';
import type { ToolSyntax } from './tool-calls.js';
import { endsInsideThinkBlock, THINK_CLOSE, THINK_OPEN } from './reasoning.js';

export type RenderedPrompt = {
  /** The rendered template (message text included), for logs and tests. */
  text: string;
  tokens: Token[];
  /** The template left a `<think>` block open for the model to continue. */
  opensThinkBlock: boolean;
};

/** UTF-8 bytes of a rendered prompt: of message text (tokenized as text), and of template text (special tokens parsed). */
export type PromptBytes = { text: number; special: number };

export class ChatTemplateError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ChatTemplateError';
  }
}

/** Distinct `chat_template_kwargs` seen recently; each needs its own wrapper instance. */
const WRAPPER_CACHE_SIZE = 32;
/**
 * Rendered prompts kept, by conversation and kwargs: rendering runs the Jinja template several
 * times and tokenizes the message text, a large share of a short request, and the same
 * conversation comes back (fixed prompts, retries, load tests). Conversations whose key is longer
 * than PROMPT_CACHE_MAX_CHARS are rendered every time.
 */
const PROMPT_CACHE_SIZE = 64;
const PROMPT_CACHE_MAX_CHARS = 16 * 1024;
/** A template calling a clock (`strftime_now`, as Llama 3's does) renders differently over time: never cached. */
const CLOCK_FUNCTIONS = /strftime_now|\bnow\s*\(/;

export type PromptRendererOptions = {
  /** Prepend BOS when the model wants one and the template did not write it. */
  addSpecialTokens: boolean;
};

/** `tokens` with BOS first when `add` is on (tokenizer_add_special_tokens), the model wants one, and it is not there yet. */
export function withBos(model: LlamaModel, tokens: Token[], add: boolean): Token[] {
  const bos = model.tokens.bos;
  return add && bos != null && model.tokens.shouldPrependBosToken && tokens[0] !== bos ? [bos, ...tokens] : tokens;
}

export class ChatPromptRenderer {
  readonly template: string;
  /** The model knows think blocks (template or vocabulary): reasoning is split from content. */
  readonly supportsThinking: boolean;
  /** Token ids of `<think>` / `</think>` when they are single tokens. */
  readonly thinkTagTokens: ReadonlySet<Token>;
  private readonly wrappers = new Map<string, JinjaTemplateChatWrapper>();
  /** Each tools wrapper's call syntax, read once. */
  private readonly syntaxes = new WeakMap<JinjaTemplateChatWrapper, ToolSyntax>();
  private readonly prompts = new Map<string, RenderedPrompt>();
  private readonly cachePrompts: boolean;
  /** model.tokenizer, remembering the tokens of template text (only that: message text is always tokenized). */
  private readonly tokenizer: Tokenizer;

  /** Long message text may be tokenized in pieces: byte-level BPE, whose pre-tokenizer never merges across `x| y` (see `textPieces`). */
  private readonly splitText: boolean;

  constructor(
    private readonly model: LlamaModel,
    private readonly options: PromptRendererOptions,
  ) {
    this.splitText = (model.vocabularyType as string) === 'bpe';
    this.tokenizer = cachingTokenizer(model.tokenizer);
    const template = model.fileInfo.metadata.tokenizer?.chat_template;
    if (typeof template !== 'string' || template.trim() === '') {
      throw new ChatTemplateError('The model file has no chat template (tokenizer.chat_template), so it cannot serve chat completions.');
    }
    this.template = template;
    this.cachePrompts = !CLOCK_FUNCTIONS.test(template);
    const tagTokens = [THINK_OPEN, THINK_CLOSE].map((tag) => model.tokenize(tag, true));
    this.thinkTagTokens = new Set(tagTokens.filter((tokens) => tokens.length === 1).map((tokens) => tokens[0]!));
    this.supportsThinking = template.includes(THINK_OPEN) || this.thinkTagTokens.size === 2;
    // Fail at start-up, not on the first request, when the template cannot be rendered at all.
    this.wrapperFor({});
  }

  /** `tools`: those offered to the model (none: left out, as with `tool_choice: "none"`). */
  render(messages: readonly ChatMessage[], kwargs: Record<string, unknown>, tools?: readonly ToolDefinition[]): RenderedPrompt {
    const key = this.cachePrompts
      ? `${JSON.stringify(kwargs)}\u0000${JSON.stringify(messages)}\u0000${JSON.stringify(tools ?? null)}`
      : undefined;
    if (key === undefined || key.length > PROMPT_CACHE_MAX_CHARS) return this.renderNow(messages, kwargs, tools);
    let prompt = this.prompts.get(key);
    if (prompt !== undefined) {
      // Refresh its place in the LRU order.
      this.prompts.delete(key);
      this.prompts.set(key, prompt);
    } else {
      prompt = this.renderNow(messages, kwargs, tools);
      this.remember(key, prompt);
    }
    // A copy: callers may change the tokens without changing what is kept.
    return { ...prompt, tokens: prompt.tokens.slice() };
  }

  /**
   * As `render`, for serving: `refuse` sees the rendered prompt's size before anything is
   * tokenized (its error is the answer, issue 31), and tokenizing gives the event loop a turn
   * every YIELD_MS, so that a long prompt does not keep the engine from answering its health checks.
   */
  async renderInTurns(
    messages: readonly ChatMessage[],
    kwargs: Record<string, unknown>,
    tools: readonly ToolDefinition[] | undefined,
    refuse: (bytes: PromptBytes) => EngineError | undefined,
  ): Promise<RenderedPrompt | EngineError> {
    const key = this.cachePrompts
      ? `${JSON.stringify(kwargs)}\u0000${JSON.stringify(messages)}\u0000${JSON.stringify(tools ?? null)}`
      : undefined;
    const cached = key === undefined ? undefined : this.prompts.get(key);
    if (cached !== undefined) return this.render(messages, kwargs, tools);
    const contextText = this.contextOf(messages, kwargs, tools);
    const bytes: PromptBytes = { text: 0, special: 0 };
    for (const value of contextText.values) {
      if (typeof value === 'string') bytes.text += Buffer.byteLength(value);
      else if (value instanceof SpecialTokensText) bytes.special += Buffer.byteLength(value.value);
    }
    const refused = refuse(bytes);
    if (refused) return refused;
    const prompt = this.prompted(contextText, await tokenizeInTurns(contextText, this.tokenizer, this.splitText));
    if (key !== undefined && key.length <= PROMPT_CACHE_MAX_CHARS) this.remember(key, prompt);
    return { ...prompt, tokens: prompt.tokens.slice() };
  }

  /** How the model writes a tool call, as the tools wrapper read it from the template (or node-llama-cpp's own). */
  toolSyntax(kwargs: Record<string, unknown>): ToolSyntax {
    const wrapper = this.wrapperFor(kwargs, true);
    let syntax = this.syntaxes.get(wrapper);
    if (syntax === undefined) {
      const functions = wrapper.settings.functions;
      const text = (value: unknown) => (value == null ? '' : LlamaText(value as never).toString());
      const prefix = text(functions.call.prefix);
      syntax = {
        prefixes: [prefix, ...(functions.call.prefixAlternateMatches ?? []).map(text)].filter((p) => p.trim() !== ''),
        paramsPrefix: text(functions.call.paramsPrefix),
        suffix: text(functions.call.suffix),
        resultPrefix: text(functions.result.prefix).trim(),
      };
      this.syntaxes.set(wrapper, syntax);
    }
    return syntax;
  }

  private remember(key: string, prompt: RenderedPrompt): void {
    this.prompts.set(key, prompt);
    if (this.prompts.size > PROMPT_CACHE_SIZE) {
      const oldest = this.prompts.keys().next().value;
      if (oldest !== undefined) this.prompts.delete(oldest);
    }
  }

  private renderNow(messages: readonly ChatMessage[], kwargs: Record<string, unknown>, tools?: readonly ToolDefinition[]): RenderedPrompt {
    const contextText = this.contextOf(messages, kwargs, tools);
    return this.prompted(contextText, contextText.tokenize(this.tokenizer));
  }

  /** The rendered template (a template that cannot render these messages throws ChatTemplateError). */
  private contextOf(messages: readonly ChatMessage[], kwargs: Record<string, unknown>, tools?: readonly ToolDefinition[]): LlamaText {
    const withTools = tools !== undefined || messages.some((m) => m.role === 'tool' || m.toolCalls !== undefined);
    const wrapper = this.wrapperFor(kwargs, withTools);
    const chatHistory = withTools ? historyWithTools(messages, verbatimResults.has(wrapper)) : messages.map(historyItem);
    const availableFunctions: ChatModelFunctions | undefined = tools
      ? Object.fromEntries(
          tools.map((t) => [t.name, { ...(t.description ? { description: t.description } : {}), params: t.parameters as never }]),
        )
      : undefined;
    let contextText;
    try {
      ({ contextText } = wrapper.generateContextState({
        chatHistory,
        ...(availableFunctions ? { availableFunctions } : {}),
      }));
    } catch (error) {
      // Templates reject conversations with raise_exception (e.g. "roles must alternate"): that reason is the
      // client's to read. A JavaScript error (a TypeError in the rendering) names our internals, not the input.
      const internal = error instanceof TypeError || error instanceof RangeError || error instanceof ReferenceError;
      const reason = internal ? 'the rendering failed on them' : error instanceof Error ? error.message : String(error);
      throw new ChatTemplateError(`The model's chat template cannot render these messages: ${reason}`, { cause: error });
    }
    return contextText;
  }

  /** The prompt of a rendered template and its tokens. */
  private prompted(contextText: LlamaText, tokenized: Token[]): RenderedPrompt {
    const tokens = withBos(this.model, tokenized, this.options.addSpecialTokens);

    // Only text the template wrote after the last message decides whether a think block is left
    // open: a user quoting "<think>" must not switch the answer into reasoning.
    let tail = '';
    for (let i = contextText.values.length - 1; i >= 0; i--) {
      const value = contextText.values[i];
      if (typeof value === 'string') break;
      if (value instanceof SpecialTokensText) tail = value.value + tail;
    }
    return {
      text: contextText.toString(),
      tokens,
      opensThinkBlock: this.supportsThinking && endsInsideThinkBlock(tail),
    };
  }

  private wrapperFor(kwargs: Record<string, unknown>, tools = false): JinjaTemplateChatWrapper {
    const key = `${tools ? 'tools' : 'plain'}${JSON.stringify(kwargs)}`;
    const cached = this.wrappers.get(key);
    if (cached != null) {
      // Refresh its place in the LRU order.
      this.wrappers.delete(key);
      this.wrappers.set(key, cached);
      return cached;
    }
    let wrapper: JinjaTemplateChatWrapper;
    try {
      wrapper = new JinjaTemplateChatWrapper({
        template: this.template,
        // null: the wrapper sets no enable_thinking of its own; the request's kwargs decide, and
        // without them the template's default applies.
        reasoning: null,
        // The caller's variables first, then ours, so a request cannot turn off the generation prompt.
        additionalRenderParameters: { ...kwargs, add_generation_prompt: true },
        // Render the conversation as sent (no merging of consecutive messages of one role).
        joinAdjacentMessagesOfTheSameType: false,
        // Without tools, skip reading the template's tool-call syntax (the prompt is the template's alone).
        functionCallMessageTemplate: tools ? 'auto' : 'noJinja',
      });
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ChatTemplateError(`The model's chat template cannot be rendered with these chat_template_kwargs: ${reason}`, {
        cause: error,
      });
    }
    // A template that writes a tool message's content as text gets the client's text as it is: node-llama-cpp would
    // write a result as JSON (`"Sunny"` with its quotes, `1.50` as `1.5`). One that serializes the result itself
    // (`| tojson`) gets the parsed value, as before. `_stringifyFunctionResult` is node-llama-cpp's (internal, 3.x)
    // reading of the template; test/engine/tools.test.ts checks the rendering.
    const reading = wrapper as unknown as { _stringifyFunctionResult?: boolean };
    if (tools && reading._stringifyFunctionResult === true) {
      reading._stringifyFunctionResult = false;
      verbatimResults.add(wrapper);
    }
    this.wrappers.set(key, wrapper);
    if (this.wrappers.size > WRAPPER_CACHE_SIZE) {
      const oldest = this.wrappers.keys().next().value;
      if (oldest !== undefined) this.wrappers.delete(oldest);
    }
    return wrapper;
  }
}

/** Tools wrappers whose template writes a tool message's content as text: the content goes to it unchanged. */
const verbatimResults = new WeakSet<JinjaTemplateChatWrapper>();
