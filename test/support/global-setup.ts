import { build } from 'esbuild';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build as viteBuild } from 'vite';
import type { TestProject } from 'vitest/node';
import { NODE_BUNDLE } from '../../src/runtime/engine-bundle.js';
import { startEmbeddedPostgres } from '../../src/storage/embedded-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    /** The built-in engine (src/engine/main.ts) bundled into one file for this run: see engineBundle below. */
    engineBundle: string;
    /** The endpoint CLI bundled the same way, run as bin/dedicated.mjs runs the source: see bundles below. */
    cliBundle: string;
    /** The model fetcher (src/models/fetch-main.ts, a pod's init container) bundled the same way. */
    fetchBundle: string;
    /** The gateway (src/main.ts, what `npm start` runs) bundled the same way: test/support/processes.ts runs it. */
    gatewayBundle: string;
    /** The admin CLI (src/cli/admin.ts, what `npm run admin` runs) bundled the same way. */
    adminBundle: string;
    /** The web console as its sources are now, built once for the run (test/console/browser.ts serves it). */
    consoleBuild: string;
  }
}

/** Starts one real PostgreSQL for the whole run; test files make their own databases in it. */
export default async function setup(project: TestProject) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-test-pg-'));
  // The server runs as the `postgres` user, which must be able to reach its data directory.
  await chmod(dir, 0o755);
  // The database, the bundles and the console's build, side by side: each waits mostly on its own processes or files.
  const [pg, bundleDir, consoleDir] = await Promise.all([
    startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), ephemeral: true }),
    bundles(),
    consoleBuild(),
  ]);
  project.provide('pgAdminUrl', pg.adminUrl);
  project.provide('consoleBuild', consoleDir);
  project.provide('engineBundle', path.join(bundleDir, 'main.mjs'));
  project.provide('cliBundle', path.join(bundleDir, 'dedicated.mjs'));
  project.provide('fetchBundle', path.join(bundleDir, 'fetch-main.mjs'));
  project.provide('gatewayBundle', path.join(bundleDir, 'gateway.mjs'));
  project.provide('adminBundle', path.join(bundleDir, 'admin.mjs'));
  return async () => {
    await pg.stop();
    await rm(dir, { recursive: true, force: true });
    await rm(bundleDir, { recursive: true, force: true });
    await rm(consoleDir, { recursive: true, force: true });
  };
}

/**
 * The console built once for the run, where each browser test file built its own (Vite: a few seconds of CPU each, six
 * times). The pages only read it; each file's gateway serves it.
 */
async function consoleBuild(): Promise<string> {
  const outDir = await mkdtemp(path.join(os.tmpdir(), 'console-build-'));
  await viteBuild({ configFile: 'src/console/vite.config.ts', logLevel: 'warn', build: { outDir, emptyOutDir: true } });
  return outDir;
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The engine, the endpoint CLI, the model fetcher, the gateway and the admin CLI as ES modules (their packages left as
 * imports), built once per run. Started with plain Node.js, the engine is ready in about half the time that
 * `node --import tsx src/engine/main.ts` takes (tsx's loader in the engine and in node-llama-cpp's binary check, which
 * forks the engine's Node.js with its flags), a CLI call takes 0.9 s instead of 1.6, and a gateway process or an admin
 * command spends about a second less CPU starting (tsx's loader compiling and resolving each source file). The same
 * code: tsx compiles each file with this same esbuild. Under the checkout (.tmp/, ignored), so that their imports
 * resolve to node_modules, and two directories deep, as the sources that find files next to them by
 * `import.meta.url` are (src/storage/database.ts the migrations, src/http/console-route.ts the built console,
 * src/runtime/engine-bundle.ts the engine's source): in a bundle each such path resolves against the bundle's own
 * location, which is then the same.
 */
async function bundles(): Promise<string> {
  await mkdir(path.join(ROOT, '.tmp'), { recursive: true });
  const dir = await mkdtemp(path.join(ROOT, '.tmp', 'test-engine-'));
  const common = { ...NODE_BUNDLE, sourcemap: true, logLevel: 'warning' } as const;
  const entry = (source: string, out: string) => build({ ...common, entryPoints: [path.join(ROOT, source)], outfile: path.join(dir, out) });
  await Promise.all([
    entry('src/engine/main.ts', 'main.mjs'),
    // The endpoint CLI with its packages in the bundle too: a call is a process, most of whose start is Node.js finding,
    // reading and linking those packages' files (0.55 s of CPU per call, 0.29 s so; test/cli/dedicated.test.ts makes 48).
    // Their CommonJS modules call `require`, which an ES module must make for them.
    build({
      ...common,
      packages: 'bundle',
      banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
      entryPoints: [path.join(ROOT, 'src/cli/dedicated/main.ts')],
      outfile: path.join(dir, 'dedicated-main.mjs'),
    }),
    entry('src/models/fetch-main.ts', 'fetch-main.mjs'),
    entry('src/main.ts', 'gateway.mjs'),
    // The admin CLI runs its main when it is the process's entry (import.meta.url is argv[1]): so is its bundle.
    entry('src/cli/admin.ts', 'admin.mjs'),
  ]);
  // What bin/dedicated.mjs does, on the bundle instead of the source through tsx.
  await writeFile(
    path.join(dir, 'dedicated.mjs'),
    "const { main } = await import('./dedicated-main.mjs');\nprocess.exitCode = await main(process.argv.slice(2));\n",
  );
  return dir;
}
