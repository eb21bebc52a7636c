/** The per-endpoint limit on tokenize and detokenize calls (pure). */
import { expect, test } from 'vitest';
import { TokenCallLimit } from '../../src/router/token-calls.js';

test('at most `max` places per endpoint; a place given back twice counts once; endpoints are apart', () => {
  const limit = new TokenCallLimit(2);
  const first = limit.enter('ep_a')!;
  const second = limit.enter('ep_a')!;
  expect(limit.enter('ep_a')).toBeUndefined();
  expect(limit.enter('ep_b')).toBeDefined();
  first();
  first();
  const third = limit.enter('ep_a');
  expect(third).toBeDefined();
  expect(limit.enter('ep_a')).toBeUndefined();
  second();
  third!();
  expect(limit.enter('ep_a')).toBeDefined();
});
