/**
 * Raw text to tokens and back, for the engine's `/tokenize` (prompt form) and `/detokenize`
 * routes (vLLM's shapes): the endpoint's tokenizer settings apply (`tokenizer_add_special_tokens`
 * prepends BOS, `tokenizer_skip_special_tokens` leaves special tokens out of text), special-token
 * text in a prompt is read as the special token (as Hugging Face tokenizers do), and ids are
 * checked against the vocabulary. The bodies' own rules are src/domain/token-request.ts's.
 */
import type { LlamaModel, Token } from 'node-llama-cpp';
import { invalidRequest, type RequestError } from '../domain/chat-request.js';
import type { CompletionPrompt } from '../domain/completion-request.js';
import { parseDetokenizeBody, parseTokenizeBody } from '../domain/token-request.js';

export type TokenSettings = { addSpecialTokens: boolean; skipSpecialTokens: boolean; vocabulary: number | undefined };

/** Raw text's tokens, special-token text read as the special token, BOS first when the settings add it. */
function tokenizeText(model: LlamaModel, settings: TokenSettings, text: string): Token[] {
  const tokens = model.tokenize(text, true);
  const bos = model.tokens.bos;
  if (settings.addSpecialTokens && bos != null && model.tokens.shouldPrependBosToken && tokens[0] !== bos) tokens.unshift(bos);
  return tokens;
}

/** The index of the first id outside the vocabulary, or -1. */
function outsideVocabulary(settings: TokenSettings, ids: readonly number[]): number {
  const limit = settings.vocabulary;
  return limit === undefined ? -1 : ids.findIndex((id) => id >= limit);
}

function notInVocabulary(settings: TokenSettings, param: string): RequestError {
  return invalidRequest(`${param} is not in the model's vocabulary (ids 0 to ${settings.vocabulary! - 1})`, param);
}

/** `{ prompt }`: its tokens, or the 400 naming what is wrong. */
export function tokenizePrompt(model: LlamaModel, settings: TokenSettings, body: unknown): Token[] | RequestError {
  const parsed = parseTokenizeBody(body);
  if (parsed.type === 'error') return parsed.error;
  return tokenizeText(model, settings, parsed.value.prompt);
}

/** A text completion's prompt as tokens: its text tokenized, or its ids checked against the vocabulary. */
export function completionPromptTokens(model: LlamaModel, settings: TokenSettings, prompt: CompletionPrompt): Token[] | RequestError {
  if ('text' in prompt) return tokenizeText(model, settings, prompt.text);
  const outside = outsideVocabulary(settings, prompt.tokens);
  if (outside >= 0) return notInVocabulary(settings, `${prompt.field}[${outside}]`);
  return prompt.tokens as Token[];
}

/** `{ tokens }`: their text, or the 400 naming the first id that is not in the vocabulary. */
export function detokenizeBody(model: LlamaModel, settings: TokenSettings, body: unknown): string | RequestError {
  const parsed = parseDetokenizeBody(body);
  if (parsed.type === 'error') return parsed.error;
  const { tokens } = parsed.value;
  const limit = settings.vocabulary;
  const outside = limit === undefined ? -1 : tokens.findIndex((id) => id >= limit);
  if (outside >= 0)
    return invalidRequest(`tokens[${outside}] is not in the model's vocabulary (ids 0 to ${limit! - 1})`, `tokens[${outside}]`);
  return model.detokenize(tokens as Token[], !settings.skipSpecialTokens);
}
