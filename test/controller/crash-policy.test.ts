/** The crash policy: replacements back off exponentially, and the endpoint fails only after repeated deaths in the window. */
import { expect, test } from 'vitest';
import { decideAfterDeaths, DEFAULT_CRASH_POLICY, restartDelayMs, type CrashPolicy } from '../../src/controller/crash-policy.js';

const policy: CrashPolicy = DEFAULT_CRASH_POLICY;

test('the delay doubles from the base with each death in the window, up to the cap', () => {
  expect([0, 1, 2, 3, 4, 5, 6, 100].map((n) => restartDelayMs(policy, n))).toEqual([0, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
  expect(restartDelayMs({ ...policy, backoffBaseMs: 250, backoffMaxMs: 600 }, 3)).toBe(600);
});

test('no death: start at once; a recent death: wait until its back-off ends, then start', () => {
  expect(decideAfterDeaths(policy, { count: 0, lastAt: null }, 5000)).toEqual({ kind: 'start' });
  expect(decideAfterDeaths(policy, { count: 1, lastAt: 10_000 }, 10_500)).toEqual({ kind: 'wait', untilMs: 11_000 });
  expect(decideAfterDeaths(policy, { count: 1, lastAt: 10_000 }, 11_000)).toEqual({ kind: 'start' });
  expect(decideAfterDeaths(policy, { count: 3, lastAt: 10_000 }, 13_999)).toEqual({ kind: 'wait', untilMs: 14_000 });
});

test('the endpoint fails at the limit of deaths within the window, not before', () => {
  expect(decideAfterDeaths(policy, { count: policy.failures - 1, lastAt: 0 }, 10 ** 9).kind).toBe('start');
  expect(decideAfterDeaths(policy, { count: policy.failures, lastAt: 0 }, 10 ** 9)).toEqual({ kind: 'fail' });
  expect(decideAfterDeaths({ ...policy, failures: 2 }, { count: 2, lastAt: 0 }, 0)).toEqual({ kind: 'fail' });
});
