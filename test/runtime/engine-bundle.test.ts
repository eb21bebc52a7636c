/**
 * The built-in engine's bundle (src/runtime/engine-bundle.ts): built into the given directory, named by its content,
 * written once; an engine started from it serves; a bundle that cannot be written leaves the engine on its source
 * through tsx, and says why.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { builtInEngineEntry, SOURCE_ENTRY } from '../../src/runtime/engine-bundle.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';

let dir: string;

beforeAll(async () => {
  // Under the checkout (.tmp/, ignored), as the gateway's own node_modules/.cache is: the bundle's imports resolve there.
  await mkdir(path.resolve('.tmp'), { recursive: true });
  dir = await mkdtemp(path.resolve('.tmp', 'engine-bundle-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('the engine is bundled once, under a name that its content makes, and an engine started from the bundle serves', async () => {
  const out = path.join(dir, 'cache');
  const logged: string[] = [];
  const entry = await builtInEngineEntry({ dir: out, log: (message) => logged.push(message) });
  expect(logged).toEqual([]);
  expect(entry.slice(0, 2)).toEqual([process.execPath, '--enable-source-maps']);
  expect(entry[2]).toMatch(new RegExp(`^${out}/engine-[0-9a-f]{16}\\.mjs$`));
  const written = await stat(entry[2]!);

  // Asked again (another gateway, a restart), the same file, not written again; nothing half-written is left.
  expect(await builtInEngineEntry({ dir: out })).toEqual(entry);
  expect((await stat(entry[2]!)).mtimeMs).toBe(written.mtimeMs);
  expect(await readdir(out)).toEqual([path.basename(entry[2]!)]);

  // The bundle is the engine: it loads a model and answers its health check.
  const model = path.join(dir, 'tiny.gguf');
  await writeFile(model, buildTinyGguf());
  const engine = spawn(entry[0]!, [...entry.slice(1), '--model', model, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    let output = '';
    const port = await new Promise<number>((resolve, reject) => {
      const read = (chunk: Buffer) => {
        output += chunk.toString();
        const ready = /"port":(\d+)/.exec(output);
        if (ready) resolve(Number(ready[1]));
      };
      engine.stdout.on('data', read);
      engine.stderr.on('data', read);
      engine.once('exit', (code) => reject(new Error(`the engine exited (${code}):\n${output}`)));
    });
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok', active: 0 });
  } finally {
    engine.kill('SIGKILL');
  }
}, 60_000);

test('a bundle that cannot be written: the engine runs from its source through tsx, and the log says why', async () => {
  const file = path.join(dir, 'not-a-directory');
  await writeFile(file, '');
  const logged: { message: string; error: unknown }[] = [];
  const entry = await builtInEngineEntry({ dir: path.join(file, 'cache'), log: (message, error) => logged.push({ message, error }) });
  expect(entry).toEqual(SOURCE_ENTRY);
  expect(entry).toEqual([process.execPath, '--import', 'tsx', path.resolve('src/engine/main.ts')]);
  expect(logged).toHaveLength(1);
  expect(logged[0]!.message).toMatch(/could not be bundled: replicas run it from its source through tsx/);
  expect((logged[0]!.error as NodeJS.ErrnoException).code).toBe('ENOTDIR');
});
