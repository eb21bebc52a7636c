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
  // Its lease is taken before its pass writes (under that lease): the pass must have ended before the test holds the
  // lease's row, or it would wait on it too, and no other pass would come for that endpoint.
  await waitFor(
    'the first pass to write its status',
    async () =>
      (await leasedBy(first, controller!.owner)) &&
      (await db.sql`SELECT 1 FROM endpoint_events WHERE endpoint_id = ${first} AND cause LIKE 'controller:%'`).length > 0,
    10_000,
  );

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
    // A failure above leaves the lease's row locked: the controller's stop would wait for the pass that waits on it.
    await held`ROLLBACK`.catch(() => {});
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
  const intervalMs = 500;
  const loop = newLoop({
    intervalMs,
    reconcile: async (id) => void (id in passes && passes[id]!++),
  });
  loop.start();
  try {
    await waitFor('the first passes', async () => passes[busy]! > 0 && passes[quiet]! > 0, 10_000);
    // The busy endpoint is poked ten times per interval, for six intervals counted by the quiet endpoint's passes (one
    // per interval, however slow the machine: the window is counted in the loop's ticks, not in wall time).
    const from = { busy: passes[busy]!, quiet: passes[quiet]! };
    let pokes = 0;
    const ends = Date.now() + 60_000;
    while (passes[quiet]! < from.quiet + 6) {
      if (Date.now() > ends) throw new Error(`six intervals did not pass within a minute: ${JSON.stringify(passes)}`);
      loop.poke(busy);
      pokes++;
      await sleep(intervalMs / 10);
    }
    // Its passes are its pokes' (some coalesce), none of the interval's besides: those would be six more.
    const busyPasses = passes[busy]! - from.busy;
    expect(busyPasses).toBeLessThanOrEqual(pokes + 1);
    expect(busyPasses).toBeGreaterThan(pokes / 2);
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
  // The busy endpoint (never at rest) has a pass every interval: `n` more of them are n intervals' ticks, however slow.
  const ticks = async (n: number) => {
    const from = passes[busy]!;
    await waitFor(`${n} more intervals' passes`, async () => passes[busy]! >= from + n, 10_000);
  };
  loop.start();
  try {
    await waitFor('the first passes', async () => passes[resting]! === 1 && passes[busy]! > 0, 10_000);
    // Not at rest: one pass per interval still.
    await ticks(5);
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
    await waitFor('three passes while requests wait', async () => passes[resting]! - queuedFrom >= 3, 10_000);
    // At rest again once nothing waits (a tick that listed it before the change may still give it one more pass).
    await db.sql`DELETE FROM gateway_queue_depth WHERE endpoint_id = ${resting}`;
    await ticks(3);
    const restedAt = passes[resting]!;
    await ticks(10);
    expect(passes[resting]).toBe(restedAt);
    // A poke passes it at once.
    await passOf('a poked pass', async () => loop.poke(resting));
  } finally {
    await loop.stop();
  }
});

test('an endpoint at rest is passed over again once the rest interval has passed', async () => {
  await setUp();
  const [resting, busy] = [await endpoint(), await endpoint()];
  let passes = 0;
  let ticks = 0;
  const loop = newLoop({
    intervalMs: 100,
    restIntervalMs: 1000,
    reconcile: async (id) => {
      // The busy endpoint is never at rest: its passes count the loop's ticks.
      if (id === busy) return void ticks++;
      if (id === resting) passes++;
      return (await readPassState(db.sql, id, QUEUE_DEPTH_STALE_MS))?.stamp;
    },
  });
  loop.start();
  try {
    await waitFor('the first pass', async () => passes === 1, 10_000);
    const from = { passes, ticks, at: performance.now() };
    // 3.5 s and 30 ticks at least: a loaded machine that delays the loop stretches the window, not the count.
    await waitFor('30 ticks', async () => ticks - from.ticks >= 30 && performance.now() - from.at >= 3500, 60_000);
    const seconds = (performance.now() - from.at) / 1000;
    const rested = passes - from.passes;
    // About one pass a second of the window (three or four in 3.5 s), not one per tick (thirty and more).
    expect(rested).toBeGreaterThanOrEqual(Math.floor(seconds) - 1);
    expect(rested).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
    expect(rested).toBeLessThan((ticks - from.ticks) / 4);
  } finally {
    await loop.stop();
  }
});

test("passes in lanes: a user's poke before the first looks and the controller's own pokes, those before the interval's", async () => {
  await setUp();
  // `blocker` holds the loop's one slot while the gate is shut: every other pass queues behind it meanwhile. `marker`
  // shows that a tick has acted on pokes made with its own (below). Both rest once passed: no interval's pass takes them.
  const blocker = await endpoint();
  const marker = await endpoint();
  // The passes a tick queues go in the leases' order (by id).
  const ids = [await endpoint(), await endpoint(), await endpoint(), await endpoint(), await endpoint()].sort();
  const [s0, s1, s2, s3, s4] = ids as [string, string, string, string, string];
  // Another gateway holds these until the test lets them go: then one tick takes all five, five first looks.
  await db.sql`
    INSERT INTO endpoint_leases (endpoint_id, owner, expires_at)
    SELECT id, 'another-gateway', now() + interval '1 hour' FROM unnest(${ids}::text[]) AS id`;
  const tracked = [blocker, marker, ...ids];
  const owner = `lanes-${userCount}`;
  const order: string[] = [];
  /** Each endpoint's lease expiry as its last pass read it, as that pass began. */
  const seen = new Map<string, string>();
  const ended = new Set<string>();
  let gate: Promise<void> | undefined;
  let open = () => {};
  let blocking = false;
  const shut = () => (gate = new Promise<void>((resolve) => (open = resolve)));
  const release = () => {
    gate = undefined;
    open();
  };
  const expiry = async (id: string) =>
    (
      await db.sql<
        { expires: string }[]
      >`SELECT expires_at::text AS expires FROM endpoint_leases WHERE endpoint_id = ${id} AND owner = ${owner}`
    )[0]?.expires;
  // The lease's TTL is longer than the test: no renewal after the first tick's. So its expiry moves only when a tick
  // takes the endpoint's lease, just before it queues the endpoint's pass (and never while one waits or runs): one
  // other than its last pass read is a pass queued since, not begun (the blocker holds the only slot when this is asked).
  const queued = async (id: string) => {
    const now = await expiry(id);
    return now !== undefined && now !== seen.get(id);
  };
  const allQueued = (of: string[]) => async () => (await Promise.all(of.map(queued))).every(Boolean);
  const loop = newLoop({
    owner,
    intervalMs: 200,
    leaseTtlMs: 600_000,
    restIntervalMs: 600_000,
    concurrency: 1,
    reconcile: async (id) => {
      if (!tracked.includes(id)) return;
      order.push(id);
      seen.set(id, (await expiry(id))!);
      const stamp = (await readPassState(db.sql, id, QUEUE_DEPTH_STALE_MS))?.stamp;
      if (id === blocker && gate) {
        blocking = true;
        await gate;
        blocking = false;
      }
      ended.add(id);
      // At rest (the stamp it read), as the controller's passes answer it: the blocker and the marker.
      return id === blocker || id === marker ? stamp : undefined;
    },
  });
  /** The blocker's pass, poked, takes the slot and waits at the gate; then nothing else runs. */
  const block = async () => {
    shut();
    loop.poke(blocker);
    await waitFor('the blocker to hold the slot', async () => blocking, 10_000);
    order.length = 0;
  };
  const after = (n: number) => waitFor(`${n} passes`, async () => order.length >= n, 10_000);
  loop.start();
  try {
    await waitFor('the first looks of the blocker and the marker', async () => ended.has(blocker) && ended.has(marker), 10_000);

    // Five first looks queue behind the blocker: the other gateway lets their leases go.
    await block();
    await db.sql`DELETE FROM endpoint_leases WHERE owner = 'another-gateway' AND endpoint_id = ANY(${ids}::text[])`;
    await waitFor('the five first looks queued', allQueued(ids), 10_000);
    loop.poke(s3, { internal: true }); // the controller's own change to a first look: it keeps its place
    loop.poke(s4); // a user's: goes first
    loop.poke(marker, { internal: true }); // the controller's own, of an endpoint looked at: after the first looks
    // The tick that took these pokes took the marker's lease after it had moved the others' waiting passes.
    await waitFor("the tick that took the pokes (the marker's pass queued)", () => queued(marker), 10_000);
    expect(order).toEqual([]);
    release();
    await after(6);
    expect(order.slice(0, 6)).toEqual([s4, s0, s1, s2, s3, marker]);

    // The interval queues each endpoint's routine pass behind the blocker (the marker rests: not its).
    await block();
    await waitFor("the interval's passes queued", allQueued(ids), 10_000);
    loop.poke(s0); // a user's change: first
    loop.poke(s4, { internal: true }); // the controller's own change: before the interval's passes
    loop.poke(marker, { internal: true });
    await waitFor("the tick that took the pokes (the marker's pass queued)", () => queued(marker), 10_000);
    expect(order).toEqual([]);
    release();
    await after(6);
    // The lanes: the user's change, the controller's own, then the interval's. Among the interval's passes the order is
    // that of the ticks that queued them: one of them passed just before the blocker took the slot was due a tick later.
    expect(order.slice(0, 3)).toEqual([s0, s4, marker]);
    expect(order.slice(3, 6).sort()).toEqual([s1, s2, s3].sort());
  } finally {
    release();
    await loop.stop();
  }
});
