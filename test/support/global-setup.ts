import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { build } from 'vite';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/storage/embedded-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    /** The web console built from this tree for this run (test/console serves it). */
    consoleDir: string;
  }
}

/** Starts one real PostgreSQL for the whole run; test files make their own databases in it. */
export default async function setup(project: TestProject) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-test-pg-'));
  // The server runs as the `postgres` user, which must be able to reach its data directory.
  await chmod(dir, 0o755);
  const pg = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), ephemeral: true });
  project.provide('pgAdminUrl', pg.adminUrl);
  // The console is built from the sources as they are now, into this run's own directory (about a second).
  const consoleDir = path.join(dir, 'console');
  await build({ configFile: 'src/console/vite.config.ts', logLevel: 'warn', build: { outDir: consoleDir, emptyOutDir: true } });
  project.provide('consoleDir', consoleDir);
  return async () => {
    await pg.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
