/**
 * The OpenAI chat-completions wire format, as pure functions: completion ids, the non-streamed
 * `chat.completion` object, the streamed `chat.completion.chunk` events and their SSE framing,
 * and usage. A streamed token's event is built by concatenating precomputed text around the
 * JSON-escaped delta: the same bytes as `JSON.stringify` of the chunk object, without building it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { wireToolCall, type WireToolCall } from '../domain/tools.js';
import type { FinishReason } from './generation.js';
import type { TokenLogprob } from './logprobs.js';
import type { Channel } from './reasoning.js';

export type { WireToolCall };

export type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache',
  Connection: 'keep-alive',
  // Ask reverse proxies not to buffer the stream.
  'X-Accel-Buffering': 'no',
} as const;

export const SSE_DONE = 'data: [DONE]\n\n';

/** One server-sent event carrying `data` as JSON. */
export function sseEvent(data: unknown): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

/** `chatcmpl-` (a chat completion) or `cmpl-` (a text completion, as OpenAI's) and a random UUID without its dashes. */
export function completionId(prefix: 'chatcmpl' | 'cmpl' = 'chatcmpl'): string {
  return `${prefix}-${randomUUID().replaceAll('-', '')}`;
}

/** Seconds since the epoch, as OpenAI's `created`. */
export function unixSeconds(now = Date.now()): number {
  return Math.floor(now / 1000);
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

export type Completion = {
  id: string;
  created: number;
  model: string;
  content: string;
  /** Left out of the message when empty. */
  reasoning: string;
  finishReason: FinishReason;
  usage: Usage;
  /** Present when the request asked for logprobs. */
  logprobs?: TokenLogprob[];
  /** The tools the answer calls (then its content is null when empty). */
  toolCalls?: WireToolCall[];
};

/** OpenAI-style call ids: `call_` and 24 random letters and digits. */
export function toolCallId(): string {
  return `call_${randomBytes(18).toString('base64url').replace(/[-_]/g, 'x').slice(0, 24)}`;
}

/** Calls read from an answer, with their ids. */
export function wireToolCalls(calls: readonly { name: string; arguments: string }[]): WireToolCall[] {
  return calls.map((call) => wireToolCall({ id: toolCallId(), ...call }));
}

/** The non-streamed answer. */
export function chatCompletion(c: Completion) {
  return {
    id: c.id,
    object: 'chat.completion',
    created: c.created,
    model: c.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: c.toolCalls && c.content === '' ? null : c.content,
          ...(c.reasoning !== '' ? { reasoning_content: c.reasoning } : {}),
          ...(c.toolCalls ? { tool_calls: c.toolCalls } : {}),
        },
        ...(c.logprobs ? { logprobs: { content: c.logprobs, refusal: null } } : {}),
        finish_reason: c.finishReason,
      },
    ],
    usage: c.usage,
  };
}

export type ChunkStream = { id: string; created: number; model: string; includeUsage: boolean };

/** A `chat.completion.chunk` object (OpenAI sends `"usage": null` on every chunk but the last when usage was asked for). */
export function chunk(s: ChunkStream, delta: Record<string, unknown>, finishReason: FinishReason | null, logprobs?: TokenLogprob[]) {
  return {
    id: s.id,
    object: 'chat.completion.chunk',
    created: s.created,
    model: s.model,
    choices: [{ index: 0, delta, ...(logprobs ? { logprobs: { content: logprobs } } : {}), finish_reason: finishReason }],
    ...(s.includeUsage ? { usage: null } : {}),
  };
}

/** The SSE events of one streamed completion. */
export class ChunkEncoder {
  private readonly head: string;
  private readonly tail: string;

  constructor(private readonly stream: ChunkStream) {
    // Everything of a delta chunk before the delta's text, and after it.
    const json = JSON.stringify(chunk(stream, { content: '\u0000' }, null));
    const [before, after] = json.split('"content":"\\u0000"') as [string, string];
    this.head = `data: ${before}`;
    this.tail = `${after}\n\n`;
  }

  /** The first event: the assistant role with empty content. */
  role(): string {
    return sseEvent(chunk(this.stream, { role: 'assistant', content: '' }, null));
  }

  /** One piece of text of the answer (`content`) or of the reasoning (`reasoning_content`), with its tokens' logprobs if any. */
  delta(channel: Channel, text: string, logprobs?: TokenLogprob[]): string {
    const field = channel === 'reasoning' ? 'reasoning_content' : 'content';
    if (logprobs) return sseEvent(chunk(this.stream, { [field]: text }, null, logprobs));
    return `${this.head}"${field}":${JSON.stringify(text)}${this.tail}`;
  }

  /** The answer's tool calls, whole, in one chunk (each with its index, as OpenAI's deltas). */
  toolCalls(calls: readonly WireToolCall[]): string {
    return sseEvent(chunk(this.stream, { tool_calls: calls.map((call, index) => ({ index, ...call })) }, null));
  }

  /** The last chunk of the choice: an empty delta and the finish reason (and the logprobs of tokens whose text no chunk carried). */
  finish(reason: FinishReason, logprobs?: TokenLogprob[]): string {
    return sseEvent(chunk(this.stream, {}, reason, logprobs));
  }

  /** The usage chunk (no choices), sent when `stream_options.include_usage` asked for it. */
  usage(u: Usage): string {
    const { id, created, model } = this.stream;
    return sseEvent({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: u });
  }
}
