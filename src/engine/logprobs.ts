/**
 * OpenAI's `logprobs`: one entry per sampled token (its text, its log probability, its UTF-8
 * bytes, and the most likely alternatives), released in step with the answer's text. The text of
 * a token is held back while it may still be part of a stop string; entries follow it, so a chunk
 * carries the entries of the tokens whose text it releases, and the tokens of a stop string (cut
 * from the answer) get no entry.
 */
import type { Token } from 'node-llama-cpp';

export type TopLogprob = { token: string; logprob: number; bytes: number[] };
export type TokenLogprob = TopLogprob & { top_logprobs: TopLogprob[] };

/** OpenAI's floor for a probability too small to be a float's log. */
const MIN_LOGPROB = -9999;

const logOf = (probability: number) => Math.max(Math.log(probability), MIN_LOGPROB);

export class LogprobQueue {
  private readonly pending: { entry: TokenLogprob; end: number }[] = [];
  private produced = 0;
  private released = 0;

  constructor(
    /** A token's text as the answer shows it (special tokens as the endpoint renders them), so that the entries spell the answer. */
    private readonly textOf: (token: Token) => string,
    /** Alternatives listed per token. */
    private readonly top: number,
  ) {}

  private describe(token: Token, probability: number): TopLogprob {
    const text = this.textOf(token);
    return { token: text, logprob: logOf(probability), bytes: [...Buffer.from(text, 'utf8')] };
  }

  /**
   * A sampled token: its probability, the distribution it was drawn from (sorted, most likely
   * first; absent without alternatives) and the characters of text it produced.
   */
  add(token: Token, probability: number, distribution: ReadonlyMap<Token, number> | undefined, producedChars: number): void {
    const topLogprobs: TopLogprob[] = [];
    if (distribution !== undefined) {
      for (const [alternative, p] of distribution) {
        if (topLogprobs.length >= this.top) break;
        topLogprobs.push(this.describe(alternative, p));
      }
    }
    this.produced += producedChars;
    this.pending.push({ entry: { ...this.describe(token, probability), top_logprobs: topLogprobs }, end: this.produced });
  }

  /** `chars` more characters of the answer's text are out: the entries whose text is all out. */
  release(chars: number): TokenLogprob[] {
    this.released += chars;
    let n = 0;
    while (n < this.pending.length && this.pending[n]!.end <= this.released) n++;
    return n === 0 ? [] : this.pending.splice(0, n).map((p) => p.entry);
  }

  /** The answer ended: every entry left, or none when a stop string cut their text. */
  finish(cut: boolean): TokenLogprob[] {
    const rest = cut ? [] : this.pending.map((p) => p.entry);
    this.pending.length = 0;
    return rest;
  }
}
