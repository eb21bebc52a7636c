/**
 * One completion on one context sequence: evaluate the prompt, sample until EOS / a stop string /
 * max tokens / cancellation, and turn tokens into content and reasoning segments as they come.
 * Streaming and non-streaming responses both consume the same segments, so their text is equal.
 */
import { randomInt } from 'node:crypto';
import { LlamaGrammarEvaluationState, type LlamaContextSequence, type LlamaGrammar, type LlamaModel, type Token } from 'node-llama-cpp';
import { LogprobQueue, type TokenLogprob } from './logprobs.js';
import { ThinkSplitter, type Segment } from './reasoning.js';
import { PLAIN_SAMPLING, type EngineSampling } from './sampling-options.js';
import { IncrementalDetokenizer, StopStringMatcher } from './text-stream.js';
import type { ToolPlan } from './tool-calls.js';

/** How an answer ended: generation ends with 'stop' or 'length', and an answer of tool calls is reported as 'tool_calls'. */
export type FinishReason = 'stop' | 'length' | 'tool_calls';

export type GenerationParams = {
  promptTokens: Token[];
  maxTokens: number;
  temperature: number;
  topP: number;
  /** Undefined: a fresh random seed (node-llama-cpp would otherwise use the current second). */
  seed: number | undefined;
  stop: readonly string[];
  /** Split `<think>` blocks into reasoning segments. */
  reasoning: { enabled: boolean; startInReasoning: boolean };
  /** Tokens must follow this grammar (JSON output), from the answer's start: after the think block, if any. */
  grammar?: LlamaGrammar;
  /** top_k, min_p, penalties, logit_bias, logprobs (default: none of them). */
  sampling?: EngineSampling;
  /** The answer is read for tool calls (tool-calls.ts). */
  tools?: ToolPlan;
};

export type OutputOptions = {
  /**
   * Keep the KV cache of the tokens the prompt shares with what the sequence holds (the previous
   * request's prompt and answer) and evaluate only the rest, as llama.cpp's server and
   * node-llama-cpp's LlamaChatSession do. Off: the whole prompt is evaluated every time, so that
   * an answer never depends on what the sequence held before.
   */
  reusePrefix: boolean;
  skipSpecialTokens: boolean;
  /** Think-tag token ids: always rendered so the splitter sees them. */
  thinkTagTokens: ReadonlySet<Token>;
};

export type GenerationHooks = {
  /** Text of the answer or of the reasoning, in order, as soon as it is final. */
  onSegment(segment: Segment): void;
  /** Every sampled token (for load metrics). */
  onToken?(): void;
  /** With logprobs: the entries of the tokens whose text is out, called before that text's segments. */
  onLogprobs?(entries: TokenLogprob[]): void;
};

export type GenerationResult = {
  /** null: cancelled (client left or the server is stopping). */
  finishReason: FinishReason | null;
  completionTokens: number;
};

/**
 * How many tokens at the start of `held` (what a sequence has evaluated) `prompt` shares, at most
 * prompt.length − 1: the prompt's last token is always evaluated, for the logits of the first
 * completion token.
 */
export function reusablePrefix(held: readonly Token[], prompt: readonly Token[]): number {
  const max = Math.min(held.length, prompt.length - 1);
  let shared = 0;
  while (shared < max && held[shared] === prompt[shared]) shared++;
  return shared;
}

/**
 * Prepares `sequence` for `prompt`: keeps the shared prefix (when allowed and the model can erase
 * a suffix of its state: not recurrent, hybrid or sliding-window ones) and erases the rest.
 * Returns how many prompt tokens are already evaluated.
 */
export async function resetSequence(sequence: LlamaContextSequence, prompt: readonly Token[], reuse: boolean): Promise<number> {
  const start = reuse && !sequence.needsCheckpoints ? reusablePrefix(sequence.contextTokens, prompt) : 0;
  if (start === 0) await sequence.clearHistory();
  else if (start < sequence.nextTokenIndex) await sequence.eraseContextTokenRanges([{ start, end: sequence.nextTokenIndex }]);
  return start;
}

/** OpenAI seeds are any integer; llama.cpp takes an unsigned 32-bit one. */
export function toSamplerSeed(seed: number | undefined): number {
  if (seed === undefined) return randomInt(0, 2 ** 32 - 1);
  const modulo = 2 ** 32;
  return ((seed % modulo) + modulo) % modulo;
}

export async function generate(
  sequence: LlamaContextSequence,
  model: LlamaModel,
  params: GenerationParams,
  output: OutputOptions,
  hooks: GenerationHooks,
  signal: AbortSignal,
): Promise<GenerationResult> {
  // The sequence may hold the previous request's tokens: keep the prefix this prompt shares, drop the rest.
  const evaluated = await resetSequence(sequence, params.promptTokens, output.reusePrefix);
  if (signal.aborted) return { finishReason: null, completionTokens: 0 };

  const detokenizer = new IncrementalDetokenizer(model, {
    renderSpecialTokens: !output.skipSpecialTokens,
    alwaysRender: params.reasoning.enabled ? output.thinkTagTokens : undefined,
  });
  const stopMatcher = new StopStringMatcher(params.stop);
  const splitter = new ThinkSplitter(params.reasoning);
  const emit = (segments: Segment[]) => segments.forEach((segment) => hooks.onSegment(segment));
  // The grammar applies from the first token of the answer: sampling asks for its state before every token, and
  // gets none while the model is still inside a think block. From then on all text is the answer (a `<think>`
  // inside a JSON string is text, not a tag).
  const { grammar } = params;
  let grammarState: LlamaGrammarEvaluationState | undefined;
  const grammarEvaluationState = grammar
    ? () => {
        if (grammarState === undefined && !splitter.inReasoning) grammarState = new LlamaGrammarEvaluationState({ model, grammar });
        return grammarState;
      }
    : undefined;
  // Under a grammar, whitespace is held back until more text follows: the JSON grammar lets the model pad the end
  // of the value with newlines before it must stop, and the answer is the value alone (as OpenAI's).
  let heldSpace = '';
  const answerText = (text: string): Segment[] => {
    const all = heldSpace + text;
    const kept = all.trimEnd();
    heldSpace = all.slice(kept.length);
    return kept === '' ? [] : [{ channel: 'content', text: kept }];
  };
  const split = (text: string): Segment[] => (grammarState === undefined ? splitter.push(text) : answerText(text));

  const greedy = params.temperature === 0;
  const sampling = params.sampling ?? PLAIN_SAMPLING;
  const generated: Token[] = [];
  const { penalties } = sampling;
  const prompt = params.promptTokens;
  const options = {
    temperature: params.temperature,
    // OpenAI sampling has no top-k: 0 (the default) means the whole vocabulary in node-llama-cpp.
    topK: greedy ? undefined : sampling.topK,
    topP: greedy ? undefined : params.topP,
    minP: sampling.minP,
    seed: toSamplerSeed(params.seed),
    // Yield EOS/EOT so that it is counted as a generated token, like other servers do.
    yieldEogToken: true,
    ...(grammarEvaluationState ? { grammarEvaluationState } : {}),
    ...(sampling.tokenBias ? { tokenBias: sampling.tokenBias } : {}),
    ...(penalties
      ? {
          repeatPenalty: {
            punishTokens: () => (penalties.includePrompt ? prompt.concat(generated) : generated),
            // Every token of the request, and a window that never changes size (which would rebuild the sampler each step).
            maxPunishTokens: prompt.length + params.maxTokens,
            penalty: penalties.repetition,
            frequencyPenalty: penalties.frequency,
            presencePenalty: penalties.presence,
          },
        }
      : {}),
  };
  const input = evaluated === 0 ? prompt : prompt.slice(evaluated);
  // As the detokenizer renders it (above), so that the entries spell the text.
  const textOf = (token: Token) =>
    model.detokenize([token], !output.skipSpecialTokens || (params.reasoning.enabled && output.thinkTagTokens.has(token)));
  const logprobs = sampling.logprobs ? new LogprobQueue(textOf, sampling.logprobs.top) : undefined;
  const steps = sampling.logprobs
    ? sequence.evaluateWithMetadata(input, { confidence: true, probabilities: sampling.logprobs.top > 0 }, options)
    : sequence.evaluate(input, options);
  // Text out of the stop matcher: with logprobs, the entries of the tokens it completes go first.
  const release = (text: string) => {
    if (logprobs) {
      const entries = logprobs.release(text.length);
      if (entries.length > 0) hooks.onLogprobs?.(entries);
    }
    emit(split(text));
  };

  let completionTokens = 0;
  let end: 'eos' | 'stop-string' | 'length' = 'length';
  for await (const step of steps) {
    if (signal.aborted) break;
    const token = typeof step === 'number' ? step : step.token;
    completionTokens++;
    hooks.onToken?.();
    if (model.isEogToken(token)) {
      end = 'eos';
      break;
    }
    if (penalties) generated.push(token);
    const text = detokenizer.push(token);
    if (logprobs && typeof step !== 'number')
      logprobs.add(token, step.confidence, (step as { probabilities?: Map<Token, number> }).probabilities, text.length);
    const piece = stopMatcher.push(text);
    release(piece.text);
    if (piece.stopped) {
      end = 'stop-string';
      break;
    }
    if (completionTokens >= params.maxTokens) break;
  }
  if (signal.aborted) return { finishReason: null, completionTokens };

  if (end !== 'stop-string') {
    // Text held back for an incomplete character or a possible stop string is final now; a stop
    // string can still complete with the last bytes. After a stop string nothing is returned.
    const tail = stopMatcher.push(detokenizer.flush());
    release(tail.text);
    if (tail.stopped) end = 'stop-string';
    else release(stopMatcher.flush());
  }
  const rest = logprobs?.finish(end === 'stop-string');
  if (rest && rest.length > 0) hooks.onLogprobs?.(rest);
  emit(splitter.flush());
  return { finishReason: end === 'length' ? 'length' : 'stop', completionTokens };
}
