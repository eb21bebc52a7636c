/**
 * The controller reconciles at once when poked (an API action, such as the
 * wake of a request to a sleeping endpoint), also when the poke comes while
 * a pass over the endpoints is running.
 *
 * A real controller on a real database (no engine is started: the endpoints
 * hold no replicas, maxReplica 0). What a pass did is read from the database:
 * a full pass takes the lease of every endpoint it lists, a poke naming an
 * endpoint takes that endpoint's lease alone. The interval is ten minutes, so
 * every pass after the first comes from a poke (the last test drives the loop alone, at a short interval).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { Controller } from '../../src/controller/controller.js';
import { ReconcileLoop, type ReconcileLoopOptions } from '../../src/controller/reconcile-loop.js';
import { ModelCache } from '../../src/models/model-cache.js';
import { ModelStore } from '../../src/models/model-store.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { readPassState } from '../../src/storage/pass-reads.js';
import { QUEUE_DEPTH_STALE_MS } from '../../src/storage/queue-depth-repository.js';
import { waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createBody, seedPrincipal } from '../support/gateway.js';

/**
 * The engine runtime, which these endpoints (maxReplica 0) never reach: only the controller's construction (its
 * change listener) and the start's reaping of orphans call it.
 */
const runtime = { name: 'fake', node: 'test-node', onChange: () => {}, reapOrphans: async () => [] } as unknown as Runtime;

let db: TestDatabase;
let cacheDir: string;
let models: ModelStore;
let controller: Controller | undefined;
let services: Services;
let principal: Principal;
let projectId: string;
let userCount = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'poke-cache-'));
  // A hub that refuses connections: nothing here downloads a model.
  models = new ModelStore({ cache: new ModelCache({ dir: cacheDir }), hubEndpoint: 'http://127.0.0.1:9', allowExternalFormats: false });
});

afterAll(async () => {
  await db?.close();
  if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

afterEach(async () => {
  await controller?.stop();
  controller = undefined;
});

/** A controller on a fresh project (its own endpoints), and the services; `pokeOnChange`: API changes poke it, as in the gateway. */
async function setUp(pokeOnChange = false): Promise<Controller> {
  // A long lease: no renewal after the first tick's (a test below holds this controller's lease row, which it would wait on).
  const made = new Controller({
    sql: db.sql,
    runtime,
    models,
    builtInEngine: true,
    intervalMs: 600_000,
    leaseTtlMs: 600_000,
    log: () => {},
  });
  services = createServices(db.sql, pokeOnChange ? { onEndpointChange: (id) => made.poke(id) } : {});
  const n = ++userCount;
  ({ principal, projectId } = await seedPrincipal(db.sql, services, `poke ${n}`));
  return made;
}

/** An endpoint that holds no replicas (a pass over it writes its status, and starts nothing). */
async function endpoint(): Promise<string> {
  const created = await services.endpoints.create(
    principal,
    createBody(projectId, { hfModelRepo: 'test-org/none', autoscalingPolicy: { minReplica: 0, maxReplica: 0 } }),
  );
  if (created.type === 'error') throw new Error(created.error.message);
  return created.value.id;
}

/** A reconcile loop alone, on this test's database, as this test's user (`setUp`), passing over with `reconcile`. */
function newLoop(options: Pick<ReconcileLoopOptions, 'intervalMs' | 'reconcile'> & Partial<ReconcileLoopOptions>): ReconcileLoop {
  return new ReconcileLoop({ sql: db.sql, owner: `loop-${userCount}`, leaseTtlMs: 30_000, log: () => {}, ...options });
}

/** Who holds the endpoint's lease, and until when (undefined: nobody). */
async function lease(id: string): Promise<{ owner: string; expiresAt: Date } | undefined> {
  const [row] = await db.sql<
    { owner: string; expires_at: Date }[]
  >`SELECT owner, expires_at FROM endpoint_leases WHERE endpoint_id = ${id}`;
  return row ? { owner: row.owner, expiresAt: row.expires_at } : undefined;
}

const leasedBy = async (id: string, owner: string) => (await lease(id))?.owner === owner;

test('a poke while waiting for the next interval starts a pass at once', async () => {
  controller = await setUp();
  const first = await endpoint();
  await controller.start();
  await waitFor('the first pass', () => leasedBy(first, controller!.owner), 10_000);
  // Created after the first pass listed the endpoints: only another full pass takes its lease.
  const later = await endpoint();
  expect(await lease(later)).toBeUndefined();
  controller.poke();
  await waitFor('the poked pass to take the new endpoint', () => leasedBy(later, controller!.owner), 10_000);
});

test('a poke during a pass is not lost: another pass follows at once', async () => {
  controller = await setUp(true);
  const blocker = await endpoint();
  const first = await endpoint();
  // Another gateway holds the blocker's lease: no pass takes it.
  await db.sql`INSERT INTO endpoint_leases (endpoint_id, owner, expires_at) VALUES (${blocker}, 'another-gateway', now() + interval '1 hour')`;
  await controller.start();
  await waitFor('the first pass', () => leasedBy(first, controller!.owner), 10_000);

  const held = await db.sql.reserve();
  try {
    await held`BEGIN`;
    // Each pass renews the lease it holds on the first endpoint: the test decides when that renewal ends.
    await held`SELECT 1 FROM endpoint_leases WHERE endpoint_id = ${first} FOR UPDATE`;
    controller.poke();
    // The second pass has listed the endpoints and waits on the lease row the test holds.
    await waitFor(
      'the second pass to wait on the held lease',
      async () =>
        (
          await db.sql`
            SELECT 1 FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
              AND query ILIKE '%INSERT INTO endpoint_leases%'`
        ).length > 0,
      10_000,
    );
    // The API creates an endpoint while that pass runs (the creation pokes it): the pass listed the endpoints before.
    const created = await endpoint();
    expect(await lease(created)).toBeUndefined();
    await held`COMMIT`;
    await waitFor('the pass after the poke that came during the second', () => leasedBy(created, controller!.owner), 10_000);
  } finally {
    held.release();
  }
  expect(await lease(blocker)).toMatchObject({ owner: 'another-gateway' });
});

test('a poke naming an endpoint reconciles that endpoint alone, without a pass over all of them', async () => {
  controller = await setUp();
  const first = await endpoint();
  await controller.start();
  await waitFor('the first pass', () => leasedBy(first, controller!.owner), 10_000);
  const firstLease = await lease(first);
  // Created after the first pass. `unpoked` comes first in a pass over all of them: had the pokes started one, it would
  // hold its lease before the poked ones do.
  const unpoked = await endpoint();
  const one = await endpoint();
  const two = await endpoint();
  controller.poke(one);
  controller.poke(two);
  await waitFor(
    'both poked endpoints reconciled',
    async () => (await leasedBy(one, controller!.owner)) && leasedBy(two, controller!.owner),
    10_000,
  );
  expect(await lease(unpoked)).toBeUndefined();
  // Nor were the leases renewed, as a pass over all of them does first.
  expect(await lease(first)).toEqual(firstLease);
});

test("the interval's pass skips an endpoint a poke reconciled within the interval; the others still get theirs", async () => {
  await setUp();
  const [busy, quiet] = [await endpoint(), await endpoint()];
  const passes = { [busy]: 0, [quiet]: 0 };
  const intervalMs = 250;
  const loop = newLoop({
    intervalMs,
    reconcile: async (id) => void (id in passes && passes[id]!++),
  });
  loop.start();
  try {
    // The busy endpoint is poked four times per interval for ten intervals.
    let pokes = 0;
    const ends = Date.now() + 10 * intervalMs;
    while (Date.now() < ends) {
      loop.poke(busy);
      pokes++;
      await sleep(intervalMs / 4);
    }
    // Its passes are its pokes' (and the first one's), none of the interval's besides: those would be about ten more.
    expect(passes[busy]).toBeLessThanOrEqual(pokes + 2);
    expect(passes[busy]).toBeGreaterThan(pokes / 2);
    // The one nobody poked has one pass per interval still.
    expect(passes[quiet]).toBeGreaterThanOrEqual(6);
  } finally {
    await loop.stop();
  }
});

test('an endpoint at rest is passed over at the rest interval, and at the next tick once its row, its replicas or its queue change', async () => {
  await setUp();
  const [resting, busy] = [await endpoint(), await endpoint()];
  const passes = { [resting]: 0, [busy]: 0 };
  const intervalMs = 100;
  const loop = newLoop({
    intervalMs,
    // Longer than the test: a pass of the resting endpoint after its first comes from a change alone.
    restIntervalMs: 600_000,
    // At rest: the stamp the pass read (as the controller's passes answer it).
    // Counted once it has read its stamp: a change the test makes after it sees the count is not read by that pass
    // (counted before its read, a pass slowed down on a loaded machine read the next change and rested on it).
    reconcile: async (id) => {
      const stamp = id === resting ? (await readPassState(db.sql, id, QUEUE_DEPTH_STALE_MS))?.stamp : undefined;
      if (id in passes) passes[id]!++;
      return stamp;
    },
  });
  const passOf = async (what: string, change: () => Promise<unknown>) => {
    const before = passes[resting]!;
    await change();
    await waitFor(what, async () => passes[resting]! > before, 10_000);
  };
  loop.start();
  try {
    await waitFor('the first passes', async () => passes[resting]! === 1 && passes[busy]! > 0, 10_000);
    await sleep(15 * intervalMs);
    // Not at rest: one pass per interval still.
    expect(passes[busy]).toBeGreaterThanOrEqual(5);
    expect(passes[resting]).toBe(1);
    // Any write to its row (an API action through another gateway, which pokes only that one).
    await passOf('a pass after a write to its row', () => db.sql`UPDATE endpoints SET updated_at = now() WHERE id = ${resting}`);
    // A replica that comes or goes, or becomes ready.
    await passOf(
      'a pass after a replica came',
      () =>
        db.sql`INSERT INTO replicas (id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state)
        VALUES (${`rep_${resting}`}, ${resting}, 1, 'fake', 'test-node', 'H100', 1, 'STARTING')`,
    );
    await passOf('a pass after a replica became ready', () => db.sql`UPDATE replicas SET state = 'READY' WHERE endpoint_id = ${resting}`);
    // Requests queued for it in some gateway process: a pass every interval while they wait.
    const queuedFrom = passes[resting]!;
    await db.sql`INSERT INTO gateway_queue_depth (process_id, endpoint_id, queued) VALUES ('another-gateway', ${resting}, 3)`;
    await sleep(10 * intervalMs);
    expect(passes[resting]! - queuedFrom).toBeGreaterThanOrEqual(3);
    // At rest again once nothing waits.
    await db.sql`DELETE FROM gateway_queue_depth WHERE endpoint_id = ${resting}`;
    await sleep(3 * intervalMs);
    const restedAt = passes[resting]!;
    await sleep(10 * intervalMs);
    expect(passes[resting]).toBe(restedAt);
    // A poke passes it at once.
    await passOf('a poked pass', async () => loop.poke(resting));
  } finally {
    await loop.stop();
  }
});

test('an endpoint at rest is passed over again once the rest interval has passed', async () => {
  await setUp();
  const resting = await endpoint();
  let passes = 0;
  const loop = newLoop({
    intervalMs: 100,
    restIntervalMs: 1000,
    reconcile: async (id) => {
      if (id === resting) passes++;
      return (await readPassState(db.sql, id, QUEUE_DEPTH_STALE_MS))?.stamp;
    },
  });
  loop.start();
  try {
    await waitFor('the first pass', async () => passes === 1, 10_000);
    await sleep(3500);
    // About one pass a second (three or four), not one per interval (thirty-five).
    expect(passes).toBeGreaterThanOrEqual(3);
    expect(passes).toBeLessThanOrEqual(6);
  } finally {
    await loop.stop();
  }
});

test("passes in lanes: a user's poke before the first looks and the controller's own pokes, those before the interval's", async () => {
  await setUp();
  // The passes a tick queues go in the leases' order (by id).
  const ids = [await endpoint(), await endpoint(), await endpoint(), await endpoint(), await endpoint()].sort();
  const [s0, s1, s2, s3, s4] = ids as [string, string, string, string, string];
  const order: string[] = [];
  // While a gate is set, each pass waits for it: one slot, so every other pass queues meanwhile.
  let gate: Promise<void> | undefined;
  let open = () => {};
  const shut = () => (gate = new Promise<void>((resolve) => (open = resolve)));
  const release = () => {
    gate = undefined;
    open();
  };
  const intervalMs = 300;
  const loop = newLoop({
    intervalMs,
    concurrency: 1,
    reconcile: async (id) => {
      if (!ids.includes(id)) return;
      order.push(id);
      await gate;
    },
  });
  const after = (n: number) => waitFor(`${n} passes`, async () => order.length >= n, 10_000);
  shut();
  loop.start();
  try {
    // The first tick takes every endpoint: five first looks; the first runs and waits at the gate.
    await after(1);
    expect(order).toEqual([s0]);
    loop.poke(s3, { internal: true }); // the controller's own change to a first look: it keeps its place
    loop.poke(s4); // a user's: goes first
    await sleep(50);
    release();
    await after(5);
    expect(order.slice(0, 5)).toEqual([s0, s4, s1, s2, s3]);

    // A user's poke takes the slot, and the interval queues the others' routine passes behind it.
    await sleep(2 * intervalMs);
    order.length = 0;
    shut();
    loop.poke(s0);
    await after(1);
    await sleep(3 * intervalMs);
    loop.poke(s4, { internal: true }); // the controller's own change: before the interval's passes
    await sleep(50);
    release();
    await after(5);
    // (An interval's pass may have taken the slot as the gate shut: the order of those that waited is what counts.)
    expect(order.indexOf(s0)).toBeLessThan(order.indexOf(s4));
    expect(order.indexOf(s4)).toBeLessThan(order.indexOf(s2));
    expect(order.indexOf(s4)).toBeLessThan(order.indexOf(s3));
  } finally {
    release();
    await loop.stop();
  }
});
