/**
 * How the local runtime runs the built-in engine: `src/engine/main.ts` bundled once per gateway process with esbuild
 * (the compiler tsx itself runs on each file; the packages stay imports) and started with plain Node.js. An engine so
 * started is ready in about 1.4 s, against 2.5 s through tsx's loader (the tiny test model, on a 2-core machine):
 * every replica start, wake and scale-out from zero is that much sooner.
 *
 * The bundle is written under `node_modules/.cache/` of this checkout, so that its imports resolve to this checkout's
 * packages, named by a hash of its content and renamed into place once written: gateways that start together write
 * the same file, and an engine never reads a half-written one. A bundle that cannot be built or written (a read-only
 * checkout) leaves the engine run from its source through tsx, as `npm run engine` does, and says why.
 */
import { createHash, randomUUID } from 'node:crypto';
import { access, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const ENGINE_SOURCE = path.join(ROOT, 'src/engine/main.ts');
const DEFAULT_DIR = path.join(ROOT, 'node_modules/.cache/dedicated-endpoints');

/**
 * How our entry points are bundled (esbuild's options): one ES module for Node.js 20, its packages left as imports
 * (they resolve from where the bundle is written, so it goes under the checkout). The tests' and the benchmarks'
 * bundles are built the same way.
 */
export const NODE_BUNDLE = { bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external' } as const;

/** The engine run from its source through tsx (no bundle): the command, before the engine's own arguments. */
export const SOURCE_ENTRY: readonly string[] = [process.execPath, '--import', 'tsx', ENGINE_SOURCE];

/**
 * The command that starts the built-in engine (its arguments follow): Node.js on a bundle of it, or SOURCE_ENTRY
 * when the bundle could not be had (`log` says why).
 */
export async function builtInEngineEntry(
  options: { dir?: string; log?: (message: string, error?: unknown) => void } = {},
): Promise<readonly string[]> {
  const dir = options.dir ?? DEFAULT_DIR;
  try {
    // Synchronous (a one-off esbuild process, about 0.1 s, once at start): no esbuild service is left running.
    const { buildSync } = await import('esbuild');
    const result = buildSync({
      ...NODE_BUNDLE,
      entryPoints: [ENGINE_SOURCE],
      sourcemap: 'inline',
      write: false,
      logLevel: 'silent',
      // Where the file will be: its imports and source paths are resolved against it.
      outfile: path.join(dir, 'engine.mjs'),
    });
    const code = result.outputFiles[0]!.contents;
    const file = path.join(dir, `engine-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`);
    if (!(await exists(file))) {
      await mkdir(dir, { recursive: true });
      const partial = `${file}.${randomUUID()}.partial`;
      try {
        await writeFile(partial, code);
        await rename(partial, file);
      } catch (error) {
        await rm(partial, { force: true });
        throw error;
      }
    }
    return [process.execPath, '--enable-source-maps', file];
  } catch (error) {
    options.log?.('the built-in engine could not be bundled: replicas run it from its source through tsx (slower to start)', error);
    return SOURCE_ENTRY;
  }
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}
