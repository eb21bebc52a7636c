/**
 * Raw text to tokens and back, for the engine's `/tokenize` (prompt form) and `/detokenize`
 * routes (vLLM's shapes): the endpoint's tokenizer settings apply (`tokenizer_add_special_tokens`
 * prepends BOS, `tokenizer_skip_special_tokens` leaves special tokens out of text), special-token
 * text in a prompt is read as the special token (as Hugging Face tokenizers do), and ids are
 * checked against the vocabulary. The bodies' own rules are src/domain/token-request.ts's.
 */
import type { LlamaModel, Token } from 'node-llama-cpp';
import { invalidRequest, refusalOf, type EngineError } from './openai-errors.js';
import type { CompletionPrompt } from '../domain/completion-request.js';
import { parseDetokenizeBody, parseTokenizeBody } from '../domain/token-request.js';
import { withBos } from './prompt.js';
import { promptTooLong, tokensAtLeast } from './token-cover.js';

export type TokenSettings = {
  addSpecialTokens: boolean;
  skipSpecialTokens: boolean;
  vocabulary: number | undefined;
  /** The most bytes one token covers where special-token text is parsed (token-cover.ts); undefined: no bound. */
  cover: number | undefined;
  maxInputLength: number;
  /** The most ids /detokenize takes: the context's size (no sequence of the model is longer). */
  maxIds: number;
};

/**
 * Raw text's tokens, special-token text read as the special token, BOS first when the settings add
 * it; or the 400 of a text too long to fit in max_input_length tokens, refused before it is tokenized.
 */
function tokenizeText(model: LlamaModel, settings: TokenSettings, text: string): Token[] | EngineError {
  const bytes = Buffer.byteLength(text);
  const atLeast = tokensAtLeast(bytes, settings.cover, settings.maxInputLength);
  if (atLeast !== undefined) return promptTooLong(atLeast, bytes, settings.cover!, settings.maxInputLength, 'prompt');
  return withBos(model, model.tokenize(text, true), settings.addSpecialTokens);
}

/**
 * The 400 of the first of `ids` outside a vocabulary of `vocabulary` tokens (`param(i)` names it),
 * or undefined when all are in it (or its size is unknown).
 */
export function outsideVocabulary(
  vocabulary: number | undefined,
  ids: Iterable<number>,
  param: (i: number, id: number) => string,
): EngineError | undefined {
  if (vocabulary === undefined) return undefined;
  let i = 0;
  for (const id of ids) {
    if (id >= vocabulary) {
      const at = param(i, id);
      return invalidRequest(`${at} is not in the model's vocabulary (ids 0 to ${vocabulary - 1})`, at);
    }
    i++;
  }
  return undefined;
}

/** `{ prompt }`: its tokens, or the 400 naming what is wrong. */
export function tokenizePrompt(model: LlamaModel, settings: TokenSettings, body: unknown): Token[] | EngineError {
  const parsed = parseTokenizeBody(body);
  if (parsed.type === 'error') return refusalOf(parsed.error);
  return tokenizeText(model, settings, parsed.value.prompt);
}

/** A text completion's prompt as tokens: its text tokenized, or its ids checked against the vocabulary. */
export function completionPromptTokens(model: LlamaModel, settings: TokenSettings, prompt: CompletionPrompt): Token[] | EngineError {
  if ('text' in prompt) return tokenizeText(model, settings, prompt.text);
  return outsideVocabulary(settings.vocabulary, prompt.tokens, (i) => `${prompt.field}[${i}]`) ?? (prompt.tokens as Token[]);
}

/** `{ tokens }`: their text, or the 400 naming the first id that is not in the vocabulary. */
export function detokenizeBody(model: LlamaModel, settings: TokenSettings, body: unknown): string | EngineError {
  const parsed = parseDetokenizeBody(body);
  if (parsed.type === 'error') return refusalOf(parsed.error);
  const { tokens } = parsed.value;
  if (tokens.length > settings.maxIds)
    return invalidRequest(
      `tokens has ${tokens.length} ids, more than this model's context of ${settings.maxIds} tokens (max_model_len): detokenize them in parts`,
      'tokens',
    );
  const outside = outsideVocabulary(settings.vocabulary, tokens, (i) => `tokens[${i}]`);
  if (outside) return outside;
  return model.detokenize(tokens as Token[], !settings.skipSpecialTokens);
}
