/**
 * Autoscaling on the real demand, across two gateway processes on one
 * database: requests waiting in one process's admission queue are published
 * (gateway_queue_depth) and counted by the controller of the other process,
 * the one holding the endpoint's lease, which scales out; once the load
 * stops, it scales back in after the cooldown.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { standardRepos, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';
import { startGatewayProcess, type GatewayProcess } from '../support/processes.js';

const ADMIN_KEY = 'test_demand_scaling_admin_key_0123456789';

let db: TestDatabase;
let hub: FakeHub;
const dirs: string[] = [];
let gateways: GatewayProcess[] = [];
let projectId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  hub = await startFakeHub({ repos: standardRepos() });
  const start = async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-gw-'));
    await chmod(dir, 0o755);
    dirs.push(dir);
    return startGatewayProcess({ ...testEnv(dir, hub.url), DATABASE_URL: db.dbUrl, ADMIN_API_KEY: ADMIN_KEY });
  };
  gateways = await Promise.all([start(), start()]);
  const teams = await restClient(gateways[0]!.url, ADMIN_KEY)('POST', '/graphql', { query: '{ teams { projects { id } } }' });
  projectId = teams.body.data.teams[0].projects[0].id;
}, 120_000);

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  // Replicas outlive a gateway by design; the test stops what it started.
  const rows =
    await db.sql`SELECT locator::int AS pid FROM replicas WHERE state IN ('STARTING', 'READY', 'DRAINING') AND locator IS NOT NULL`;
  for (const row of rows) {
    try {
      process.kill(-row.pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  await hub.close();
  await db.close();
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function counts(id: string) {
  const [row] = await db.sql<{ status: string; curr_replica_cnt: number; desired_replica_cnt: number }[]>`
    SELECT status, curr_replica_cnt, desired_replica_cnt FROM endpoints WHERE id = ${id}`;
  const ready = await db.sql`SELECT id FROM replicas WHERE endpoint_id = ${id} AND state = 'READY'`;
  return { status: row!.status, curr: row!.curr_replica_cnt, desired: row!.desired_replica_cnt, ready: ready.length };
}

/** A client that sends one chat request after another until stopped (a 429 waits its Retry-After, at most 1 s). */
async function closedLoop(url: string, model: string, signal: AbortSignal): Promise<{ ok: number; refused: number }> {
  const tally = { ok: 0, refused: 0 };
  while (!signal.aborted) {
    try {
      const response = await fetch(`${url}/dedicated/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 300, temperature: 0 }),
        signal,
      });
      await response.arrayBuffer();
      if (response.status === 200) tally.ok++;
      else if (response.status === 429) {
        tally.refused++;
        await new Promise((r) => setTimeout(r, Math.min(1000, Number(response.headers.get('retry-after') ?? 1) * 1000)));
      }
    } catch {
      // aborted
    }
  }
  return tally;
}

describe('demand across gateway processes', () => {
  test("requests queued in one gateway scale the endpoint out through the other's controller, and it scales back in after the cooldown", async () => {
    const rest = restClient(gateways[0]!.url, ADMIN_KEY);
    const created = await rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(projectId, {
        hfModelRepo: TINY_REPO,
        autoscalingPolicy: { minReplica: 1, maxReplica: 2, cooldownPeriod: 2 },
        advanced: { max_batch_size: 1, max_token_count: 4096, max_input_length: 64 },
      }),
    );
    const id = created.body.endpointId as string;
    await waitFor('RUNNING', async () => (await counts(id)).status === 'RUNNING' || undefined, 90_000);
    expect(await counts(id)).toMatchObject({ curr: 1, ready: 1 });

    // The clients go to the gateway that does not hold the endpoint's lease. It admits one request at a time
    // (one replica, max_batch_size 1), so the engine alone never sees more than one: only the queue it
    // publishes can tell the other process's controller that more is wanted.
    const [lease] = await db.sql<{ owner: string }[]>`SELECT owner FROM endpoint_leases WHERE endpoint_id = ${id}`;
    const holder = gateways.find((g) => lease!.owner.startsWith(`gw-${g.child.pid}-`));
    expect(holder).toBeDefined();
    const other = gateways.find((g) => g !== holder)!;

    const stop = new AbortController();
    const clients = Array.from({ length: 6 }, () => closedLoop(other.url, id, stop.signal));
    const published = await waitFor(
      'the queue published',
      async () => {
        const rows = await db.sql<
          { process_id: string; queued: number }[]
        >`SELECT process_id, queued FROM gateway_queue_depth WHERE endpoint_id = ${id} AND queued > 0`;
        return rows[0];
      },
      30_000,
    );
    expect(published.process_id.startsWith(`gw-${other.child.pid}-`)).toBe(true);

    const scaled = await waitFor(
      'a second replica READY',
      async () => {
        const c = await counts(id);
        return c.ready === 2 && c.curr === 2 ? c : undefined;
      },
      90_000,
    );
    expect(scaled).toMatchObject({ status: 'RUNNING', desired: 2 });
    const causes = await db.sql`SELECT cause FROM endpoint_events WHERE endpoint_id = ${id} AND type = 'REPLICAS_CHANGED'`;
    expect(causes.map((c) => c.cause)).toContain('controller:scale-up');
    // The scale-out came from the lease holder's controller, which saw the other process's queue.
    const [still] = await db.sql<{ owner: string }[]>`SELECT owner FROM endpoint_leases WHERE endpoint_id = ${id}`;
    expect(still!.owner).toBe(lease!.owner);

    stop.abort();
    const tallies = await Promise.all(clients);
    expect(tallies.reduce((sum, t) => sum + t.ok, 0)).toBeGreaterThan(0);

    // No demand: back to minReplica after the cooldown, and the published queue is empty.
    const calm = await waitFor(
      'scale-in to one replica',
      async () => {
        const c = await counts(id);
        return c.curr === 1 && c.desired === 1 && c.ready === 1 ? c : undefined;
      },
      60_000,
    );
    expect(calm.status).toBe('RUNNING');
    const [queued] = await db.sql<
      { queued: number }[]
    >`SELECT coalesce(sum(queued), 0)::int AS queued FROM gateway_queue_depth WHERE endpoint_id = ${id}`;
    expect(queued!.queued).toBe(0);
  }, 240_000);
});
