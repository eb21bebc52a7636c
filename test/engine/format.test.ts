/** The OpenAI wire format of src/engine/format.ts: objects, SSE framing, and the fast delta encoding. */
import { expect, test } from 'vitest';
import { chatCompletion, chunk, ChunkEncoder, completionId, SSE_DONE, sseEvent, unixSeconds, usage } from '../../src/engine/format.js';
import { legacyLogprobs } from '../../src/engine/text-format.js';

const parse = (event: string) => {
  expect(event.startsWith('data: ')).toBe(true);
  expect(event.endsWith('\n\n')).toBe(true);
  return JSON.parse(event.slice(6, -2)) as Record<string, unknown>;
};

test('completion ids, created and usage', () => {
  const id = completionId();
  expect(id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
  expect(completionId()).not.toBe(id);
  expect(unixSeconds(1_700_000_000_999)).toBe(1_700_000_000);
  expect(usage(41, 7)).toEqual({ prompt_tokens: 41, completion_tokens: 7, total_tokens: 48 });
});

test('chat.completion: reasoning_content only when there is reasoning', () => {
  const base = { id: 'chatcmpl-x', created: 1, model: 'm.gguf', content: 'Hi', finishReason: 'stop' as const, usage: usage(3, 2) };
  expect(chatCompletion({ ...base, reasoning: '' })).toEqual({
    id: 'chatcmpl-x',
    object: 'chat.completion',
    created: 1,
    model: 'm.gguf',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
  });
  const withReasoning = chatCompletion({ ...base, reasoning: 'hmm', finishReason: 'length' });
  expect(withReasoning.choices[0]!.message).toEqual({ role: 'assistant', content: 'Hi', reasoning_content: 'hmm' });
  expect(withReasoning.choices[0]!.finish_reason).toBe('length');
});

test('SSE framing', () => {
  expect(sseEvent({ a: 1 })).toBe('data: {"a":1}\n\n');
  expect(SSE_DONE).toBe('data: [DONE]\n\n');
});

test('ChunkEncoder: every event is byte for byte JSON.stringify of the chunk object', () => {
  const texts = [
    '',
    'Hello',
    ' wörld 🙂',
    'quote " backslash \\ newline \n tab \t',
    '\u0000\u001f\u2028\u2029',
    '"content":"\\u0000"',
    '\uD800',
  ];
  for (const includeUsage of [false, true]) {
    for (const model of ['tiny.gguf', 'we"ird \\ model\n']) {
      const stream = { id: 'chatcmpl-abc', created: 1_700_000_000, model, includeUsage };
      const encoder = new ChunkEncoder(stream);
      expect(encoder.role()).toBe(sseEvent(chunk(stream, { role: 'assistant', content: '' }, null)));
      for (const text of texts) {
        expect(encoder.delta('content', text)).toBe(sseEvent(chunk(stream, { content: text }, null)));
        expect(encoder.delta('reasoning', text)).toBe(sseEvent(chunk(stream, { reasoning_content: text }, null)));
      }
      expect(encoder.finish('stop')).toBe(sseEvent(chunk(stream, {}, 'stop')));
      expect(encoder.finish('length')).toBe(sseEvent(chunk(stream, {}, 'length')));
    }
  }
});

test('chunks carry usage: null only when usage was asked for; the usage chunk has no choices', () => {
  const stream = { id: 'chatcmpl-abc', created: 5, model: 'm', includeUsage: true };
  const delta = parse(new ChunkEncoder(stream).delta('content', 'x'));
  expect(delta).toEqual({
    id: 'chatcmpl-abc',
    object: 'chat.completion.chunk',
    created: 5,
    model: 'm',
    choices: [{ index: 0, delta: { content: 'x' }, finish_reason: null }],
    usage: null,
  });
  expect('usage' in parse(new ChunkEncoder({ ...stream, includeUsage: false }).delta('content', 'x'))).toBe(false);
  expect(parse(new ChunkEncoder(stream).usage(usage(4, 6)))).toEqual({
    id: 'chatcmpl-abc',
    object: 'chat.completion.chunk',
    created: 5,
    model: 'm',
    choices: [],
    usage: { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 },
  });
});

test('legacy logprobs: text_offset counts characters (code points), as Python-based servers do', () => {
  const entry = (token: string) => ({
    token,
    logprob: -1,
    bytes: [...Buffer.from(token)],
    top_logprobs: [{ token, logprob: -1, bytes: [] }],
  });
  const legacy = legacyLogprobs([entry('é'), entry('😀'), entry('ab')], 3);
  expect(legacy.text_offset).toEqual([3, 4, 5]);
  expect(legacy.tokens).toEqual(['é', '😀', 'ab']);
  expect(legacy.top_logprobs[1]).toEqual({ '😀': -1 });
});
