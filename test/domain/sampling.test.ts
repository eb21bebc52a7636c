/** The sampling controls of a chat request: what the request alone decides (pure). */
import { describe, expect, test } from 'vitest';
import { parseChatRequest } from '../../src/domain/chat-request.js';

const parse = (extra: Record<string, unknown>) => parseChatRequest({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], ...extra });

describe('parseChatRequest: sampling controls', () => {
  test('defaults: no filtering, no penalty, no bias, no logprobs', () => {
    const parsed = parse({});
    expect(parsed.type === 'ok' && parsed.value.sampling).toEqual({
      topK: 0,
      minP: 0,
      presencePenalty: 0,
      frequencyPenalty: 0,
      repetitionPenalty: 1,
      logitBias: new Map(),
      logprobs: false,
      topLogprobs: 0,
    });
  });

  test('values within their ranges are kept; null is the default; a zero bias is dropped', () => {
    const parsed = parse({
      top_k: 40,
      min_p: 0.05,
      presence_penalty: 2,
      frequency_penalty: -2,
      repetition_penalty: 1.1,
      logit_bias: { '0': -100, '15': 100, '7': 0, '2147483647': 1.5 },
      logprobs: true,
      top_logprobs: 20,
    });
    expect(parsed.type === 'ok' && parsed.value.sampling).toEqual({
      topK: 40,
      minP: 0.05,
      presencePenalty: 2,
      frequencyPenalty: -2,
      repetitionPenalty: 1.1,
      logitBias: new Map([
        [0, -100],
        [15, 100],
        [2147483647, 1.5],
      ]),
      logprobs: true,
      topLogprobs: 20,
    });
    for (const ok of [{ logit_bias: {} }, { logit_bias: null }, { presence_penalty: null }, { top_logprobs: 0 }, { logprobs: null }]) {
      expect(parse(ok).type, JSON.stringify(ok)).toBe('ok');
    }
  });

  test('each broken rule is a 400 naming the field and the rule', () => {
    const manyBiases = Object.fromEntries(Array.from({ length: 301 }, (_, i) => [String(i), 1]));
    for (const [bad, param, rule] of [
      [{ presence_penalty: 3 }, 'presence_penalty', 'between -2 and 2'],
      [{ frequency_penalty: -2.5 }, 'frequency_penalty', 'between -2 and 2'],
      [{ presence_penalty: 'high' }, 'presence_penalty', 'between -2 and 2'],
      [{ repetition_penalty: 0 }, 'repetition_penalty', 'above 0'],
      [{ repetition_penalty: 11 }, 'repetition_penalty', 'at most 10'],
      [{ top_k: -1 }, 'top_k', 'integer of 0'],
      [{ top_k: 2.5 }, 'top_k', 'integer of 0'],
      [{ min_p: 1.5 }, 'min_p', 'between 0 and 1'],
      [{ logit_bias: [1] }, 'logit_bias', 'must be an object'],
      [{ logit_bias: { abc: 1 } }, 'logit_bias', 'token ids'],
      [{ logit_bias: { '-1': 1 } }, 'logit_bias', 'token ids'],
      [{ logit_bias: { '01': 1 } }, 'logit_bias', 'token ids'],
      [{ logit_bias: { '99999999999': 1 } }, 'logit_bias', 'token ids'],
      [{ logit_bias: { '5': 101 } }, 'logit_bias.5', 'from -100 to 100'],
      [{ logit_bias: { '5': '1' } }, 'logit_bias.5', 'from -100 to 100'],
      [{ logit_bias: manyBiases }, 'logit_bias', 'at most 300 entries'],
      [{ logprobs: 'yes' }, 'logprobs', 'boolean'],
      [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs', 'from 0 to 20'],
      [{ top_logprobs: 2 }, 'top_logprobs', 'needs logprobs: true'],
    ] as const) {
      const result = parse(bad);
      expect(result.type, JSON.stringify(bad).slice(0, 80)).toBe('error');
      if (result.type === 'error') {
        expect(result.error).toMatchObject({ kind: 'invalid', fields: [{ field: param }] });
        expect(result.error.message).toContain(rule);
      }
    }
  });
});
