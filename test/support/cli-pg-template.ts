/**
 * An initialised embedded PostgreSQL data directory, copied: for tests whose subject is what runs on a data directory
 * (a start, its lock, a Ctrl-C), not its initdb, which takes seconds of CPU (about 5 s of a start on a loaded 2-core
 * machine, against under 1 s to start on an initialised one). The template is made once per machine and version of
 * PostgreSQL by the code's own start (src/storage/embedded-postgres.ts), then stopped, and kept under the checkout's
 * .tmp/ (ignored) for the next runs; several test processes that find none at once each make one and the first
 * rename wins. A copy is what a data directory that a stopped gateway left behind looks like: the cluster and its
 * credentials file beside it.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startEmbeddedPostgres } from '../../src/storage/embedded-postgres.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

/** The PostgreSQL binaries' package version: a template is made by, and for, one version. */
async function postgresVersion(): Promise<string> {
  const require = createRequire(import.meta.url);
  // Its `exports` names no package.json: found beside the entry (dist/index.js).
  const manifest = path.resolve(path.dirname(require.resolve('embedded-postgres')), '..', 'package.json');
  const { version } = JSON.parse(await readFile(manifest, 'utf8')) as { version: string };
  return `${process.platform}-${process.arch}-${version}`;
}

let template: Promise<string> | undefined;

/** The template's directory (holding `pg` and `pg.credentials.json`), made the first time it is asked for. */
function templateDir(): Promise<string> {
  template ??= (async () => {
    const dir = path.join(ROOT, '.tmp', `pg-template-${await postgresVersion()}`);
    if (existsSync(path.join(dir, 'pg', 'PG_VERSION'))) return dir;
    const partial = `${dir}.${randomBytes(6).toString('hex')}.partial`;
    await mkdir(partial, { recursive: true });
    // The server runs as the `postgres` user, which must be able to reach its data directory.
    await chmod(partial, 0o755);
    try {
      const server = await startEmbeddedPostgres({ dataDir: path.join(partial, 'pg') });
      await server.stop();
      await rename(partial, dir).catch((error: NodeJS.ErrnoException) => {
        // Another test process made it first: its copy is as good.
        if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
      });
    } finally {
      await rm(partial, { recursive: true, force: true });
    }
    return dir;
  })();
  template.catch(() => (template = undefined));
  return template;
}

/**
 * Makes `pgDir` (which must not exist yet) an initialised, stopped cluster with its credentials beside it, as the
 * embedded database's first start leaves it. `cp -a` keeps the files' owner: the `postgres` user, as root.
 */
export async function copyInitialisedDataDir(pgDir: string): Promise<void> {
  const from = await templateDir();
  await run('cp', ['-a', path.join(from, 'pg'), pgDir]);
  await run('cp', ['-a', path.join(from, 'pg.credentials.json'), `${pgDir}.credentials.json`]);
}
