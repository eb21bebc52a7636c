import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql ships CommonJS and ESM builds. Our sources must get the same copy
    // that graphql-yoga and Pothos load through Node, or `instanceof GraphQLError` fails.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    // One throw-away PostgreSQL for the run; each test file creates its own database in it.
    globalSetup: ['test/support/global-setup.ts'],
    // Each worker keeps its modules from one test file to the next (the sources and the harness are evaluated once
    // per worker, not once per file: that was about a seventh of the suite's time); per-file.ts, a setup file, runs
    // before every file and ends it with its clean-ups (test/support/cleanup.ts).
    isolate: false,
    setupFiles: ['test/support/per-file.ts'],
    testTimeout: 30_000,
    // expect.poll waits for a condition (a page rendered, a row written): 1 s, Vitest's default, is too short a wait on a
    // loaded 2-core machine (a console test once saw 10 of 13 versions rendered after 1 s of a full run). A poll ends
    // as soon as its condition holds; none measures how fast.
    expect: { poll: { timeout: 10_000 } },
    hookTimeout: 60_000,
    pool: 'forks',
    // Most test time is waiting (engines starting, cooldowns, timers), not CPU: with two files at a time the suite kept
    // this 2-core machine about half busy (870 s of CPU in a 930 s run); three at a time took 680 s, against 800 to
    // 930 s with two (5 Dec 2026). VITEST_WORKERS overrides it (docs/development.md, Suite time).
    maxWorkers: Number(process.env.VITEST_WORKERS ?? Math.max(3, availableParallelism())),
    reporters: ['default'],
  },
});
