/**
 * NODE_LLAMA_CPP_BINARY_TEST_CACHE set by the operator: a pass found there skips node-llama-cpp's test of a binary
 * (a child process that loads it), so the directory is trusted only as the default one is, where no other user can
 * plant a pass. A marker's name is a hash of what anyone on the machine can read (the binary's path and stat, the GPU
 * type, Node's version, the boot id): in a directory others can write (a shared /tmp-like one), anyone could plant
 * the pass of a binary that never passed. Real engine processes (the run's bundle of src/engine/main.ts); the
 * binary's test is seen through a preloaded script, as in binary-test-cache.test.ts.
 *
 * Before: the operator's directory was used whatever its mode and owner, and a planted pass skipped the test.
 */
import { spawn } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, inject, test } from 'vitest';
import { BINARY_TEST_CACHE_ENV, rememberBinaryTests } from '../../src/engine/binary-test-cache.js';
import { writeTinyGguf, type TinyGgufFile } from '../support/tiny-gguf.js';

let dir: string;
let tiny: TinyGgufFile;
let spy: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'binary-test-cache-operator-'));
  tiny = await writeTinyGguf(join(dir, 'tiny.gguf'));
  spy = join(dir, 'spy.cjs');
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
