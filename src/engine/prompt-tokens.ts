/**
 * How a rendered prompt becomes tokens: template text through a tokenizer that remembers the tokens of the few
 * pieces a template writes into every prompt, and, for serving, tokenizing that gives the event loop a turn as it
 * goes and cuts long message text into pieces whose tokens are the whole text's (byte-level BPE only).
 */
import { SpecialTokensText, type LlamaText, type Token, type Tokenizer } from 'node-llama-cpp';

/** Tokenizing gives the event loop a turn once it has held it this long (the engine's /health must answer). */
const YIELD_MS = 20;
/** Message text longer than this is tokenized in pieces (byte-level BPE only, see `textPieces`). */
const PIECE_CHARS = 16 * 1024;
/**
 * Distinct pieces of template-written text whose tokens are kept. A template writes the same few
 * pieces (`<|im_start|>user\n`, the generation prompt…) into every prompt, and each native
 * tokenize call costs tens of microseconds whatever its length, a large share of a short request.
 */
const TEMPLATE_TOKENS_CACHE_SIZE = 256;
/** Template text longer than this (a message quoted by the template itself) is not kept. */
const TEMPLATE_TOKENS_MAX_CHARS = 1024;

/** `base`, remembering the tokens of template text (only that: message text is always tokenized). */
export function cachingTokenizer(base: Tokenizer): Tokenizer {
  const templateTokens = new Map<string, readonly Token[]>();
  const tokenize = (text: string, specialTokens?: boolean, options?: 'trimLeadingSpace'): Token[] => {
    // Only template text is tokenized with special tokens parsed (LlamaText's SpecialTokensText).
    if (specialTokens !== true || text.length > TEMPLATE_TOKENS_MAX_CHARS) return base(text, specialTokens, options);
    const key = `${options === 'trimLeadingSpace' ? 't' : '-'}${text}`;
    let tokens = templateTokens.get(key);
    if (tokens === undefined) {
      tokens = base(text, true, options);
      templateTokens.set(key, tokens);
      if (templateTokens.size > TEMPLATE_TOKENS_CACHE_SIZE) {
        const oldest = templateTokens.keys().next().value;
        if (oldest !== undefined) templateTokens.delete(oldest);
      }
    }
    return tokens.slice();
  };
  return Object.assign(tokenize, {
    detokenize: base.detokenize,
    isSpecialToken: base.isSpecialToken,
    isEogToken: base.isEogToken,
  }) as Tokenizer;
}

/**
 * `LlamaText.tokenize` (node-llama-cpp 3.x: text runs as text with `trimLeadingSpace`, template
 * text with its special tokens parsed) with a turn of the event loop whenever it has held it for
 * YIELD_MS, and long text in pieces when `split` (see `textPieces`).
 */
export async function tokenizeInTurns(text: LlamaText, tokenizer: Tokenizer, split: boolean): Promise<Token[]> {
  const tokens: Token[] = [];
  const add = (more: readonly Token[]) => {
    for (const token of more) tokens.push(token);
  };
  let since = performance.now();
  const breathe = async () => {
    if (performance.now() - since < YIELD_MS) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    since = performance.now();
  };
  let pending = '';
  const flush = async () => {
    if (pending === '') return;
    for (const piece of split ? textPieces(pending) : [pending]) {
      add(tokenizer(piece, false, 'trimLeadingSpace'));
      await breathe();
    }
    pending = '';
  };
  for (const value of text.values) {
    if (typeof value === 'string') {
      pending += value;
      continue;
    }
    const hasContent = tokens.length > 0 || pending.length > 0;
    await flush();
    add(value instanceof SpecialTokensText ? value.tokenize(tokenizer, hasContent) : value.tokenize(tokenizer));
    await breathe();
  }
  await flush();
  return tokens;
}

const isAsciiLetter = (code: number) => (code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a);
const isAsciiDigit = (code: number) => code >= 0x30 && code <= 0x39;

/**
 * Text in pieces of about PIECE_CHARS, each cut just before a space between an ASCII letter or
 * digit and an ASCII letter (`word| word`, `42| word`): byte-level BPE pre-tokenizers (GPT-2's, Llama 3's, Qwen's) always start a new
 * pre-token there, and merges never cross one, so the pieces' tokens are the whole text's. Text
 * with no such place is one piece.
 */
export function textPieces(text: string): string[] {
  if (text.length <= PIECE_CHARS) return [text];
  const pieces: string[] = [];
  let start = 0;
  while (text.length - start > PIECE_CHARS) {
    let cut = -1;
    const end = Math.min(text.length - 1, start + 2 * PIECE_CHARS);
    for (let at = start + PIECE_CHARS; at < end; at++) {
      const before = text.charCodeAt(at - 1);
      if (text.charCodeAt(at) === 0x20 && (isAsciiLetter(before) || isAsciiDigit(before)) && isAsciiLetter(text.charCodeAt(at + 1))) {
        cut = at;
        break;
      }
    }
    if (cut < 0) break;
    pieces.push(text.slice(start, cut));
    start = cut;
  }
  pieces.push(text.slice(start));
  return pieces;
}
