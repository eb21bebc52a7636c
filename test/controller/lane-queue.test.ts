/**
 * The controller's queues (the reconcile loop's passes, the start steps): at most `concurrency` run at once; work in a
 * lane starts before the work of the lanes after it that queued earlier; work still waiting is made urgent by a poke
 * (to the first lane) and runs once.
 */
import { expect, test } from 'vitest';
import { LaneQueue } from '../../src/controller/lane-queue.js';

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
  const queue = new LaneQueue(2);
  const started: string[] = [];
  const passes = Object.fromEntries(['a', 'b', 'r1', 'r2', 'u1', 'u2'].map((id) => [id, held(started, id)]));
  const done = [
    queue.add('a', 1, passes.a!.work),
    queue.add('b', 1, passes.b!.work),
    queue.add('r1', 1, passes.r1!.work),
    queue.add('r2', 1, passes.r2!.work),
    queue.add('u1', 0, passes.u1!.work),
    queue.add('u2', 0, passes.u2!.work),
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
  const queue = new LaneQueue(1);
  const started: string[] = [];
  const passes = Object.fromEntries(['a', 'r1', 'r2'].map((id) => [id, held(started, id)]));
  const done = ['a', 'r1', 'r2'].map((id) => queue.add(id, 1, passes[id]!.work));
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
  const queue = new LaneQueue(1);
  const failing = queue.add('x', 1, () => Promise.reject(new Error('boom')));
  const next = queue.add('y', 1, async () => {});
  await expect(failing).rejects.toThrow('boom');
  await expect(next).resolves.toBeUndefined();
});

test('three lanes: each served in the order queued, the lower lanes first; an out-of-range lane is the nearest', async () => {
  const queue = new LaneQueue(1, 3);
  const started: string[] = [];
  const ids = ['busy', 'p1', 'f1', 'w1', 'p2', 'w2', 'f2', 'late'];
  const passes = Object.fromEntries(ids.map((id) => [id, held(started, id)]));
  const lanes: Record<string, number> = { busy: 0, p1: 2, f1: 1, w1: 0, p2: 2, w2: 0, f2: 1, late: 9 };
  const done = ids.map((id) => queue.add(id, lanes[id]!, passes[id]!.work));
  for (const id of ['busy', 'w1', 'w2', 'f1', 'f2', 'p1', 'p2', 'late']) {
    await new Promise((resolve) => setImmediate(resolve));
    expect(started.at(-1)).toBe(id);
    passes[id]!.end();
  }
  await Promise.all(done);
  expect(started).toEqual(['busy', 'w1', 'w2', 'f1', 'f2', 'p1', 'p2', 'late']);
});

test('work that throws before it returns a promise settles its own promise and frees its slot', async () => {
  const queue = new LaneQueue(1);
  const thrown = queue.add('x', 0, () => {
    throw new Error('at once');
  });
  const next = queue.add('y', 0, async () => 'ran');
  await expect(thrown).rejects.toThrow('at once');
  await expect(next).resolves.toBe('ran');
});

test('hurried to a lane: moved up to it, never down; it still starts once', async () => {
  const queue = new LaneQueue(1, 3);
  const started: string[] = [];
  const ids = ['busy', 'a', 'b', 'c'];
  const passes = Object.fromEntries(ids.map((id) => [id, held(started, id)]));
  const lanes: Record<string, number> = { busy: 0, a: 1, b: 2, c: 2 };
  const done = ids.map((id) => queue.add(id, lanes[id]!, passes[id]!.work));
  expect(queue.hurry('c', 1)).toBe(true); // up to lane 1, behind a
  expect(queue.hurry('a', 2)).toBe(true); // already above: stays
  for (const id of ['busy', 'a', 'c', 'b']) {
    await new Promise((resolve) => setImmediate(resolve));
    expect(started.at(-1)).toBe(id);
    passes[id]!.end();
  }
  await Promise.all(done);
  expect(started).toEqual(['busy', 'a', 'c', 'b']);
});
