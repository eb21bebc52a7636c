/**
 * Clean-up for the harness. A hook registered inside `beforeAll` never runs,
 * so the harness queues its clean-ups here, and one `afterAll` registered when
 * this module is imported (at collection time) runs them, newest first.
 */
import { afterAll } from 'vitest';

const cleanups: (() => Promise<void> | void)[] = [];

afterAll(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}
