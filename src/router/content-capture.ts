/**
 * The content of one request, captured only for an endpoint whose serving
 * version has content logging on (a request without it has no capture at
 * all: nothing of its content is kept, written or logged). On the request's
 * path, capturing costs one array push per event: the events are kept as
 * they came and read (parsed, joined) only when the recorder writes them, off
 * the hot path.
 */
import { eventData } from './sse.js';

/** What a content log holds of the answer. */
export interface CapturedResponse {
  content: string;
  reasoningContent: string;
  finishReason: string | null;
  /** The tools the answer called, when it called any. */
  toolCalls?: { name: string; arguments: string }[];
  /** Set when the answer's body could not be read as the OpenAI shape (an engine's own, or cut short). */
  raw?: string;
}

interface Delta {
  content?: string | null;
  reasoning_content?: string | null;
  tool_calls?: { index?: number; function?: { name?: string; arguments?: string } }[];
}

type WireCall = { function?: { name?: string; arguments?: string } };

export class ContentCapture {
  private readonly events: (Buffer | string)[] = [];
  private body: Buffer | null = null;
  private bytes: number | undefined;

  constructor(
    /** The request's input: a chat's messages, or a text completion's prompt (inference-kinds.ts). */
    readonly messages: unknown,
    /** The version of the replica that served the request. */
    readonly versionIndex: number,
  ) {}

  /** One event of a streamed answer: its raw bytes, or its `data:` payload. */
  event(event: Buffer | string): void {
    this.events.push(event);
  }

  /** About how many bytes it holds (the input as JSON, and the answer as it came): for the recorder's bound. */
  approximateBytes(): number {
    // Counted once: asked only once the answer has ended (recorded), so it no longer grows.
    if (this.bytes === undefined) {
      this.bytes = JSON.stringify(this.messages ?? null).length + (this.body?.length ?? 0);
      for (const event of this.events) this.bytes += event.length;
    }
    return this.bytes;
  }

  /** A non-streamed answer's whole body. */
  wholeBody(body: Buffer): void {
    this.body = body;
  }

  /** The answer, read from what was captured (called off the request path). */
  response(): CapturedResponse {
    const out: CapturedResponse = { content: '', reasoningContent: '', finishReason: null };
    if (this.body) {
      const text = this.body.toString('utf8');
      try {
        const parsed = JSON.parse(text) as {
          choices?: {
            message?: { content?: string | null; reasoning_content?: string | null; tool_calls?: WireCall[] };
            text?: string;
            finish_reason?: string | null;
          }[];
        };
        const choice = parsed.choices?.[0];
        // A chat answer's message, or a text completion's text.
        out.content = choice?.message?.content ?? choice?.text ?? '';
        out.reasoningContent = choice?.message?.reasoning_content ?? '';
        out.finishReason = choice?.finish_reason ?? null;
        const calls = choice?.message?.tool_calls;
        if (calls?.length) out.toolCalls = calls.map((c) => ({ name: c.function?.name ?? '', arguments: c.function?.arguments ?? '' }));
      } catch {
        out.raw = text;
      }
      return out;
    }
    for (const event of this.events) {
      const data = typeof event === 'string' ? event : eventData(event.toString('utf8'));
      if (data === '[DONE]' || data === '') continue;
      try {
        const chunk = JSON.parse(data) as { choices?: { delta?: Delta; text?: string; finish_reason?: string | null }[] };
        const choice = chunk.choices?.[0];
        out.content += choice?.delta?.content ?? choice?.text ?? '';
        out.reasoningContent += choice?.delta?.reasoning_content ?? '';
        out.finishReason = choice?.finish_reason ?? out.finishReason;
        // A call's deltas, by its index: the name, then the arguments in pieces.
        for (const delta of choice?.delta?.tool_calls ?? []) {
          const calls = (out.toolCalls ??= []);
          const call = (calls[delta.index ?? calls.length] ??= { name: '', arguments: '' });
          call.name += delta.function?.name ?? '';
          call.arguments += delta.function?.arguments ?? '';
        }
      } catch {
        out.raw = (out.raw ?? '') + data;
      }
    }
    return out;
  }
}
