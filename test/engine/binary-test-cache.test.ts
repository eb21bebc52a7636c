/**
 * node-llama-cpp tests a prebuilt binary in a child process before loading it; our patch
 * (patches/node-llama-cpp+3.21.1.patch) remembers a pass so that the next engine on this machine skips the test.
 * Real engine processes (the run's bundle of src/engine/main.ts): the test's child process is seen through a
 * preloaded script that records every process started with node-llama-cpp's TEST_BINDING_CP marker.
 *
 * A directory the operator sets is trusted only as the default one is, where no other user can plant a pass: a
 * marker's name is a hash of what anyone on the machine can read (the binary's path and stat, the GPU type, Node's
 * version, the boot id), so in a directory others can write anyone could plant the pass of a binary that never passed
 * (before, the operator's directory was used whatever its mode and owner).
 */
import { spawn } from 'node:child_process';
import { chmod, chown, copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
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

/** Starts the engine until it is ready, then stops it; resolves with how many binary tests ran meanwhile, and its output. */
async function startEngine(env: Record<string, string>): Promise<{ tests: number; output: string }> {
  const before = await testsRun();
  const child = spawn(process.execPath, [inject('engineBundle'), '--model', tiny.path, '--cpu', '--port', '0', '--threads', '1'], {
    env: { ...process.env, ...env, NODE_OPTIONS: `--require ${spy}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const seen = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('ENGINE_READY')) resolve();
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.on('exit', (code) => reject(new Error(`engine exited ${code} before ready:\n${output}`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  return { tests: (await testsRun()) - before, output };
}

async function testsRun(): Promise<number> {
  const log = await readFile(join(dir, 'tests.log'), 'utf8').catch(() => '');
  return log.split('\n').filter(Boolean).length;
}

test('a binary that passed its test is not tested again; without the cache every start tests it', async () => {
  const cache = join(dir, 'cache');
  await mkdir(cache, { mode: 0o700 });
  expect((await startEngine({ [BINARY_TEST_CACHE_ENV]: cache })).tests).toBe(1);
  expect((await readdir(cache)).filter((f) => f.endsWith('.passed'))).toHaveLength(1);
  expect((await startEngine({ [BINARY_TEST_CACHE_ENV]: cache })).tests).toBe(0);
  // An empty value turns the memory off: the operator's choice is kept.
  expect((await startEngine({ [BINARY_TEST_CACHE_ENV]: '' })).tests).toBe(1);
}, 120_000);

test('a pass is remembered per binary: a marker for another key does not skip the test', async () => {
  const cache = join(dir, 'other');
  await mkdir(cache, { mode: 0o700 });
  await writeFile(join(cache, `${'0'.repeat(64)}.passed`), '');
  expect((await startEngine({ [BINARY_TEST_CACHE_ENV]: cache })).tests).toBe(1);
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

test("a pass planted in an operator's directory that others can write does not skip the binary's test", async () => {
  // The marker a real pass leaves, in a private directory: its name is what a planter would compute.
  const own = join(dir, 'own');
  await mkdir(own, { mode: 0o700 });
  expect((await startEngine({ [BINARY_TEST_CACHE_ENV]: own })).tests).toBe(1);
  const [marker] = (await readdir(own)).filter((f) => f.endsWith('.passed'));
  expect(marker).toBeDefined();

  // The same name planted in a directory anyone can write (as /tmp is), named by the operator.
  const shared = join(dir, 'shared');
  await mkdir(shared);
  await chmod(shared, 0o1777);
  await copyFile(join(own, marker!), join(shared, marker!));
  const planted = await startEngine({ [BINARY_TEST_CACHE_ENV]: shared });
  expect(planted.tests).toBe(1);
  // Said where an operator reads it (the replica's log), naming the variable and why.
  expect(planted.output).toContain(`${BINARY_TEST_CACHE_ENV} (${shared}) is not used: it is not a directory that only this user`);

  // Group-writable is refused alike; the operator's private directory is used as the default one is.
  await chmod(shared, 0o770);
  expect((await startEngine({ [BINARY_TEST_CACHE_ENV]: shared })).tests).toBe(1);
  expect((await startEngine({ [BINARY_TEST_CACHE_ENV]: own })).tests).toBe(0);
}, 180_000);

test("the operator's directory is checked before node-llama-cpp reads it: off (empty) where it cannot be trusted", async () => {
  const shared = join(dir, 'world');
  await mkdir(shared);
  await chmod(shared, 0o777);
  const lines: string[] = [];
  const env: NodeJS.ProcessEnv = { [BINARY_TEST_CACHE_ENV]: shared };
  rememberBinaryTests(env, (line) => lines.push(line));
  expect(env[BINARY_TEST_CACHE_ENV]).toBe('');
  expect(lines).toEqual([
    `[engine] ${BINARY_TEST_CACHE_ENV} (${shared}) is not used: it is not a directory that only this user (or root) can write, and a pass planted there would skip the binary's test`,
  ]);
  // A file in its place is refused too.
  const file = join(dir, 'a-file');
  await writeFile(file, '', { mode: 0o600 });
  const notDir: NodeJS.ProcessEnv = { [BINARY_TEST_CACHE_ENV]: file };
  rememberBinaryTests(notDir, (line) => lines.push(line));
  expect(notDir[BINARY_TEST_CACHE_ENV]).toBe('');
  expect(lines).toHaveLength(2);
  // Missing: it holds no pass (node-llama-cpp's write of one fails quietly), and it is checked again at the next start.
  const missing: NodeJS.ProcessEnv = { [BINARY_TEST_CACHE_ENV]: join(dir, 'missing') };
  rememberBinaryTests(missing, () => lines.push('unexpected'));
  expect(missing[BINARY_TEST_CACHE_ENV]).toBe(join(dir, 'missing'));
  // Private: kept as the operator set it.
  const own = join(dir, 'private');
  await mkdir(own, { mode: 0o700 });
  const kept: NodeJS.ProcessEnv = { [BINARY_TEST_CACHE_ENV]: own };
  rememberBinaryTests(kept, () => lines.push('unexpected'));
  expect(kept[BINARY_TEST_CACHE_ENV]).toBe(own);
  expect(lines).toHaveLength(2);
});
