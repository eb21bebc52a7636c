/**
 * A conversation as node-llama-cpp's chat history: each message as its history item, and with tools each
 * assistant call carrying its result (the `tool` message that answers it).
 */
import type { ChatHistoryItem, ChatModelResponse } from 'node-llama-cpp';
import type { ChatMessage } from '../domain/chat-request.js';
import { argumentsValue } from '../domain/tools.js';

export function historyItem(message: ChatMessage): ChatHistoryItem {
  if (message.role === 'system') return { type: 'system', text: message.content };
  if (message.role === 'user') return { type: 'user', text: message.content };
  return { type: 'model', response: [message.content] };
}

/** A tool message's content as the call's result: the JSON value it holds, or the text. */
function resultValue(content: string): unknown {
  try {
    return JSON.parse(content) as unknown;
  } catch {
    return content;
  }
}

/**
 * node-llama-cpp's history: each assistant call carries its result, the `tool` message after it
 * that answers it (chat-request.ts checks that each call has one, right after its message): as sent
 * when `verbatim`, else the JSON value it holds (or the text).
 */
export function historyWithTools(messages: readonly ChatMessage[], verbatim: boolean): ChatHistoryItem[] {
  const items: ChatHistoryItem[] = [];
  let pending = new Map<string, { result: unknown }>();
  for (const message of messages) {
    if (message.role === 'tool') {
      const call = pending.get(message.toolCallId!);
      if (call) call.result = verbatim ? message.content : resultValue(message.content);
      continue;
    }
    if (message.role !== 'assistant' || !message.toolCalls) {
      items.push(historyItem(message));
      continue;
    }
    const response: ChatModelResponse['response'] = message.content === '' ? [] : [message.content];
    pending = new Map();
    for (const call of message.toolCalls) {
      const item = { type: 'functionCall' as const, name: call.name, params: argumentsValue(call.arguments), result: '' as unknown };
      pending.set(call.id, item);
      response.push(item);
    }
    items.push({ type: 'model', response });
  }
  return items;
}
