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

/**
 * Runs the clean-ups queued until now (newest first), then the standing ones. Each runs whatever the others do, and
 * their failures are thrown together at the end. The queue is taken whole first: a run that outlives its hook's
 * timeout (Vitest then starts the next file) never takes the next file's clean-ups.
 */
export async function runCleanups(): Promise<void> {
  const mine = cleanups.splice(0);
  const errors: unknown[] = [];
  const run = async (fn: () => Promise<void> | void) => {
    try {
      await fn();
    } catch (error) {
      errors.push(error);
    }
  };
  while (mine.length > 0) await run(mine.pop()!);
  for (const fn of standing) await run(fn);
  if (errors.length > 0) throw new AggregateError(errors, `${errors.length} clean-up(s) failed`);
}
