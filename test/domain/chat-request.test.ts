/**
 * How many messages a chat request may hold: the chat template renders every one of them before the
 * prompt's tokens can be counted, so a long list is refused by its length alone (pure).
 */
import { expect, test } from 'vitest';
import { MAX_MESSAGES, parseChatRequest } from '../../src/domain/chat-request.js';
import { paramOf } from '../../src/domain/request-checks.js';
import { MAX_MESSAGE_TOOL_CALLS } from '../../src/domain/tools.js';

const empty = (n: number) => Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: '' }));

test(`${MAX_MESSAGES} messages are accepted; one more is a 400 naming messages and the limit`, () => {
  const ok = parseChatRequest({ messages: empty(MAX_MESSAGES) });
  expect(ok.type === 'ok' && ok.value.messages.length).toBe(MAX_MESSAGES);
  const refused = parseChatRequest({ messages: empty(MAX_MESSAGES + 1) });
  if (refused.type !== 'error') throw new Error('accepted');
  expect(paramOf(refused.error)).toBe('messages');
  expect(refused.error.message).toBe(`messages may contain at most ${MAX_MESSAGES} messages (got ${MAX_MESSAGES + 1})`);
});

test('the count is checked before any message is: a long list of junk is refused for its length', () => {
  const refused = parseChatRequest({ messages: Array(36_000).fill(7) });
  expect(refused.type === 'error' && paramOf(refused.error)).toBe('messages');
  expect(refused.type === 'error' && refused.error.message).toMatch(/at most 2048 messages \(got 36000\)/);
});

test('tool calls count through the tool messages that must answer them', () => {
  // Each call needs a tool message of its own: 16 turns of the most calls a message may hold are 16 × 129 messages.
  const messages: unknown[] = [{ role: 'user', content: 'go' }];
  for (let turn = 0; turn < 16; turn++) {
    const ids = Array.from({ length: MAX_MESSAGE_TOOL_CALLS }, (_, i) => `call_${turn}_${i}`);
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } })),
    });
    for (const id of ids) messages.push({ role: 'tool', tool_call_id: id, content: 'ok' });
  }
  expect(messages.length).toBeGreaterThan(MAX_MESSAGES);
  const refused = parseChatRequest({ messages });
  expect(refused.type === 'error' && paramOf(refused.error)).toBe('messages');
  // Without their answers the calls are refused anyway.
  const unanswered = parseChatRequest({ messages: messages.filter((m) => (m as { role: string }).role !== 'tool') });
  expect(unanswered.type === 'error' && unanswered.error.message).toMatch(/has no tool message answering it/);
});
