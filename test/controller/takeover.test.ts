/**
 * A rollout taken over from a gateway process that was killed: two real
 * gateway processes on one database and one data directory (one machine);
 * process A holds the endpoint's lease and is rolling out a new version when
 * it is SIGKILLed. Process B must take the lease and finish the rollout: the
 * new version serving, the old replica stopped, and no engine process left
 * running that no replica row owns (A's engines are detached: they outlive it).
 * A replica A left starting is adopted where it runs, not started again.
 */
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
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
 * Each test leaves nothing behind for the next: its gateways stopped, every
 * engine it started killed (engines outlive their gateway by design, and a
 * killed gateway's are detached), and its endpoints retired in the database.
 */
async function cleanUp(): Promise<void> {
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
  const ids = new Set((await db.sql<{ id: string }[]>`SELECT id FROM replicas`).map((r) => r.id));
  for (const { pid } of await engineProcesses((id) => ids.has(id))) killGroup(pid);
  for (const row of await db.sql<{ pid: number }[]>`SELECT locator::int AS pid FROM replicas WHERE locator IS NOT NULL`) killGroup(row.pid);
  await db.sql`UPDATE replicas SET state = 'STOPPED' WHERE state IN ('STARTING', 'READY', 'DRAINING')`;
  await db.sql`UPDATE endpoints SET cleaned_at = now() WHERE cleaned_at IS NULL`;
}

afterEach(cleanUp, 60_000);

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

async function startGateway(env: Record<string, string> = {}): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({ ...testEnv(dataDir, hub.url), DATABASE_URL: db.dbUrl, ADMIN_API_KEY: ADMIN_KEY, ...env });
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

/**
 * Gateway A alone creates an endpoint and brings it to RUNNING (so A holds
 * its lease); then gateway B starts on the same database and data directory.
 */
async function servingEndpoint(envA: Record<string, string> = {}) {
  const a = await startGateway(envA);
  const restA = restClient(a.url, ADMIN_KEY);
  const teams = await restA('POST', '/graphql', { query: '{ teams { projects { id } } }' });
  const projectId = teams.body.data.teams[0].projects[0].id as string;
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
  const id = created.body.endpointId as string;
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
  const ownerA = (await leaseOwner(id))!;
  expect(ownerA).toMatch(/^gw-/);
  const b = await startGateway();
  const [old] = (await replicaRows(id)).filter((r) => LIVE.includes(r.state));
  expect(old).toMatchObject({ state: 'READY', version_index: 0 });
  // B runs its controller, but A keeps renewing the lease.
  await new Promise((r) => setTimeout(r, 500));
  expect(await leaseOwner(id)).toBe(ownerA);
  return { a, b, restA, id, ownerA, old: old! };
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

describe('a rollout whose gateway process was killed is completed by another', () => {
  test("killed while the new replica's engine is starting: B adopts that engine (A's, detached) and finishes the rollout with it", async () => {
    const { a, restA, id, ownerA, old } = await servingEndpoint();
    await update(restA, id);
    // The new replica's engine process exists (A spawned it) and is still loading: A is killed now.
    const started = await waitFor(
      "the new replica's engine process",
      async () => {
        const row = (await replicaRows(id)).find((r) => r.version_index === 1);
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
    await kill(a);
    const [atKill] = await db.sql<
      ReplicaRow[]
    >`SELECT id, state, address, CASE WHEN locator ~ '^[0-9]{1,9}$' THEN locator::int END AS pid, version_index FROM replicas WHERE id = ${started.row.id}`;
    expect(atKill).toMatchObject({ state: 'STARTING', pid: started.engine.pid });
    // The engine goes on loading, as it would had only its gateway died.
    process.kill(started.engine.pid, 'SIGCONT');

    await expectRolledOut(id, ownerA, old);
    // B resumed A's start: the replica that serves is the one A placed, on the engine A spawned; none was started afresh.
    const rows = await replicaRows(id);
    expect(rows.filter((r) => r.version_index === 1).map((r) => [r.id, r.state, r.pid])).toEqual([
      [started.row.id, 'READY', started.engine.pid],
    ]);
  }, 300_000);

  test('killed while the old replica drains: B stops it and the endpoint is RUNNING on the new version', async () => {
    // A long drain (the old replica stays busy): A is still draining when it is killed.
    const { a, restA, id, ownerA, old } = await servingEndpoint({ DRAIN_TIMEOUT_MS: '120000' });
    const idle = keepBusy({ address: old.address!, engine_token: old.engine_token });
    try {
      await update(restA, id);
      // The new replica starts and warms up beside an engine kept busy: slow on a loaded 2-core machine.
      await waitFor(
        'the old replica to drain',
        async () => (await replicaRows(id)).find((r) => r.id === old.id)!.state === 'DRAINING',
        180_000,
      ).catch(async (error: Error) => {
        const state = { status: await statusOf(db.sql, id), replicas: await replicaRows(id) };
        throw new Error(`${error.message}: ${JSON.stringify(state)}\n${a.output().slice(-4000)}`);
      });
      const fresh = (await replicaRows(id)).filter((r) => r.version_index === 1);
      expect(fresh.map((r) => r.state)).toEqual(['READY']);
      await kill(a);
    } finally {
      await idle();
    }
    await expectRolledOut(id, ownerA, old);
  }, 300_000);

  test('killed between the new replica READY and the old one draining: B retires the old one without starting a surplus replica', async () => {
    const { a, restA, id, ownerA, old } = await servingEndpoint({ DRAIN_TIMEOUT_MS: '120000' });
    const idle = keepBusy({ address: old.address!, engine_token: old.engine_token });
    let fresh: ReplicaRow[];
    try {
      await update(restA, id);
      await waitFor(
        'the old replica to drain',
        async () => (await replicaRows(id)).find((r) => r.id === old.id)!.state === 'DRAINING',
        180_000,
      ).catch(async (error: Error) => {
        // What gateway A had done, should the drain never be seen.
        const state = { status: await statusOf(db.sql, id), replicas: await replicaRows(id) };
        throw new Error(`${error.message}: ${JSON.stringify(state)}\n${a.output().slice(-4000)}`);
      });
      await kill(a);
      // The state a kill a moment earlier leaves (both replicas READY, the lease A's until it expires):
      // A marks the new replica READY and, a few statements later, the old one DRAINING.
      const flipped = await db.sql`UPDATE replicas SET state = 'READY' WHERE id = ${old.id} AND state = 'DRAINING' RETURNING id`;
      expect(flipped.length).toBe(1);
      expect(await leaseOwner(id)).toBe(ownerA);
      fresh = (await replicaRows(id)).filter((r) => r.version_index === 1);
      expect(fresh.map((r) => r.state)).toEqual(['READY']);
    } finally {
      await idle();
    }
    await expectRolledOut(id, ownerA, old);
    // The replica A started serves on: B started no other one of version 1.
    expect((await replicaRows(id)).filter((r) => r.version_index === 1).map((r) => r.id)).toEqual(fresh.map((r) => r.id));
  }, 300_000);
});
