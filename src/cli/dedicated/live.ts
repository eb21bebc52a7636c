/**
 * The CLI's live commands: `status --watch` over the endpointStatus
 * subscription (graphql-ws on WebSocket), and `chat`, streamed from the
 * OpenAI-compatible route and written to the terminal as tokens arrive.
 */
import { print as printDocument } from 'graphql';
import { createClient as createWsClient } from 'graphql-ws';
import { createParser } from 'eventsource-parser';
import WebSocket from 'ws';
import { EndpointStatusWatchDocument, type EndpointStatusWatchSubscription } from '../../sdk/client.js';
import { CliError } from './errors.js';
import { readBounded } from './http.js';
import type { Settings } from './settings.js';

type Update = EndpointStatusWatchSubscription['endpointStatus'];

/** Calls `onUpdate` for the current status and each change, until the endpoint is deleted, `signal` aborts or `until` says stop. */
export async function watchStatus(
  settings: Settings,
  endpointId: string,
  onUpdate: (update: Update) => void,
  options: { signal?: AbortSignal; until?: (update: Update) => boolean } = {},
): Promise<void> {
  const url = new URL('/graphql', settings.baseUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  const client = createWsClient({
    url: url.toString(),
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${settings.apiKey}` },
    retryAttempts: 5,
    lazy: true,
  });
  try {
    const subscription = client.iterate<EndpointStatusWatchSubscription>({
      query: printDocument(EndpointStatusWatchDocument),
      variables: { endpointId },
    });
    const onAbort = () => void subscription.return?.();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const result of subscription) {
        if (result.errors?.length) throw new CliError(result.errors.map((e) => e.message).join('; '));
        if (!result.data) continue;
        onUpdate(result.data.endpointStatus);
        if (options.until?.(result.data.endpointStatus)) break;
      }
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(`the status stream failed: ${describeSocketError(error)}`);
  } finally {
    await client.dispose();
  }
}

function describeSocketError(error: unknown): string {
  if (error instanceof Error) return error.message;
  const close = error as { code?: number; reason?: string } | undefined;
  if (close && typeof close.code === 'number') return `connection closed (${close.code}${close.reason ? `: ${close.reason}` : ''})`;
  if (Array.isArray(error)) return (error as { message?: string }[]).map((e) => e.message ?? String(e)).join('; ');
  return String(error);
}

export interface ChatOptions {
  messages: { role: 'system' | 'user'; content: string }[];
  maxTokens?: number;
  temperature?: number;
  /** false: ask the chat template not to reason (`chat_template_kwargs.enable_thinking`); unset: the model's default. */
  think?: boolean;
}

export interface ChatOutcome {
  finishReason: string | null;
  usage: { prompt_tokens: number; completion_tokens: number } | null;
}

/** The endpoint's tokens for `text` (POST /dedicated/v1/tokenize). */
export async function tokenize(settings: Settings, endpointId: string, text: string): Promise<number[]> {
  const response = await fetch(new URL('/dedicated/v1/tokenize', settings.baseUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: endpointId, prompt: text }),
  }).catch((error: unknown) => {
    throw new CliError(`cannot reach ${settings.baseUrl}: ${(error as Error).message}`);
  });
  if (!response.ok) throw new CliError(await errorOf(response));
  const body = (await response.json().catch(() => undefined)) as { tokens?: number[] } | undefined;
  if (!Array.isArray(body?.tokens)) throw new CliError(`HTTP ${response.status}: the answer has no tokens`);
  return body.tokens;
}

/** "HTTP <status>: <the body's error.message>", the status text when the body (read bounded: http.ts) has none. */
async function errorOf(response: Response): Promise<string> {
  let message: unknown;
  try {
    message = (JSON.parse((await readBounded(response)) ?? '') as { error?: { message?: unknown } } | null)?.error?.message;
  } catch {
    message = undefined;
  }
  return `HTTP ${response.status}: ${typeof message === 'string' ? message : response.statusText}`;
}

/** Streams a chat completion; `onText` gets each piece of the answer (and of the reasoning, flagged). */
export async function streamChat(
  settings: Settings,
  endpointId: string,
  chat: ChatOptions,
  onText: (text: string, reasoning: boolean) => void,
  signal?: AbortSignal,
): Promise<ChatOutcome> {
  const response = await fetch(new URL('/dedicated/v1/chat/completions', settings.baseUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({
      model: endpointId,
      messages: chat.messages,
      stream: true,
      stream_options: { include_usage: true },
      ...(chat.maxTokens !== undefined ? { max_tokens: chat.maxTokens } : {}),
      ...(chat.temperature !== undefined ? { temperature: chat.temperature } : {}),
      ...(chat.think !== undefined ? { chat_template_kwargs: { enable_thinking: chat.think } } : {}),
    }),
    ...(signal ? { signal } : {}),
  }).catch((error: unknown) => {
    throw new CliError(`cannot reach ${settings.baseUrl}: ${(error as Error).message}`);
  });
  if (!response.ok || !response.body) throw new CliError(await errorOf(response));
  const outcome: ChatOutcome = { finishReason: null, usage: null };
  let failure: string | undefined;
  let done = false;
  const parser = createParser({
    onEvent: (event) => {
      if (event.data === '[DONE]') {
        done = true;
        return;
      }
      let chunk: {
        error?: { message: string };
        choices?: { delta?: { content?: string | null; reasoning_content?: string | null }; finish_reason?: string | null }[];
        usage?: ChatOutcome['usage'];
      };
      try {
        chunk = JSON.parse(event.data) as typeof chunk;
      } catch {
        // A proxy's HTML page sent as an event, say: one line, not a stack trace.
        throw new CliError('the server sent an event that is not JSON');
      }
      if (chunk.error) failure = chunk.error.message;
      for (const choice of chunk.choices ?? []) {
        if (choice.delta?.reasoning_content) onText(choice.delta.reasoning_content, true);
        if (choice.delta?.content) onText(choice.delta.content, false);
        if (choice.finish_reason) outcome.finishReason = choice.finish_reason;
      }
      if (chunk.usage) outcome.usage = chunk.usage;
    },
  });
  const decoder = new TextDecoder();
  const reader = response.body.getReader();
  try {
    for (let read = await reader.read(); !read.done; read = await reader.read()) parser.feed(decoder.decode(read.value, { stream: true }));
  } finally {
    // A stream given up on (an event that is not JSON) would otherwise hold its connection open, and the CLI with it.
    await reader.cancel().catch(() => undefined);
  }
  if (failure) throw new CliError(`the answer was cut: ${failure}`);
  if (!done) throw new CliError('the answer ended without [DONE]');
  return outcome;
}
