/** When the gateway needs a replica's token count before queueing a request (pure). */
import { describe, expect, test } from 'vitest';
import { parseChatRequest, type ChatRequest } from '../../src/domain/chat-request.js';
import type { EndpointRecord } from '../../src/domain/endpoint.js';
import { sharedEngineClient } from '../../src/engine-client/engine-client.js';
import { parseCompletionRequest, type CompletionRequest } from '../../src/domain/completion-request.js';
import type { ReplicaRecord } from '../../src/domain/replica.js';
import { TEXT_KIND } from '../../src/router/inference-kinds.js';
import { chatPromptShape, checkPromptTokens, mayBreakTokenLimits } from '../../src/router/pre-admission.js';

const mayBreak = (request: ChatRequest, endpoint: EndpointRecord) =>
  mayBreakTokenLimits(request, chatPromptShape(request, 'ep_x'), endpoint);

function endpointWith(maxInputLength: number, maxTokenCount: number): EndpointRecord {
  return { current: { spec: { advanced: { maxInputLength, maxTokenCount } } } } as unknown as EndpointRecord;
}

function request(body: Record<string, unknown>): ChatRequest {
  const parsed = parseChatRequest({ model: 'm', ...body });
  if (parsed.type === 'error') throw new Error(parsed.error.message);
  return parsed.value;
}

describe('mayBreakTokenLimits', () => {
  const short = request({ messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 16 });

  test('a short prompt far within both limits needs no count', () => {
    expect(mayBreak(short, endpointWith(2048, 4096))).toBe(false);
  });

  test('a prompt whose bytes (plus the template markers) could pass max_input_length is counted', () => {
    expect(mayBreak(short, endpointWith(64, 4096))).toBe(true);
    const long = request({ messages: [{ role: 'user', content: 'é'.repeat(1000) }] }); // 2,000 bytes
    expect(mayBreak(long, endpointWith(2048, 8192))).toBe(true);
    expect(mayBreak(long, endpointWith(4096, 8192))).toBe(false);
  });

  test('max_tokens that could fill max_token_count with the prompt is counted', () => {
    const many = request({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3900 });
    expect(mayBreak(many, endpointWith(2048, 4096))).toBe(true);
    const fewer = request({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3000 });
    expect(mayBreak(fewer, endpointWith(2048, 4096))).toBe(false);
  });
});

describe('parseChatRequest roles', () => {
  test("OpenAI's developer role is the system role; other names are refused by the name sent", () => {
    const parsed = parseChatRequest({
      model: 'm',
      messages: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
    });
    expect(parsed.type === 'ok' && parsed.value.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ]);
    for (const role of ['function', 'constructor', '__proto__', 7]) {
      const refused = parseChatRequest({ model: 'm', messages: [{ role, content: 'x' }] });
      expect(refused.type, String(role)).toBe('error');
      if (refused.type === 'error') expect(refused.error).toMatchObject({ kind: 'invalid', fields: [{ field: 'messages[0].role' }] });
    }
  });
});

describe('text completions', () => {
  const completion = (body: Record<string, unknown>): CompletionRequest => {
    const parsed = parseCompletionRequest({ model: 'm', ...body });
    if (parsed.type === 'error') throw new Error(parsed.error.message);
    return parsed.value;
  };

  test('a prompt of token ids is counted at the gateway, with no replica asked; a text prompt is bounded by its bytes', async () => {
    const ids = completion({ tokens: Array.from({ length: 80 }, (_, i) => i), max_tokens: 4 });
    const shape = TEXT_KIND.prompt(ids, 'ep_x');
    expect(shape).toMatchObject({ tokenBound: 80, exactTokens: 80, param: 'tokens' });
    // No replica at this address: a request to it would fail, and the check would pass unchecked.
    const nowhere = { address: 'http://127.0.0.1:9', token: null } as unknown as ReplicaRecord;
    const refused = await checkPromptTokens(
      sharedEngineClient(),
      nowhere,
      endpointWith(64, 4096),
      ids,
      shape,
      new AbortController().signal,
    );
    expect(refused).toMatchObject({
      kind: 'invalid',
      code: 'context_length_exceeded',
      fields: [{ field: 'tokens' }],
      message: expect.stringContaining('The prompt has 80 tokens'),
    });
    const fits = await checkPromptTokens(sharedEngineClient(), nowhere, endpointWith(128, 4096), ids, shape, new AbortController().signal);
    expect(fits).toBeUndefined();
    const text = completion({ prompt: 'héllo' });
    expect(TEXT_KIND.prompt(text, 'ep_x')).toEqual({
      tokenBound: 7,
      tokenizeBody: { model: 'ep_x', prompt: 'héllo', count_only: true },
      param: 'prompt',
    });
  });
});

describe('chatPromptShape with tools', () => {
  test("the replica's /tokenize body is the conversation in OpenAI's wire form, with the tools, and reads back as the same request; tools and calls count in the bound", () => {
    const body = {
      model: 'm',
      messages: [
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'w', arguments: '{"city":"Oslo"}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'cold' },
      ],
      tools: [{ type: 'function', function: { name: 'w', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      tool_choice: 'required',
    };
    const parsed = parseChatRequest(body);
    if (parsed.type !== 'ok') throw new Error(JSON.stringify(parsed.error));
    const shape = chatPromptShape(parsed.value, 'ep_x');
    const again = parseChatRequest(shape.tokenizeBody);
    if (again.type !== 'ok') throw new Error(JSON.stringify(again.error));
    expect(again.value.messages).toEqual(parsed.value.messages);
    expect(again.value.tools).toEqual(parsed.value.tools);
    const plain = parseChatRequest({ ...body, tools: undefined, tool_choice: undefined });
    if (plain.type !== 'ok') throw new Error(JSON.stringify(plain.error));
    expect(shape.tokenBound).toBeGreaterThan(chatPromptShape(plain.value, 'ep_x').tokenBound + 2048);
  });
});
