/**
 * OpenAI's legacy text-completions wire format (`/v1/completions`): the
 * non-streamed `text_completion` object and its streamed chunks, with
 * `logprobs` in the legacy shape (`tokens`, `token_logprobs`, `top_logprobs`
 * as token-to-logprob maps, `text_offset` from the completion's start).
 */
import { sseEvent, type ChunkStream, type Completion, type Usage } from './format.js';
import type { FinishReason } from './generation.js';
import type { TokenLogprob } from './logprobs.js';

export type LegacyLogprobs = {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Record<string, number>[];
  text_offset: number[];
};

/** A text's length in characters (code points), as Python-based servers count `text_offset`. */
const chars = (text: string) => {
  let n = 0;
  for (const _ of text) n++;
  return n;
};

/** Entries in the legacy shape; `offset` is where the first one's text starts in the completion, in characters. */
export function legacyLogprobs(entries: readonly TokenLogprob[], offset = 0): LegacyLogprobs {
  const out: LegacyLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const entry of entries) {
    out.tokens.push(entry.token);
    out.token_logprobs.push(entry.logprob);
    out.top_logprobs.push(Object.fromEntries(entry.top_logprobs.map((t) => [t.token, t.logprob])));
    out.text_offset.push(at);
    at += chars(entry.token);
  }
  return out;
}

/** The non-streamed answer. */
export function textCompletion(c: Completion) {
  return {
    id: c.id,
    object: 'text_completion',
    created: c.created,
    model: c.model,
    choices: [{ index: 0, text: c.content, logprobs: c.logprobs ? legacyLogprobs(c.logprobs) : null, finish_reason: c.finishReason }],
    usage: c.usage,
  };
}

/** The SSE events of one streamed text completion. */
export class TextChunkEncoder {
  /** Where the next logprobs entry's text starts in the completion. */
  private offset = 0;

  constructor(private readonly stream: ChunkStream) {}

  private chunk(text: string, finishReason: FinishReason | null, entries: readonly TokenLogprob[] | undefined) {
    const logprobs = entries ? legacyLogprobs(entries, this.offset) : null;
    for (const entry of entries ?? []) this.offset += chars(entry.token);
    const { id, created, model, includeUsage } = this.stream;
    return sseEvent({
      id,
      object: 'text_completion',
      created,
      model,
      choices: [{ index: 0, text, logprobs, finish_reason: finishReason }],
      ...(includeUsage ? { usage: null } : {}),
    });
  }

  /** Legacy completions open with no role chunk. */
  role(): string {
    return '';
  }

  delta(_channel: 'content' | 'reasoning', text: string, logprobs?: TokenLogprob[]): string {
    return this.chunk(text, null, logprobs);
  }

  finish(reason: FinishReason, logprobs?: TokenLogprob[]): string {
    return this.chunk('', reason, logprobs);
  }

  usage(u: Usage): string {
    const { id, created, model } = this.stream;
    return sseEvent({ id, object: 'text_completion', created, model, choices: [], usage: u });
  }
}
