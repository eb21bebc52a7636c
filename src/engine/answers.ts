/**
 * A generation's answer on the wire, whole or streamed, in either format:
 * chat completions (`chat.completion`, content and reasoning apart) or text
 * completions (`text_completion`). Both take the same segments and logprobs
 * from the generation loop, so a streamed answer equals the whole one. An
 * answer cut by the engine stopping, or a generation that fails after the
 * stream began, ends in-stream with an error event and `[DONE]`.
 */
import type { ServerResponse } from 'node:http';
import type { GenerationRequest } from '../domain/chat-request.js';
import { errorBody } from './openai-errors.js';
import {
  chatCompletion,
  ChunkEncoder,
  completionId,
  SSE_DONE,
  SSE_HEADERS,
  sseEvent,
  unixSeconds,
  usage,
  wireToolCalls,
  type ChunkStream,
  type Completion,
  type Usage,
  type WireToolCall,
} from './format.js';
import type { FinishReason, GenerationParams } from './generation.js';
import { sendError, sendJson, serverError } from './http.js';
import type { TokenLogprob } from './logprobs.js';
import type { Channel, Segment } from './reasoning.js';
import type { SequenceLease } from './scheduler.js';
import { TextChunkEncoder, textCompletion } from './text-format.js';
import { ToolCallCapture } from './tool-calls.js';

/** The abort reason of requests cancelled because the server stops. */
export const SHUTDOWN = Symbol('shutdown');

export const shuttingDown = () => serverError(503, 'The engine is shutting down', 'engine_shutting_down');

/** The events of one streamed answer. */
export interface AnswerStream {
  role(): string;
  delta(channel: Channel, text: string, logprobs?: TokenLogprob[]): string;
  /** Only chat answers call tools. */
  toolCalls?(calls: readonly WireToolCall[]): string;
  finish(reason: FinishReason, logprobs?: TokenLogprob[]): string;
  usage(u: Usage): string;
}

/** A wire format: the whole answer's JSON, and a streamed answer's events. */
export type AnswerFormat = { idPrefix: 'chatcmpl' | 'cmpl'; whole(c: Completion): unknown; stream(s: ChunkStream): AnswerStream };

export const CHAT_FORMAT: AnswerFormat = { idPrefix: 'chatcmpl', whole: chatCompletion, stream: (s) => new ChunkEncoder(s) };
export const TEXT_FORMAT: AnswerFormat = { idPrefix: 'cmpl', whole: textCompletion, stream: (s) => new TextChunkEncoder(s) };

/** One admitted generation: what it answers, with what, on which sequence. */
export type Answering = {
  res: ServerResponse;
  format: AnswerFormat;
  modelName: string;
  request: GenerationRequest;
  params: GenerationParams;
  lease: SequenceLease;
  signal: AbortSignal;
  promptTokens: number;
  log: (line: string) => void;
};

/** Generates, then answers with the whole answer. */
export async function answerWhole(a: Answering): Promise<void> {
  const { res, request, signal } = a;
  let content = '';
  let reasoning = '';
  const logprobs: TokenLogprob[] | undefined = request.sampling.logprobs ? [] : undefined;
  const tools = a.params.tools && new ToolCallCapture(a.params.tools);
  const onSegment = (segment: Segment) => {
    if (segment.channel === 'reasoning') reasoning += segment.text;
    else content += tools ? tools.push(segment.text) : segment.text;
  };
  const result = await a.lease.generate(a.params, onSegment, signal, logprobs && ((entries) => logprobs.push(...entries)));
  if (result.finishReason == null) {
    if (signal.reason === SHUTDOWN) sendError(res, shuttingDown(), { Connection: 'close' });
    return;
  }
  const called = tools?.finish();
  if (called) content += called.text;
  // A forced call cut by max_tokens is sent as far as it got, with the generation's own finish reason.
  const made = called?.cut ?? called?.calls;
  const toolCalls = made && made.length > 0 ? wireToolCalls(made) : undefined;
  sendJson(
    res,
    200,
    a.format.whole({
      id: completionId(a.format.idPrefix),
      created: unixSeconds(),
      model: a.modelName,
      content,
      reasoning,
      finishReason: toolCalls && !called?.cut ? 'tool_calls' : result.finishReason,
      usage: usage(a.promptTokens, result.completionTokens),
      ...(logprobs ? { logprobs } : {}),
      ...(toolCalls ? { toolCalls } : {}),
    }),
  );
}

/** Generates, streaming the answer as server-sent events. */
export async function answerStreamed(a: Answering): Promise<void> {
  const { res, request, signal } = a;
  if (res.destroyed) return;
  const encoder = a.format.stream({
    id: completionId(a.format.idPrefix),
    created: unixSeconds(),
    model: a.modelName,
    includeUsage: request.includeUsage,
  });
  const write = (event: string) => {
    if (!res.destroyed && event !== '') res.write(event);
  };
  res.writeHead(200, SSE_HEADERS);
  // Each token is a tiny write: send it now rather than coalescing (Nagle).
  res.socket?.setNoDelay(true);
  write(encoder.role());

  // With logprobs, the entries of a piece's tokens come just before its text: they ride on its chunk.
  let pendingLogprobs: TokenLogprob[] | undefined;
  const onLogprobs = request.sampling.logprobs ? (entries: TokenLogprob[]) => (pendingLogprobs ??= []).push(...entries) : undefined;
  // With tools, content that may be a call is held (logprobs are refused with tools).
  const tools = a.params.tools && new ToolCallCapture(a.params.tools);
  const onSegment = (segment: Segment) => {
    const text = tools && segment.channel === 'content' ? tools.push(segment.text) : segment.text;
    if (text === '' && tools) return;
    write(encoder.delta(segment.channel, text, pendingLogprobs));
    pendingLogprobs = undefined;
  };
  let result;
  try {
    result = await a.lease.generate(a.params, onSegment, signal, onLogprobs);
  } catch (error) {
    // Headers are sent: report in-stream, as OpenAI-compatible servers do.
    a.log(`[engine] generation failed: ${error instanceof Error ? error.message : String(error)}`);
    write(sseEvent(errorBody(serverError(500, 'The generation failed', 'generation_failed'))));
    if (!res.destroyed) res.end(SSE_DONE);
    return;
  }
  if (result.finishReason == null) {
    if (signal.reason === SHUTDOWN && !res.destroyed) {
      write(sseEvent(errorBody(shuttingDown())));
      res.end(SSE_DONE);
    }
    return;
  }
  let finishReason = result.finishReason;
  let tail = '';
  const called = tools?.finish();
  if (called?.text) tail += encoder.delta('content', called.text);
  // As the whole answer: a forced call cut by max_tokens is sent as far as it got, finish_reason "length".
  const made = called?.cut ?? called?.calls;
  if (made && made.length > 0 && encoder.toolCalls) {
    tail += encoder.toolCalls(wireToolCalls(made));
    if (!called?.cut) finishReason = 'tool_calls';
  }
  tail += encoder.finish(finishReason, pendingLogprobs);
  if (request.includeUsage) tail += encoder.usage(usage(a.promptTokens, result.completionTokens));
  if (!res.destroyed) res.end(tail + SSE_DONE);
}
