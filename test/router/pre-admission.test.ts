/** When the gateway needs a replica's token count before queueing a request (pure). */
import { describe, expect, test } from 'vitest';
import { parseChatRequest, type ChatRequest } from '../../src/domain/chat-request.js';
import type { EndpointRecord } from '../../src/domain/endpoint.js';
import { mayBreakTokenLimits } from '../../src/router/pre-admission.js';

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
    expect(mayBreakTokenLimits(short, endpointWith(2048, 4096))).toBe(false);
  });

  test('a prompt whose bytes (plus the template markers) could pass max_input_length is counted', () => {
    expect(mayBreakTokenLimits(short, endpointWith(64, 4096))).toBe(true);
    const long = request({ messages: [{ role: 'user', content: 'é'.repeat(1000) }] }); // 2,000 bytes
    expect(mayBreakTokenLimits(long, endpointWith(2048, 8192))).toBe(true);
    expect(mayBreakTokenLimits(long, endpointWith(4096, 8192))).toBe(false);
  });

  test('max_tokens that could fill max_token_count with the prompt is counted', () => {
    const many = request({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3900 });
    expect(mayBreakTokenLimits(many, endpointWith(2048, 4096))).toBe(true);
    const fewer = request({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3000 });
    expect(mayBreakTokenLimits(fewer, endpointWith(2048, 4096))).toBe(false);
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
    for (const role of ['tool', 'constructor', '__proto__', 7]) {
      const refused = parseChatRequest({ model: 'm', messages: [{ role, content: 'x' }] });
      expect(refused.type, String(role)).toBe('error');
      if (refused.type === 'error') expect(refused.error).toMatchObject({ status: 400, param: 'messages[0].role' });
    }
  });
});
