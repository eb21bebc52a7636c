/**
 * A rollout taken over from a gateway process that was killed: two real
 * gateway processes on one database and one data directory (one machine);
 * process A holds the endpoint's lease and is rolling out a new version when
 * it is SIGKILLed. Process B must take the lease and finish the rollout: the
 * new version serving, the old replica stopped, and no engine process left
 * running that no replica row owns (A's engines are detached: they outlive it).
 * A replica A left starting is adopted where it runs, not started again.
 *
 * The three cases are three endpoints of one gateway pair, each brought to its
 * state before the one kill of A (a gateway process's start and the lease's
 * expiry are most of a case's time): B takes the three over together.
 */
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { engineFetch, standardRepos, statusOf, statusTrail, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient, type RestClient } from '../support/gateway.js';
import { startGatewayProcess, type GatewayProcess, isRunning } from '../support/processes.js';

const ADMIN_KEY = 'test_takeover_admin_key_0123456789';

let db: TestDatabase;
let hub: FakeHub;
let dataDir: string;
const gateways: GatewayProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  hub = await startFakeHub({ repos: standardRepos() });
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-takeover-'));
  await chmod(dataDir, 0o755);
}, 120_000);

/**
 * The file leaves nothing behind: its gateways stopped, every engine it
 * started killed (engines outlive their gateway by design, and a killed
 * gateway's are detached), and its endpoints retired in the database.
 */
async function cleanUp(): Promise<void> {
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
  const ids = new Set((await db.sql<{ id: string }[]>`SELECT id FROM replicas`).map((r) => r.id));
  for (const { pid } of await engineProcesses((id) => ids.has(id))) killGroup(pid);
  for (const row of await db.sql<{ pid: number }[]>`SELECT locator::int AS pid FROM replicas WHERE locator IS NOT NULL`) killGroup(row.pid);
  await db.sql`UPDATE replicas SET state = 'STOPPED' WHERE state IN ('STARTING', 'READY', 'DRAINING')`;
  await db.sql`UPDATE endpoints SET cleaned_at = now() WHERE cleaned_at IS NULL`;
}

afterAll(async () => {
  await cleanUp();
  await hub.close();
  await db.close();
  await rm(dataDir, { recursive: true, force: true });
}, 60_000);

function killGroup(pid: number): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

/** Engine processes on this machine (found by the REPLICA_ID in their environment) whose replica id passes `which`. */
async function engineProcesses(which: (replicaId: string) => boolean): Promise<{ pid: number; replicaId: string }[]> {
  const found: { pid: number; replicaId: string }[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    let environ: string;
    try {
      environ = await readFile(`/proc/${pid}/environ`, 'latin1');
    } catch {
      continue;
    }
    const entry = environ.split('\0').find((e) => e.startsWith('REPLICA_ID='));
    const replicaId = entry?.slice('REPLICA_ID='.length);
    if (replicaId && which(replicaId) && (await isRunning(pid))) found.push({ pid, replicaId });
  }
  return found;
}

/**
 * Slots for the three endpoints' six replicas during their rollouts, and one more each: a surplus replica that B
 * should not start (or a start afresh of the one A left starting) would find room, as it would for one endpoint
 * alone, rather than wait for a slot and go unseen.
 */
const CPU_SLOTS = '9';

async function startGateway(env: Record<string, string> = {}): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({
    ...testEnv(dataDir, hub.url, { CPU_SLOTS }),
    DATABASE_URL: db.dbUrl,
    ADMIN_API_KEY: ADMIN_KEY,
    ...env,
  });
  gateways.push(gateway);
  return gateway;
}

async function leaseOwner(id: string): Promise<string | undefined> {
  const [row] = await db.sql<{ owner: string }[]>`SELECT owner FROM endpoint_leases WHERE endpoint_id = ${id} AND expires_at > now()`;
  return row?.owner;
}

interface ReplicaRow {
  id: string;
  state: string;
  address: string | null;
  pid: number | null;
  version_index: number;
  engine_token: string | null;
}

async function replicaRows(id: string): Promise<ReplicaRow[]> {
  return db.sql<
    ReplicaRow[]
  >`SELECT id, state, address, CASE WHEN locator ~ '^[0-9]{1,9}$' THEN locator::int END AS pid, version_index, engine_token FROM replicas WHERE endpoint_id = ${id} ORDER BY created_at, id`;
}

const LIVE = ['STARTING', 'READY', 'DRAINING'];

async function kill(gateway: GatewayProcess): Promise<void> {
  if (gateway.child.exitCode !== null || gateway.child.signalCode !== null) throw new Error(`gateway exited early:\n${gateway.output()}`);
  const exited = new Promise((resolve) => gateway.child.once('exit', resolve));
  gateway.child.kill('SIGKILL');
  await exited;
}

/** Asks for version 1 through A (a new engine setting: the rollout replaces the replica). */
async function update(rest: RestClient, id: string): Promise<void> {
  const res = await rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 2 }, newVersionComment: 'v1' });
  expect(res.status).toBe(200);
  expect(res.body.versionIndex).toBe(1);
}

/** Clients that keep the old replica busy (always a request generating and others queued), so that A's drain of it lasts. */
function keepBusy(replica: { address: string; engine_token: string | null }) {
  const stop = new AbortController();
  const client = async () => {
    while (!stop.signal.aborted) {
      await engineFetch(replica, '/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // Long answers (the context holds 1024 tokens): three in turn leave the engine no moment without one in flight
        // or queued, even when this process, starved on a loaded machine, is slow to send the next.
        body: JSON.stringify({ messages: [{ role: 'user', content: 'go' }], max_tokens: 512, temperature: 0 }),
        signal: stop.signal,
      })
        .then(async (r) => {
          await r.arrayBuffer();
          // A refusal (the engine answers at once) waits a little rather than spinning.
          if (!r.ok) await new Promise((resolve) => setTimeout(resolve, 50));
        })
        .catch(() => new Promise((r) => setTimeout(r, 50)));
    }
  };
  const clients = Array.from({ length: 3 }, client);
  return async () => {
    stop.abort();
    await Promise.all(clients);
  };
}

/**
 * The rollout finished under B: B holds the lease, the endpoint is RUNNING
 * on version 1 with its counts, the old replica is stopped and its process
 * gone, exactly one replica serves, and every engine process of this
 * endpoint belongs to a live replica row.
 */
async function expectRolledOut(id: string, ownerA: string, old: ReplicaRow): Promise<void> {
  const status = await waitFor(
    'the rollout to complete under gateway B',
    async () => {
      const s = await statusOf(db.sql, id);
      const live = (await replicaRows(id)).filter((r) => LIVE.includes(r.state));
      const done =
        s.status === 'RUNNING' &&
        s.curr === 1 &&
        s.updated === s.curr &&
        live.length === 1 &&
        live.every((r) => r.state === 'READY' && r.version_index === 1);
      return done ? s : undefined;
    },
    120_000,
  );
  expect(status).toMatchObject({ status: 'RUNNING', errorCode: null, curr: 1, desired: 1, updated: 1 });

  const owner = await leaseOwner(id);
  expect(owner).toBeDefined();
  expect(owner).not.toBe(ownerA);

  const rows = await replicaRows(id);
  const live = rows.filter((r) => LIVE.includes(r.state));
  expect(live.map((r) => [r.state, r.version_index])).toEqual([['READY', 1]]);
  expect(await isRunning(live[0]!.pid!)).toBe(true);
  // The new version serves.
  const answer = await engineFetch({ address: live[0]!.address!, engine_token: live[0]!.engine_token }, '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 2, temperature: 0 }),
  });
  expect(answer.status).toBe(200);

  // The old replica: its row stopped, its process gone.
  const oldNow = rows.find((r) => r.id === old.id)!;
  expect(['STOPPED', 'FAILED']).toContain(oldNow.state);
  await waitFor('the old engine to be gone', async () => !(await isRunning(old.pid!)), 15_000);

  // No orphan: every engine process of this endpoint is the one live replica's.
  const ids = new Set(rows.map((r) => r.id));
  const engines = await engineProcesses((replicaId) => ids.has(replicaId));
  expect(engines.map((e) => e.replicaId)).toEqual([live[0]!.id]);
  for (const row of rows.filter((r) => !LIVE.includes(r.state) && r.pid !== null))
    expect(await isRunning(row.pid!), `the engine of ${row.state} replica ${row.id}`).toBe(false);

  // The version's rollout is recorded as done, and the status came back from UPDATING without an error.
  const [version] = await db.sql`SELECT rollout_state FROM endpoint_versions WHERE endpoint_id = ${id} AND version_index = 1`;
  expect(version!.rollout_state).toBe('ROLLED_OUT');
  expect((await statusTrail(db.sql, id)).slice(-2)).toEqual(['UPDATING', 'RUNNING']);
}

/** Creates an endpoint through A (alone, A takes its lease) on the tiny model, one replica. */
async function createThroughA(restA: RestClient, projectId: string): Promise<string> {
  const created = await restA(
    'POST',
    '/dedicated/beta/endpoint',
    createBody(projectId, {
      hfModelRepo: TINY_REPO,
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
      advanced: { max_batch_size: 1, max_token_count: 1024, max_input_length: 256 },
    }),
  );
  expect(created.status).toBe(200);
  return created.body.endpointId as string;
}

/** Waits for the endpoint to serve on its one replica under A; a timeout shows the endpoint, its replicas and A's output. */
async function runningUnderA(a: GatewayProcess, id: string): Promise<void> {
  await waitFor(
    'RUNNING through gateway A',
    async () => {
      const s = await statusOf(db.sql, id);
      return s.status === 'RUNNING' && s.curr === 1 ? s : undefined;
    },
    90_000,
  ).catch(async (error: Error) => {
    throw new Error(
      `${error.message}: ${JSON.stringify(await statusOf(db.sql, id))}, replicas ${JSON.stringify(await replicaRows(id))}\n${a.output().slice(-3000)}`,
    );
  });
}

/** Waits for A to drain the endpoint's old replica (its new one READY); a timeout shows what A had done. */
async function drainingUnderA(a: GatewayProcess, id: string, old: ReplicaRow): Promise<void> {
  // The new replica starts and warms up beside an engine kept busy: slow on a loaded 2-core machine.
  await waitFor(
    'the old replica to drain',
    async () => (await replicaRows(id)).find((r) => r.id === old.id)!.state === 'DRAINING',
    180_000,
  ).catch(async (error: Error) => {
    const state = { status: await statusOf(db.sql, id), replicas: await replicaRows(id) };
    throw new Error(`${error.message}: ${JSON.stringify(state)}\n${a.output().slice(-4000)}`);
  });
}

interface Case {
  id: string;
  old: ReplicaRow;
}

interface Takeover {
  ownerA: string;
  /** Killed while the new replica's engine is starting (frozen, so that A cannot mark it READY). */
  starting: Case & { fresh: ReplicaRow; pid: number };
  /** Killed while the old replica drains (kept busy, so that A's drain lasts). */
  draining: Case;
  /** Killed while the old replica drains, then put back to READY: the state a kill a moment earlier leaves. */
  bothReady: Case & { fresh: ReplicaRow[] };
}

/**
 * Gateway A alone creates the three endpoints and brings them to RUNNING (so A holds their leases), with gateway B
 * started beside it once it holds them; then A rolls each out to version 1 and is killed with each in its case's state.
 */
/** Long enough for the starting case's engine, frozen while the other two roll out, not to be given up by A or B. */
const START_TIMEOUT_MS = '300000';

async function killDuringRollouts(): Promise<Takeover> {
  // A long drain (the old replicas stay busy): A is still draining when it is killed.
  const a = await startGateway({ DRAIN_TIMEOUT_MS: '120000', REPLICA_START_TIMEOUT_MS: START_TIMEOUT_MS });
  const restA = restClient(a.url, ADMIN_KEY);
  const teams = await restA('POST', '/graphql', { query: '{ teams { projects { id } } }' });
  const projectId = teams.body.data.teams[0].projects[0].id as string;
  const ids = await Promise.all([0, 1, 2].map(() => createThroughA(restA, projectId)));
  const ownerA = await waitFor('A to hold the endpoints', async () => {
    const owners = new Set(await Promise.all(ids.map(leaseOwner)));
    const [owner] = owners;
    return owners.size === 1 && owner ? owner : undefined;
  });
  expect(ownerA).toMatch(/^gw-/);
  // B starts while A's engines start; it holds nothing while A holds every endpoint (local gateways keep what they hold).
  const startingB = startGateway({ REPLICA_START_TIMEOUT_MS: START_TIMEOUT_MS });
  startingB.catch(() => {});
  await Promise.all(ids.map((id) => runningUnderA(a, id)));
  await startingB;
  const [starting, draining, bothReady] = await Promise.all(
    ids.map(async (id) => {
      const [old] = (await replicaRows(id)).filter((r) => LIVE.includes(r.state));
      expect(old).toMatchObject({ state: 'READY', version_index: 0 });
      return { id, old: old! };
    }),
  );
  // B runs its controller, but A keeps renewing the leases.
  await new Promise((r) => setTimeout(r, 500));
  for (const id of ids) expect(await leaseOwner(id)).toBe(ownerA);

  // First the starting case: its new replica's engine is frozen as soon as it is found, and stays frozen while the two
  // others roll out (A's start timeout, raised here, outlasts that). Then A is killed as soon as the two old replicas
  // drain: a drain that had to wait for more (the frozen engine's search once came after them) could end first, the
  // busy clients starved on a loaded machine.
  await update(restA, starting!.id);
  // The new replica's engine process exists (A spawned it) and is still loading.
  const started = await waitFor(
    "the new replica's engine process",
    async () => {
      const row = (await replicaRows(starting!.id)).find((r) => r.version_index === 1);
      if (!row) return undefined;
      const [engine] = await engineProcesses((replicaId) => replicaId === row.id);
      return engine ? { row, engine } : undefined;
    },
    90_000,
  );
  // Frozen while it loads, the engine never answers A's health check: A dies with the replica STARTING. Frozen as soon
  // as it is found (a loaded machine's wait for the row below once let it load and be marked READY first).
  process.kill(started.engine.pid, 'SIGSTOP');
  // The row names the engine's pid from its spawn on (before its health check), so that whoever takes over can stop it.
  await waitFor('the pid recorded at spawn', async () => {
    const [row] = await db.sql<
      ReplicaRow[]
    >`SELECT CASE WHEN locator ~ '^[0-9]{1,9}$' THEN locator::int END AS pid FROM replicas WHERE id = ${started.row.id}`;
    return row?.pid === started.engine.pid;
  });

  const idle = [draining!, bothReady!].map(({ old }) => keepBusy({ address: old.address!, engine_token: old.engine_token }));
  try {
    await Promise.all([draining!, bothReady!].map(({ id }) => update(restA, id)));
    await Promise.all([draining!, bothReady!].map(({ id, old }) => drainingUnderA(a, id, old)));
    await kill(a);
    // First, while A's lease still holds: the state a kill a moment earlier leaves (both replicas READY, the lease A's
    // until it expires): A marks the new replica READY and, a few statements later, the old one DRAINING.
    const flipped = await db.sql`UPDATE replicas SET state = 'READY' WHERE id = ${bothReady!.old.id} AND state = 'DRAINING' RETURNING id`;
    expect(flipped.length).toBe(1);
    expect(await leaseOwner(bothReady!.id)).toBe(ownerA);
    const bothReadyFresh = (await replicaRows(bothReady!.id)).filter((r) => r.version_index === 1);
    expect(bothReadyFresh.map((r) => r.state)).toEqual(['READY']);
    const drainingFresh = (await replicaRows(draining!.id)).filter((r) => r.version_index === 1);
    expect(drainingFresh.map((r) => r.state)).toEqual(['READY']);

    const [atKill] = await db.sql<
      ReplicaRow[]
    >`SELECT id, state, address, CASE WHEN locator ~ '^[0-9]{1,9}$' THEN locator::int END AS pid, version_index FROM replicas WHERE id = ${started.row.id}`;
    expect(atKill).toMatchObject({ state: 'STARTING', pid: started.engine.pid });
    // The engine goes on loading, as it would had only its gateway died.
    process.kill(started.engine.pid, 'SIGCONT');
    return {
      ownerA,
      starting: { ...starting!, fresh: started.row, pid: started.engine.pid },
      draining: draining!,
      bothReady: { ...bothReady!, fresh: bothReadyFresh },
    };
  } finally {
    await Promise.all(idle.map((stop) => stop()));
  }
}

/** The kill, made once for the three tests (each waits for it, then for its endpoint's rollout under B). */
let takeover: Promise<Takeover> | undefined;
const killed = () => (takeover ??= killDuringRollouts());

// Concurrent: the three endpoints' rollouts complete under B together.
describe.concurrent('a rollout whose gateway process was killed is completed by another', { timeout: 300_000 }, () => {
  test("killed while the new replica's engine is starting: B adopts that engine (A's, detached) and finishes the rollout with it", async () => {
    const { ownerA, starting } = await killed();
    await expectRolledOut(starting.id, ownerA, starting.old);
    // B resumed A's start: the replica that serves is the one A placed, on the engine A spawned; none was started afresh.
    const rows = await replicaRows(starting.id);
    expect(rows.filter((r) => r.version_index === 1).map((r) => [r.id, r.state, r.pid])).toEqual([
      [starting.fresh.id, 'READY', starting.pid],
    ]);
  });

  test('killed while the old replica drains: B stops it and the endpoint is RUNNING on the new version', async () => {
    const { ownerA, draining } = await killed();
    await expectRolledOut(draining.id, ownerA, draining.old);
  });

  test('killed between the new replica READY and the old one draining: B retires the old one without starting a surplus replica', async () => {
    const { ownerA, bothReady } = await killed();
    await expectRolledOut(bothReady.id, ownerA, bothReady.old);
    // The replica A started serves on: B started no other one of version 1.
    expect((await replicaRows(bothReady.id)).filter((r) => r.version_index === 1).map((r) => r.id)).toEqual(
      bothReady.fresh.map((r) => r.id),
    );
  });
});
