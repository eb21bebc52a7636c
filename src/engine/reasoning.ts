/**
 * Splits generated text into reasoning (inside a `<think>` block) and answer content, the way
 * OpenAI-compatible servers expose `reasoning_content`. The tags themselves are dropped. Works on
 * text rather than token ids so that tags split across tokens, or spelled out byte by byte, are
 * still recognised; a possible partial tag at the end of a piece is held back until it is decided.
 */
import { partialMatchLength } from './text-stream.js';

export const THINK_OPEN = '<think>';
export const THINK_CLOSE = '</think>';

export type Channel = 'content' | 'reasoning';
export type Segment = { channel: Channel; text: string };

export type ThinkSplitterOptions = {
  /** Off for models without a think block: all text is content and tags are left alone. */
  enabled: boolean;
  /** The prompt ended inside an open think block (the template opened it for the model). */
  startInReasoning: boolean;
};

/**
 * True when the last `<think>` in `text` has no `</think>` after it: generation continues inside
 * the think block.
 */
export function endsInsideThinkBlock(text: string): boolean {
  const open = text.lastIndexOf(THINK_OPEN);
  return open >= 0 && text.indexOf(THINK_CLOSE, open + THINK_OPEN.length) < 0;
}

export class ThinkSplitter {
  private channel: Channel;
  private held = '';

  constructor(private readonly options: ThinkSplitterOptions) {
    this.channel = options.enabled && options.startInReasoning ? 'reasoning' : 'content';
  }

  /** Segments that became final with this text; consecutive text of one channel is merged. */
  push(text: string): Segment[] {
    if (!this.options.enabled) return text === '' ? [] : [{ channel: 'content', text }];
    let buffer = this.held + text;
    const out: Segment[] = [];
    for (;;) {
      const open = buffer.indexOf(THINK_OPEN);
      const close = buffer.indexOf(THINK_CLOSE);
      const next =
        open >= 0 && (close < 0 || open < close)
          ? { index: open, tag: THINK_OPEN }
          : close >= 0
            ? { index: close, tag: THINK_CLOSE }
            : null;
      if (next == null) break;
      this.emit(out, buffer.slice(0, next.index));
      // A stray tag (</think> outside a block, <think> inside one) is dropped without switching.
      this.channel = next.tag === THINK_OPEN ? 'reasoning' : 'content';
      buffer = buffer.slice(next.index + next.tag.length);
    }
    const keep = partialMatchLength(buffer, [THINK_OPEN, THINK_CLOSE]);
    this.emit(out, buffer.slice(0, buffer.length - keep));
    this.held = buffer.slice(buffer.length - keep);
    return out;
  }

  /** Inside a think block, or holding what may be the start of a tag: the answer has not begun for sure. */
  get inReasoning(): boolean {
    return this.channel === 'reasoning' || this.held !== '';
  }

  /** The held-back text (a partial tag that never completed) at the end of generation. */
  flush(): Segment[] {
    const out: Segment[] = [];
    this.emit(out, this.held);
    this.held = '';
    return out;
  }

  private emit(out: Segment[], text: string): void {
    if (text === '') return;
    const last = out.at(-1);
    if (last != null && last.channel === this.channel) last.text += text;
    else out.push({ channel: this.channel, text });
  }
}
