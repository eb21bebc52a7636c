/**
 * Clean-up for the harness. A hook registered inside `beforeAll` never runs, so the harness queues its clean-ups
 * here, and the `afterAll` of test/support/per-file.ts (a setup file: it runs for every test file) runs them at the
 * end of each test file, newest first. Modules are evaluated once per worker (the suite runs with `isolate: false`):
 * a module's own clean-up, registered when it is imported, goes in `onEveryCleanup`, which runs after each file's.
 */
const cleanups: (() => Promise<void> | void)[] = [];
const standing = new Set<() => Promise<void> | void>();

/** Runs once, at the end of the test file that queued it. */
export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}

/** Runs at the end of every test file from now on (a module's clean-up, queued once when it is imported). */
export function onEveryCleanup(fn: () => Promise<void> | void): void {
  standing.add(fn);
}

export async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) await cleanups.pop()!();
  for (const fn of standing) await fn();
}
