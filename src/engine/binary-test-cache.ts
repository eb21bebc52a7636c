/**
 * Where node-llama-cpp remembers that a prebuilt llama.cpp binary passed its test on this machine.
 *
 * Before loading a prebuilt binary on Linux, node-llama-cpp loads it once in a child process of its own (a binary that
 * crashes must not take the caller down). That test is about half of a tiny model's start: a second Node.js process
 * and the binary loaded twice (1.3 s to 0.75 s to ready, 1.75 s to 1.1 s of CPU, this machine, 5 Dec 2026). Our patch
 * of node-llama-cpp (patches/node-llama-cpp+3.21.1.patch) skips the test for a binary that passed it since the
 * machine booted, when NODE_LLAMA_CPP_BINARY_TEST_CACHE names a directory to remember passes in.
 *
 * The engine uses a directory of its own user under the system's temporary directory unless the variable is set (an
 * empty value turns the memory off). A directory another user could write is not used, the operator's included: a
 * marker's name is a hash of what anyone on the machine can read (the binary's path and stat, Node's version, the boot
 * id), so a pass planted there would skip the test of a binary that never passed it.
 */
import { lstatSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const BINARY_TEST_CACHE_ENV = 'NODE_LLAMA_CPP_BINARY_TEST_CACHE';

/** The directory to remember passes in, or undefined where none can be trusted. */
export function privateBinaryTestDir(base = tmpdir()): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const dir = path.join(base, `node-llama-cpp-binary-tests-${uid}`);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return undefined;
  }
  try {
    const stat = lstatSync(dir);
    if (!stat.isDirectory() || stat.uid !== uid || (stat.mode & 0o077) !== 0) return undefined;
    return dir;
  } catch {
    return undefined;
  }
}

/**
 * Whether the operator's `dir` may hold passes: a directory (it may be reached through a link: the operator named it)
 * of this user's or root's that neither its group nor others can write. A directory that does not exist holds none,
 * and is checked again at the next start.
 */
function trustedOperatorDir(dir: string): boolean {
  const uid = process.getuid?.();
  let stat;
  try {
    stat = statSync(dir);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
  return stat.isDirectory() && (stat.uid === uid || stat.uid === 0) && (stat.mode & 0o022) === 0;
}

/**
 * Sets the variable for this process's node-llama-cpp unless the operator did (set or emptied). A directory the
 * operator set that other users can write is not used (the variable is emptied: the memory is off), and `log` says so.
 */
export function rememberBinaryTests(
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): void {
  const set = env[BINARY_TEST_CACHE_ENV];
  if (set === undefined) {
    const dir = privateBinaryTestDir();
    if (dir) env[BINARY_TEST_CACHE_ENV] = dir;
  } else if (set !== '' && !trustedOperatorDir(set)) {
    env[BINARY_TEST_CACHE_ENV] = '';
    log(
      `[engine] ${BINARY_TEST_CACHE_ENV} (${set}) is not used: it is not a directory that only this user (or root) can write, and a pass planted there would skip the binary's test`,
    );
  }
}
