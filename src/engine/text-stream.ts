/**
 * Turning generated tokens into text that can be streamed: UTF-8-safe incremental detokenization
 * and stop-string matching. Both hold back the little text that is not final yet (an incomplete
 * multi-byte character, a possible start of a stop string), so streamed pieces concatenate to
 * exactly the text a non-streamed response has.
 */
import type { LlamaModel, Token } from 'node-llama-cpp';

/** A UTF-8 character spans at most 4 bytes, so at most 4 byte-level tokens. */
const MAX_HELD_TOKENS = 4;
/** Tokens of already emitted text passed to the detokenizer as context (SentencePiece spacing). */
const CONTEXT_TOKENS = 4;

export type DetokenizerOptions = {
  /** Render control/special tokens as their text (`skip_special_tokens: false`). */
  renderSpecialTokens: boolean;
  /** Tokens always rendered as text, even when special tokens are skipped (think tags). */
  alwaysRender?: ReadonlySet<Token>;
};

export class IncrementalDetokenizer {
  private pending: Token[] = [];
  private readonly emitted: Token[] = [];

  constructor(
    private readonly model: LlamaModel,
    private readonly options: DetokenizerOptions,
  ) {}

  /** Returns the text that became final with this token ('' while a character is incomplete). */
  push(token: Token): string {
    if (this.options.alwaysRender?.has(token) && !this.options.renderSpecialTokens) {
      // Decode what is pending on its own, then the token with special rendering.
      const before = this.flush();
      const text = this.model.detokenize([token], true, this.context());
      this.remember([token]);
      return before + text;
    }
    this.pending.push(token);
    const text = this.model.detokenize(this.pending, this.options.renderSpecialTokens, this.context());
    // A partial UTF-8 sequence decodes to U+FFFD: wait for the next bytes, but not forever (a
    // model can generate invalid UTF-8; then the replacement character is the honest output).
    if (text.endsWith('\uFFFD') && this.pending.length < MAX_HELD_TOKENS) return '';
    this.remember(this.pending);
    this.pending = [];
    return text;
  }

  /** Whatever is still held back (at the end of generation). */
  flush(): string {
    if (this.pending.length === 0) return '';
    const text = this.model.detokenize(this.pending, this.options.renderSpecialTokens, this.context());
    this.remember(this.pending);
    this.pending = [];
    return text;
  }

  private context(): Token[] {
    return this.emitted;
  }

  private remember(tokens: readonly Token[]): void {
    // In place: this runs for every generated token.
    const emitted = this.emitted;
    for (const token of tokens) emitted.push(token);
    if (emitted.length > CONTEXT_TOKENS) emitted.splice(0, emitted.length - CONTEXT_TOKENS);
  }
}

/** Length of the longest suffix of `text` that is a proper prefix of one of `needles`. */
export function partialMatchLength(text: string, needles: readonly string[]): number {
  let best = 0;
  for (const needle of needles) {
    const max = Math.min(needle.length - 1, text.length);
    for (let length = max; length > best; length--) {
      if (text.endsWith(needle.slice(0, length))) {
        best = length;
        break;
      }
    }
  }
  return best;
}

/** Where the first of `needles` occurs in `text` from `from` on, or -1. */
export function firstIndexOf(text: string, needles: readonly string[], from = 0): number {
  let first = -1;
  for (const needle of needles) {
    const index = text.indexOf(needle, from);
    if (index >= 0 && (first < 0 || index < first)) first = index;
  }
  return first;
}

export type StopMatch = { text: string; stopped: boolean };

/** Ends the output at the first occurrence of any stop string; the stop string is not returned. */
export class StopStringMatcher {
  private held = '';

  constructor(private readonly stops: readonly string[]) {}

  push(text: string): StopMatch {
    if (this.stops.length === 0) return { text, stopped: false };
    const buffer = this.held + text;
    const first = firstIndexOf(buffer, this.stops);
    if (first >= 0) {
      this.held = '';
      return { text: buffer.slice(0, first), stopped: true };
    }
    const keep = partialMatchLength(buffer, this.stops);
    this.held = buffer.slice(buffer.length - keep);
    return { text: buffer.slice(0, buffer.length - keep), stopped: false };
  }

  flush(): string {
    const text = this.held;
    this.held = '';
    return text;
  }
}
