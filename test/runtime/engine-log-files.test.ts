/**
 * The local runtime's engine log files: a tail reads across the rotated part, a follow gets the tail then new lines
 * (also after a rotation empties the file), and the keeper caps sizes and removes old logs of replicas that no longer run.
 */
import { appendFile, mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { EngineLogKeeper, followLogFile, readLogFile, rotatedPath } from '../../src/runtime/engine-log-files.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'engine-logs-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('a tail reads the last lines, across the rotated part', async () => {
  const file = path.join(dir, 'rep_a.log');
  await writeFile(rotatedPath(file), 'one\ntwo\n');
  await writeFile(file, 'three\nfour\n');
  expect(await readLogFile(file, { tailLines: 3 })).toBe('two\nthree\nfour');
  expect(await readLogFile(file, { tailLines: 1 })).toBe('four');
  expect(await readLogFile(path.join(dir, 'none.log'), { tailLines: 5 })).toBe('');
});

test('a follow gives the tail, then whole new lines, also after the file was emptied by a rotation', async () => {
  const file = path.join(dir, 'rep_b.log');
  await writeFile(file, 'old\nlast\npart');
  const stop = new AbortController();
  const chunks: string[] = [];
  const reading = (async () => {
    for await (const chunk of followLogFile(file, stop.signal, { tailLines: 1, pollMs: 20 })) {
      chunks.push(chunk);
      if (chunk.includes('after rotation')) stop.abort();
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, 100));
  await appendFile(file, 'ial line\n');
  await new Promise((resolve) => setTimeout(resolve, 100));
  await writeFile(file, ''); // copytruncate
  await appendFile(file, 'after rotation\n');
  await reading;
  expect(chunks).toEqual(['last', 'partial line', 'after rotation']);
});

test('the keeper rotates a log past its cap and removes old logs of replicas no longer running', async () => {
  const big = path.join(dir, 'rep_big.log');
  await writeFile(big, 'x'.repeat(2000) + '\n');
  const old = path.join(dir, 'rep_old.log');
  const running = path.join(dir, 'rep_running.log');
  await writeFile(old, 'old\n');
  await writeFile(running, 'running\n');
  const longAgo = new Date(Date.now() - 10 * 86_400_000);
  await utimes(old, longAgo, longAgo);
  await utimes(running, longAgo, longAgo);
  const keeper = new EngineLogKeeper(dir, { maxBytes: 1000, maxAgeMs: 7 * 86_400_000 }, async (id) => id === 'rep_running');
  await keeper.sweep();
  expect((await stat(big)).size).toBe(0);
  expect((await readFile(rotatedPath(big), 'utf8')).length).toBe(2001);
  await expect(stat(old)).rejects.toThrow();
  expect(await readFile(running, 'utf8')).toBe('running\n');
});
