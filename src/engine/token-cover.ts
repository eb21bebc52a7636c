/**
 * How much text one token of the model covers at most (issue 31): a prompt whose UTF-8 text is
 * longer than max_input_length tokens of the longest entry of the vocabulary cannot fit, and is
 * refused before it is tokenized (tokenizing a megabyte holds the event loop for seconds, and a
 * replica whose health check goes unanswered is killed as hung).
 *
 * The bound holds only where every token stands for its own text: SentencePiece (pieces, with byte
 * fallback) and byte-level BPE whose vocabulary has all 256 byte symbols (llama.cpp drops a byte
 * that has none). WordPiece and Unigram tokenizers normalize text (whitespace collapsed, accents
 * dropped), so a token may cover any length of it: no bound there. Where special-token text is
 * parsed, a special token that strips the whitespace beside it (lstrip, rstrip: Phi-3's) covers
 * any run of it: no bound for that text either.
 */
import type { LlamaModel, Token } from 'node-llama-cpp';
import { invalidRequest, type EngineError } from './openai-errors.js';

export type TokenCover = {
  /** Most UTF-8 bytes one token covers of text tokenized as text (no special tokens); undefined: no bound. */
  text: number | undefined;
  /** The same where special-token text is parsed; undefined: no bound. */
  special: number | undefined;
};

/** GPT-2's byte-to-unicode table: the symbol that stands for each byte in a byte-level BPE vocabulary. */
function byteSymbols(): string[] {
  const direct = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const symbols: string[] = [];
  let next = 256;
  for (let b = 0; b < 256; b++) symbols.push(String.fromCodePoint(direct(b) ? b : next++));
  return symbols;
}

/** token_type values of normal and byte tokens, which carry no strip attribute. */
const NORMAL = 1;
const BYTE = 6;

/** Computed once per model at load: the vocabulary's longest entry, and whether the bound holds. */
export function tokenCover(model: LlamaModel): TokenCover {
  const ggml = (model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown; token_type?: unknown } } }).tokenizer?.ggml;
  const tokens = ggml?.tokens;
  const none = { text: undefined, special: undefined };
  if (!Array.isArray(tokens) || tokens.length === 0 || !tokens.every((t) => typeof t === 'string')) return none;
  const type = model.vocabularyType as string;
  if (type === 'bpe') {
    const vocabulary = new Set(tokens as string[]);
    if (!byteSymbols().every((symbol) => vocabulary.has(symbol))) return none;
  } else if (type !== 'spm') {
    return none;
  }
  // At least a whole UTF-8 character (4 bytes), which SentencePiece may read as one unknown token.
  let longest = 4;
  for (const token of tokens as string[]) longest = Math.max(longest, Buffer.byteLength(token));
  const types = Array.isArray(ggml?.token_type) ? (ggml.token_type as unknown[]) : undefined;
  let strips = false;
  for (let id = 0; id < tokens.length && !strips; id++) {
    if (types !== undefined && (types[id] === NORMAL || types[id] === BYTE)) continue;
    const attributes = model.getTokenAttributes(id as Token);
    strips = attributes.lstrip || attributes.rstrip;
  }
  return { text: longest, special: strips ? undefined : longest };
}

/**
 * Whether `bytes` of text, each token covering at most `cover` of them, needs more than
 * `maxTokens` tokens: then the prompt cannot fit, whatever its tokens. Undefined: it may fit.
 */
export function tokensAtLeast(bytes: number, cover: number | undefined, maxTokens: number): number | undefined {
  if (cover === undefined || bytes <= maxTokens * cover) return undefined;
  return Math.ceil(bytes / cover);
}

/** The 400 of a prompt refused by its length in bytes (the code and field of every prompt over max_input_length). */
export function promptTooLong(
  atLeast: number,
  bytes: number,
  cover: number,
  maxInputLength: number,
  param: 'messages' | 'prompt',
): EngineError {
  return invalidRequest(
    `The prompt has at least ${atLeast} tokens (${bytes} bytes of text, and no token of this model covers more than ${cover}), ` +
      `more than this endpoint's max_input_length of ${maxInputLength} tokens. ${param === 'messages' ? 'Shorten the messages' : 'Shorten the prompt'}.`,
    param,
    'context_length_exceeded',
  );
}
