/**
 * The controller reconciles at once when poked (an API action, such as the
 * wake of a request to a sleeping endpoint), also when the poke comes while
 * a pass over the endpoints is running.
 */
import { afterEach, expect, test } from 'vitest';
import { Controller } from '../../src/controller/controller.js';
import type { ModelStore } from '../../src/models/model-store.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import type { Sql } from '../../src/storage/database.js';

/** A database that has no endpoints, counting the controller's passes (each starts by listing the endpoints to reconcile). */
function countingDatabase(onPass: (pass: number) => void): { sql: Sql; passes: () => number } {
  let passes = 0;
  const sql = ((strings: TemplateStringsArray) => {
    if (strings.join('?').includes('FROM endpoints WHERE cleaned_at IS NULL')) onPass(++passes);
    return Promise.resolve([]);
  }) as unknown as Sql;
  return { sql, passes: () => passes };
}

const runtime = { name: 'fake', node: 'test-node', reapOrphans: async () => [] } as unknown as Runtime;

let controller: Controller | undefined;
afterEach(async () => {
  await controller?.stop();
  controller = undefined;
});

async function until(what: string, probe: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!probe()) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test('a poke while waiting for the next interval starts a pass at once', async () => {
  const db = countingDatabase(() => {});
  // An interval far longer than the test: every pass after the first comes from a poke.
  controller = new Controller({ sql: db.sql, runtime, models: {} as ModelStore, builtInEngine: true, intervalMs: 600_000, log: () => {} });
  await controller.start();
  await until('the first pass', () => db.passes() === 1, 5000);
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(db.passes()).toBe(1);
  controller.poke();
  await until('the poked pass', () => db.passes() === 2, 2000);
});

test('a poke during a pass is not lost: another pass follows at once', async () => {
  let pokeDuring = 0;
  const db = countingDatabase((pass) => {
    // The API changed an endpoint while this pass was listing them.
    if (pass === pokeDuring) controller!.poke();
  });
  controller = new Controller({ sql: db.sql, runtime, models: {} as ModelStore, builtInEngine: true, intervalMs: 600_000, log: () => {} });
  await controller.start();
  await until('the first pass', () => db.passes() === 1, 5000);
  pokeDuring = 2;
  controller.poke();
  await until('the pass after the poke that came during pass 2', () => db.passes() === 3, 2000);
  // And then it waits again: no pass without a poke.
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(db.passes()).toBe(3);
});

test('a poke naming an endpoint reconciles that endpoint alone, without a pass over all of them', async () => {
  const leaseAttempts: unknown[] = [];
  let passes = 0;
  const sql = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    const text = strings.join('?');
    if (text.includes('FROM endpoints WHERE cleaned_at IS NULL')) passes++;
    if (text.includes('INSERT INTO endpoint_leases')) leaseAttempts.push(values[0]);
    return Promise.resolve([]); // no lease granted: nothing more to do
  }) as unknown as Sql;
  controller = new Controller({ sql, runtime, models: {} as ModelStore, builtInEngine: true, intervalMs: 600_000, log: () => {} });
  await controller.start();
  await until('the first pass', () => passes === 1, 5000);
  controller.poke('ep_one');
  controller.poke('ep_two');
  await until('both poked endpoints tried', () => leaseAttempts.length === 2, 2000);
  expect(leaseAttempts.sort()).toEqual(['ep_one', 'ep_two']);
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(passes).toBe(1);
  expect(leaseAttempts).toHaveLength(2);
});
