/** The inputs scaling.ts gathers for the autoscaler, without processes (the scaling itself runs in scaling.test.ts). */
import { describe, expect, test } from 'vitest';
import { lastActivityAt, needsEveryReplica, scaleInVictims } from '../../src/controller/scaling.js';

describe('scaling inputs', () => {
  test('the last activity is the latest of the last request, an engine’s last request, and a replica’s start', () => {
    const at = (iso: string) => Date.parse(iso);
    expect(
      lastActivityAt(
        { lastRequestAt: new Date('2026-01-01T00:00:10Z') },
        [{ lastRequestAt: '2026-01-01T00:00:20Z' }, undefined, { lastRequestAt: null }],
        [{ readyAt: new Date('2026-01-01T00:00:05Z') }, { readyAt: null }],
      ),
    ).toBe(at('2026-01-01T00:00:20Z'));
    expect(lastActivityAt({ lastRequestAt: null }, [], [{ readyAt: new Date('2026-01-01T00:00:05Z') }])).toBe(at('2026-01-01T00:00:05Z'));
    expect(lastActivityAt({ lastRequestAt: null }, [], [])).toBe(0);
  });

  test('the demand needs every replica when one fewer could not take it', () => {
    expect(needsEveryReplica(5, 2, 4)).toBe(true);
    expect(needsEveryReplica(4, 2, 4)).toBe(false);
    expect(needsEveryReplica(1, 1, 4)).toBe(true);
    expect(needsEveryReplica(0, 1, 4)).toBe(false);
  });

  test('a scale-in removes the newest replicas first', () => {
    const r = (id: string, second: number) => ({ id, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, second)) });
    const serving = [r('old', 1), r('newest', 9), r('middle', 5)];
    expect(scaleInVictims(serving, 1).map((x) => x.id)).toEqual(['newest']);
    expect(scaleInVictims(serving, 2).map((x) => x.id)).toEqual(['newest', 'middle']);
    expect(serving.map((x) => x.id)).toEqual(['old', 'newest', 'middle']);
  });
});
