/**
 * node-llama-cpp tests a prebuilt binary in a child process before loading it; our patch
 * (patches/node-llama-cpp+3.21.1.patch) remembers a pass so that the next engine on this machine skips the test.
 * Real engine processes (the run's bundle of src/engine/main.ts): the test's child process is seen through a
 * preloaded script that records every process started with node-llama-cpp's TEST_BINDING_CP marker.
 */
import { spawn } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, inject, test } from 'vitest';
import { BINARY_TEST_CACHE_ENV, privateBinaryTestDir, rememberBinaryTests } from '../../src/engine/binary-test-cache.js';
import { writeTinyGguf, type TinyGgufFile } from '../support/tiny-gguf.js';

let dir: string;
let tiny: TinyGgufFile;
let spy: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'binary-test-cache-'));
  tiny = await writeTinyGguf(join(dir, 'tiny.gguf'));
  spy = join(dir, 'spy.cjs');
  // Appends a line for each binary test node-llama-cpp starts (its child runs with TEST_BINDING_CP=true).
  await writeFile(
    spy,
    `if (process.env.TEST_BINDING_CP === 'true') require('node:fs').appendFileSync(${JSON.stringify(join(dir, 'tests.log'))}, 'tested\\n');\n`,
  );
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Starts the engine until it is ready, then stops it; resolves with how many binary tests ran meanwhile. */
async function startEngine(env: Record<string, string>): Promise<number> {
  const before = await testsRun();
  const child = spawn(process.execPath, [inject('engineBundle'), '--model', tiny.path, '--cpu', '--port', '0', '--threads', '1'], {
    env: { ...process.env, ...env, NODE_OPTIONS: `--require ${spy}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const seen = (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('ENGINE_READY')) resolve();
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.on('exit', (code) => reject(new Error(`engine exited ${code} before ready:\n${out}`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  return (await testsRun()) - before;
}

async function testsRun(): Promise<number> {
  const log = await readFile(join(dir, 'tests.log'), 'utf8').catch(() => '');
  return log.split('\n').filter(Boolean).length;
}

test('a binary that passed its test is not tested again; without the cache every start tests it', async () => {
  const cache = join(dir, 'cache');
  await mkdir(cache, { mode: 0o700 });
  expect(await startEngine({ [BINARY_TEST_CACHE_ENV]: cache })).toBe(1);
  expect((await readdir(cache)).filter((f) => f.endsWith('.passed'))).toHaveLength(1);
  expect(await startEngine({ [BINARY_TEST_CACHE_ENV]: cache })).toBe(0);
  // An empty value turns the memory off: the operator's choice is kept.
  expect(await startEngine({ [BINARY_TEST_CACHE_ENV]: '' })).toBe(1);
}, 120_000);

test('a pass is remembered per binary: a marker for another key does not skip the test', async () => {
  const cache = join(dir, 'other');
  await mkdir(cache, { mode: 0o700 });
  await writeFile(join(cache, `${'0'.repeat(64)}.passed`), '');
  expect(await startEngine({ [BINARY_TEST_CACHE_ENV]: cache })).toBe(1);
}, 60_000);

test('only a directory of this user that no one else can write is trusted', async () => {
  const base = await mkdtemp(join(dir, 'base-'));
  const uid = process.getuid!();
  const own = privateBinaryTestDir(base);
  expect(own).toBe(join(base, `node-llama-cpp-binary-tests-${uid}`));
  // Group- or world-writable: another user could plant a pass.
  await chmod(own!, 0o777);
  expect(privateBinaryTestDir(base)).toBeUndefined();
  await chmod(own!, 0o700);
  expect(privateBinaryTestDir(base)).toBe(own);
  // A symbolic link planted in its place.
  const elsewhere = await mkdtemp(join(dir, 'elsewhere-'));
  const linkedBase = await mkdtemp(join(dir, 'linked-'));
  await symlink(elsewhere, join(linkedBase, `node-llama-cpp-binary-tests-${uid}`));
  expect(privateBinaryTestDir(linkedBase)).toBeUndefined();
  // Owned by someone else (root can give it away here).
  if (uid === 0) {
    await chown(own!, 4242, 4242);
    expect(privateBinaryTestDir(base)).toBeUndefined();
  }
});

test('the engine sets the variable only where the operator did not', () => {
  const env: NodeJS.ProcessEnv = {};
  rememberBinaryTests(env);
  expect(env[BINARY_TEST_CACHE_ENV]).toMatch(/node-llama-cpp-binary-tests-\d+$/);
  const set: NodeJS.ProcessEnv = { [BINARY_TEST_CACHE_ENV]: '/somewhere' };
  rememberBinaryTests(set);
  expect(set[BINARY_TEST_CACHE_ENV]).toBe('/somewhere');
  const off: NodeJS.ProcessEnv = { [BINARY_TEST_CACHE_ENV]: '' };
  rememberBinaryTests(off);
  expect(off[BINARY_TEST_CACHE_ENV]).toBe('');
});
