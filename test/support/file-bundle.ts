/**
 * One of our entry points bundled for a test file, where the run's bundles (test/support/global-setup.ts) have none:
 * built with esbuild before the file's tests (a fraction of a second) and removed after them. Run with plain Node.js
 * it starts with about a second less CPU than its source through tsx's loader, which compiles and resolves each source
 * file at every start. The same code, built as the run's bundles are: under the checkout's .tmp/ (ignored), so that its
 * imports resolve to node_modules, and two directories deep, as its source is, so that a path it finds by
 * `import.meta.url` (src/storage/database.ts the migrations) resolves the same. TEST_ENGINE=tsx runs the source.
 */
import { build } from 'esbuild';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { NODE_BUNDLE } from '../../src/runtime/engine-bundle.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * `source` (relative to the checkout) bundled for this file: `entry()` is the file to run or import, valid in its
 * tests (the bundle, or the source with TEST_ENGINE=tsx), and `node()` the arguments that run it.
 */
export function bundledForFile(source: string): { entry(): string; node(): string[] } {
  const tsx = process.env.TEST_ENGINE === 'tsx';
  let dir: string | undefined;
  let file = path.join(ROOT, source);
  beforeAll(async () => {
    if (tsx) return;
    await mkdir(path.join(ROOT, '.tmp'), { recursive: true });
    dir = await mkdtemp(path.join(ROOT, '.tmp', 'test-file-bundle-'));
    const outfile = path.join(dir, `${path.basename(source, '.ts')}.mjs`);
    await build({ ...NODE_BUNDLE, sourcemap: true, logLevel: 'warning', entryPoints: [path.join(ROOT, source)], outfile });
    file = outfile;
  }, 60_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return { entry: () => file, node: () => (tsx ? ['--import', 'tsx', file] : [file]) };
}
