/** The FIFO semaphore of src/util/semaphore.ts: permits, arrival order, abort, idempotent release. */
import { expect, test } from 'vitest';
import { Semaphore, SemaphoreAbortedError } from '../../src/util/semaphore.js';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

test('hands out at most `permits` at once; the rest wait in arrival order', async () => {
  const semaphore = new Semaphore(2);
  const a = await semaphore.acquire();
  const b = await semaphore.acquire();
  expect(semaphore.active).toBe(2);
  const order: string[] = [];
  const c = semaphore.acquire().then((p) => (order.push('c'), p));
  const d = semaphore.acquire().then((p) => (order.push('d'), p));
  await tick();
  expect(order).toEqual([]);
  expect(semaphore.waiting).toBe(2);
  b.release();
  await tick();
  expect(order).toEqual(['c']);
  expect(semaphore.active).toBe(2);
  expect(semaphore.waiting).toBe(1);
  a.release();
  await tick();
  expect(order).toEqual(['c', 'd']);
  (await c).release();
  (await d).release();
  expect(semaphore.active).toBe(0);
  expect(semaphore.waiting).toBe(0);
});

test('release is idempotent: a second call frees nothing more', async () => {
  const semaphore = new Semaphore(1);
  const a = await semaphore.acquire();
  const waiter = semaphore.acquire();
  a.release();
  a.release();
  const b = await waiter;
  expect(semaphore.active).toBe(1);
  expect(semaphore.tryAcquire()).toBeUndefined();
  b.release();
  expect(semaphore.active).toBe(0);
});

test('tryAcquire never jumps the queue', async () => {
  const semaphore = new Semaphore(1);
  const a = semaphore.tryAcquire()!;
  expect(a).toBeDefined();
  const waiter = semaphore.acquire();
  expect(semaphore.tryAcquire()).toBeUndefined();
  a.release();
  // The permit went to the waiter, not to a later tryAcquire.
  expect(semaphore.tryAcquire()).toBeUndefined();
  (await waiter).release();
  expect(semaphore.tryAcquire()).toBeDefined();
});

test('an aborted waiter leaves the queue without a permit; an already aborted signal rejects at once', async () => {
  const semaphore = new Semaphore(1);
  const held = await semaphore.acquire();
  const controller = new AbortController();
  const aborted = semaphore.acquire(controller.signal);
  const next = semaphore.acquire();
  expect(semaphore.waiting).toBe(2);
  controller.abort();
  await expect(aborted).rejects.toBeInstanceOf(SemaphoreAbortedError);
  expect(semaphore.waiting).toBe(1);
  held.release();
  (await next).release();
  expect(semaphore.active).toBe(0);

  const gone = new AbortController();
  gone.abort();
  await expect(semaphore.acquire(gone.signal)).rejects.toBeInstanceOf(SemaphoreAbortedError);
  expect(semaphore.active).toBe(0);
});

test('a signal aborted after its permit was granted changes nothing', async () => {
  const semaphore = new Semaphore(1);
  const held = await semaphore.acquire();
  const controller = new AbortController();
  const waiter = semaphore.acquire(controller.signal);
  held.release();
  const permit = await waiter;
  controller.abort();
  expect(semaphore.active).toBe(1);
  permit.release();
  expect(semaphore.active).toBe(0);
});

test('permits must be a positive integer', () => {
  expect(() => new Semaphore(0)).toThrow(RangeError);
  expect(() => new Semaphore(1.5)).toThrow(RangeError);
});
