/**
 * A request's sampling controls (src/domain/sampling.ts) checked against the model and turned
 * into node-llama-cpp's: token ids within the vocabulary, top_k within its size, the biases as a
 * TokenBias, and the penalties with the tokens they look at.
 */
import { TokenBias, type LlamaModel, type Token } from 'node-llama-cpp';
import { invalidRequest, type EngineError } from './openai-errors.js';
import type { Sampling } from '../domain/sampling.js';
import { outsideVocabulary } from './tokens.js';

export type EngineSampling = {
  /** 0: none. */
  topK: number;
  minP: number;
  penalties?: {
    repetition: number;
    frequency: number;
    presence: number;
    /** repetition_penalty ≠ 1: the prompt's tokens are penalized too (as Hugging Face's), not only the answer's. */
    includePrompt: boolean;
  };
  tokenBias?: TokenBias;
  /** Log probabilities asked for, with this many alternatives per token. */
  logprobs?: { top: number };
};

export const PLAIN_SAMPLING: EngineSampling = { topK: 0, minP: 0 };

/** The model's vocabulary size from its GGUF metadata (the token list, else `<arch>.vocab_size`). */
export function vocabularySize(model: LlamaModel): number | undefined {
  const metadata = model.fileInfo.metadata as unknown as Record<string, Record<string, unknown> | undefined>;
  const tokens = (metadata.tokenizer?.ggml as { tokens?: unknown } | undefined)?.tokens;
  if (Array.isArray(tokens) && tokens.length > 0) return tokens.length;
  const architecture = (metadata.general as { architecture?: unknown } | undefined)?.architecture;
  const declared = typeof architecture === 'string' ? metadata[architecture]?.vocab_size : undefined;
  return typeof declared === 'number' && declared > 0 ? declared : undefined;
}

/** node-llama-cpp's options for `sampling`, or the 400 naming what this model cannot take. */
export function resolveSampling(model: LlamaModel, vocabulary: number | undefined, sampling: Sampling): EngineSampling | EngineError {
  if (vocabulary !== undefined && sampling.topK > vocabulary)
    return invalidRequest(`top_k must be at most the model's vocabulary size, ${vocabulary} (got ${sampling.topK})`, 'top_k');
  let tokenBias: TokenBias | undefined;
  if (sampling.logitBias.size > 0) {
    if (vocabulary === undefined)
      return invalidRequest("logit_bias cannot be checked: this model's vocabulary size is unknown", 'logit_bias');
    const outside = outsideVocabulary(vocabulary, sampling.logitBias.keys(), (_, id) => `logit_bias.${id}`);
    if (outside) return outside;
    tokenBias = new TokenBias(model.tokenizer);
    for (const [id, bias] of sampling.logitBias) {
      const token = id as Token;
      const at = `logit_bias.${id}`;
      // node-llama-cpp leaves end-of-generation tokens unbiased: refused rather than silently ignored.
      if (model.isEogToken(token)) return invalidRequest(`${at}: token ${id} ends generation, and its bias cannot be set`, at);
      // -100 bans the token, as OpenAI documents; any other value is added to its logit.
      tokenBias.set(token, bias <= -100 ? 'never' : { logit: bias });
    }
  }
  const { repetitionPenalty: repetition, frequencyPenalty: frequency, presencePenalty: presence } = sampling;
  const penalized = repetition !== 1 || frequency !== 0 || presence !== 0;
  return {
    topK: sampling.topK,
    minP: sampling.minP,
    ...(penalized ? { penalties: { repetition, frequency, presence, includePrompt: repetition !== 1 } } : {}),
    ...(tokenBias ? { tokenBias } : {}),
    ...(sampling.logprobs ? { logprobs: { top: sampling.topLogprobs } } : {}),
  };
}
