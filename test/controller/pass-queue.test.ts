/**
 * The reconcile loop's queue of passes: at most `concurrency` run at once; a change's (urgent) pass starts before
 * the routine ones that queued earlier; a routine pass still waiting is made urgent by a poke and runs once.
 */
import { expect, test } from 'vitest';
import { PassQueue } from '../../src/controller/pass-queue.js';

/** A pass the test ends when it likes; its start is recorded. */
function held(started: string[], id: string) {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  return {
    work: async () => {
      started.push(id);
      await ended;
    },
    end: () => end(),
  };
}

test('urgent passes start before the routine ones queued earlier; never more than the slots at once', async () => {
  const queue = new PassQueue(2);
  const started: string[] = [];
  const passes = Object.fromEntries(['a', 'b', 'r1', 'r2', 'u1', 'u2'].map((id) => [id, held(started, id)]));
  const done = [
    queue.add('a', false, passes.a!.work),
    queue.add('b', false, passes.b!.work),
    queue.add('r1', false, passes.r1!.work),
    queue.add('r2', false, passes.r2!.work),
    queue.add('u1', true, passes.u1!.work),
    queue.add('u2', true, passes.u2!.work),
  ];
  await Promise.resolve();
  expect(started).toEqual(['a', 'b']);
  passes.a!.end();
  await new Promise((resolve) => setImmediate(resolve));
  expect(started).toEqual(['a', 'b', 'u1']);
  passes.b!.end();
  passes.u1!.end();
  await new Promise((resolve) => setImmediate(resolve));
  expect(started).toEqual(['a', 'b', 'u1', 'u2', 'r1']);
  for (const id of ['u2', 'r1', 'r2']) {
    passes[id]!.end();
    await new Promise((resolve) => setImmediate(resolve));
  }
  await Promise.all(done);
  expect(started).toEqual(['a', 'b', 'u1', 'u2', 'r1', 'r2']);
});

test('a waiting routine pass made urgent runs next, once; one that started cannot be hurried', async () => {
  const queue = new PassQueue(1);
  const started: string[] = [];
  const passes = Object.fromEntries(['a', 'r1', 'r2'].map((id) => [id, held(started, id)]));
  const done = ['a', 'r1', 'r2'].map((id) => queue.add(id, false, passes[id]!.work));
  expect(queue.hurry('a')).toBe(false);
  expect(queue.hurry('r2')).toBe(true);
  expect(queue.hurry('nobody')).toBe(false);
  for (const id of ['a', 'r2', 'r1']) {
    await new Promise((resolve) => setImmediate(resolve));
    passes[id]!.end();
  }
  await Promise.all(done);
  expect(started).toEqual(['a', 'r2', 'r1']);
});

test('a pass that fails settles its own promise only; the queue goes on', async () => {
  const queue = new PassQueue(1);
  const failing = queue.add('x', false, () => Promise.reject(new Error('boom')));
  const next = queue.add('y', false, async () => {});
  await expect(failing).rejects.toThrow('boom');
  await expect(next).resolves.toBeUndefined();
});
