/**
 * Live status across gateway processes: two real gateway processes on one
 * database; a subscriber on one sees, in order, every change driven through
 * the other, and can resume after a dropped connection without loss or
 * duplicates.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { standardRepos, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient, type RestClient } from '../support/gateway.js';
import { startGatewayProcess, type GatewayProcess } from '../support/processes.js';

const ADMIN_KEY = 'test_two_gateways_admin_key_0123456789';

let db: TestDatabase;
let hub: FakeHub;
const dirs: string[] = [];
let a: GatewayProcess;
let b: GatewayProcess;
let restB: RestClient;
let projectId: string;

interface Event {
  id: string;
  type: string;
  endpointId: string;
  status: string | null;
  phase: string | null;
  versionIndex: number | null;
}

const EVENTS = `subscription($projectId: ID!, $after: ID) {
  endpointEvents(projectId: $projectId, after: $after) { id type endpointId status phase versionIndex }
}`;

beforeAll(async () => {
  db = await createTestDatabase();
  hub = await startFakeHub({ repos: standardRepos() });
  const start = async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-gw-'));
    await chmod(dir, 0o755);
    dirs.push(dir);
    return startGatewayProcess({ ...testEnv(dir, hub.url), DATABASE_URL: db.dbUrl, ADMIN_API_KEY: ADMIN_KEY });
  };
  [a, b] = await Promise.all([start(), start()]);
  restB = restClient(b.url, ADMIN_KEY);
  const teams = await restClient(a.url, ADMIN_KEY)('POST', '/graphql', { query: '{ teams { projects { id } } }' });
  projectId = teams.body.data.teams[0].projects[0].id;
}, 120_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
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

function wsClient(url: string, key = ADMIN_KEY): Client {
  return createClient({
    url: `${url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${key}` },
    retryAttempts: 0,
  });
}

function collect(client: Client, query: string, variables: Record<string, unknown>) {
  const items: Event[] = [];
  const state = { error: undefined as unknown, done: false };
  const unsubscribe = client.subscribe(
    { query, variables },
    {
      next: (r) => items.push(Object.values(r.data as Record<string, Event>)[0]!),
      error: (e) => (state.error = e),
      complete: () => (state.done = true),
    },
  );
  return { items, state, unsubscribe };
}

async function status(id: string): Promise<string> {
  const [row] = await db.sql`SELECT status FROM endpoints WHERE id = ${id}`;
  return row!.status;
}

/** The id of the project's latest event ('0' before any): a subscription from there misses nothing that comes after. */
async function latestEventId(): Promise<string> {
  const [row] = await db.sql<
    { id: string }[]
  >`SELECT coalesce(max(id), 0)::text AS id FROM endpoint_events WHERE project_id = ${projectId}`;
  return row!.id;
}

/** The lease holder of an endpoint: a gateway's controller names itself `gw-<its process id>-<random>`. */
async function leaseHolder(id: string): Promise<string | undefined> {
  const [row] = await db.sql<{ owner: string }[]>`SELECT owner FROM endpoint_leases WHERE endpoint_id = ${id} AND expires_at > now()`;
  return row?.owner;
}

const ownerOf = (gateway: GatewayProcess) => new RegExp(`^gw-${gateway.child.pid}-`);

describe('two gateway processes on one database', () => {
  test('both adopted the schema and one bootstrap; each endpoint is leased by one of them, which keeps it', async () => {
    const users = await db.sql`SELECT count(*)::int AS n FROM users`;
    expect(users[0]!.n).toBe(1);
    expect(a.url).not.toBe(b.url);

    // Endpoints created through either gateway (no weights in the repository: no engine starts, they go FAILED). Which
    // gateway takes each is a race; what must hold is that one of the two holds each lease and keeps it, renewed past
    // the lease's TTL, while both run (no stealing, no flapping). Freezing one gateway to force a split (SIGSTOP) could
    // freeze it inside a transaction whose locks the other then waits on.
    const ids: string[] = [];
    for (const rest of [restB, restClient(a.url, ADMIN_KEY), restB, restClient(a.url, ADMIN_KEY)]) {
      const created = await rest('POST', '/dedicated/beta/endpoint', createBody(projectId, { hfModelRepo: 'test-org/no-weights' }));
      expect(created.status).toBe(200);
      ids.push(created.body.endpointId as string);
    }
    const holders = new Map<string, string>();
    for (const id of ids) {
      await waitFor(`${id} to be FAILED`, async () => (await status(id)) === 'FAILED', 60_000);
      const holder = await waitFor(`${id}'s lease`, async () => leaseHolder(id), 30_000);
      expect([ownerOf(a), ownerOf(b)].some((owner) => owner.test(holder))).toBe(true);
      holders.set(id, holder);
    }
    const renewedPast = new Date(Date.now() + Number(testEnv('', '').LEASE_TTL_MS));
    await waitFor(
      'every lease renewed past its TTL',
      async () => {
        const rows = await db.sql<{ endpoint_id: string; owner: string; expires_at: Date }[]>`
          SELECT endpoint_id, owner, expires_at FROM endpoint_leases WHERE endpoint_id IN ${db.sql(ids)}`;
        return rows.length === ids.length && rows.every((r) => r.expires_at > renewedPast) ? rows : undefined;
      },
      30_000,
    );
    for (const id of ids) expect(await leaseHolder(id)).toBe(holders.get(id));
    // Out of the way of the next tests, which read the project's events.
    for (const id of ids) await restB('DELETE', `/dedicated/beta/endpoint/${id}`);
    await waitFor(
      'the endpoints cleaned up',
      async () => (await db.sql`SELECT 1 FROM endpoints WHERE id IN ${db.sql(ids)} AND cleaned_at IS NULL`).length === 0,
      60_000,
    );
  }, 180_000);

  test('a subscriber on gateway A sees, in order, every change made through gateway B: create to RUNNING, sleep, wake, update, terminate, delete', async () => {
    const client = wsClient(a.url);
    // From the latest event on: whenever the subscription starts, it misses nothing created after this point.
    const events = collect(client, EVENTS, { projectId, after: await latestEventId() });
    const statusUpdates = { items: [] as { event: Event | null; status: { status: string } }[] };

    const created = await restB(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(projectId, {
        hfModelRepo: TINY_REPO,
        autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
        advanced: { max_token_count: 1024 },
      }),
    );
    const id = created.body.endpointId as string;
    const statusClient = wsClient(a.url);
    const statusSub = collect(
      statusClient,
      `subscription($id: ID!) { endpointStatus(endpointId: $id) { event { id type status } status { status phase currReplicaCnt } } }`,
      { id },
    );
    statusUpdates.items = statusSub.items as never;

    await waitFor('RUNNING', async () => (await status(id)) === 'RUNNING');
    await restB('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
    await waitFor('SLEEPING', async () => (await status(id)) === 'SLEEPING');
    await restB('PUT', `/dedicated/beta/endpoint/${id}/wake`);
    await waitFor('RUNNING again', async () => (await status(id)) === 'RUNNING');
    await restB('PUT', `/dedicated/beta/endpoint/${id}`, { newVersionComment: 'v1' });
    await waitFor('the rollout', async () => {
      const [row] = await db.sql`SELECT status, updated_replica_cnt FROM endpoints WHERE id = ${id}`;
      return row!.status === 'RUNNING' && row!.updated_replica_cnt === 1;
    });
    await restB('PUT', `/dedicated/beta/endpoint/${id}/terminate`);
    await waitFor('TERMINATED', async () => (await status(id)) === 'TERMINATED');
    await restB('DELETE', `/dedicated/beta/endpoint/${id}`);

    const stored = await db.sql<Event[]>`
      SELECT id::text, type, endpoint_id AS "endpointId", status, phase, version_index AS "versionIndex"
      FROM endpoint_events WHERE endpoint_id = ${id} ORDER BY endpoint_events.id`;
    await waitFor('every event to arrive', async () => events.items.filter((e) => e.endpointId === id).length === stored.length, 10_000);
    expect(events.items.filter((e) => e.endpointId === id)).toEqual(stored);
    const trail = stored.filter((e) => e.type === 'CREATED' || e.type === 'STATUS_CHANGED').map((e) => e.status);
    expect(trail).toEqual([
      'INITIALIZING',
      'INITIALIZING',
      'INITIALIZING',
      'READY',
      'RUNNING',
      'STOPPING',
      'SLEEPING',
      'AWAKING',
      'READY',
      'RUNNING',
      'UPDATING',
      'RUNNING',
      'TERMINATING',
      'TERMINATED',
    ]);
    expect(stored.map((e) => e.type)).toEqual(expect.arrayContaining(['CREATED', 'VERSION_ADDED', 'REPLICAS_CHANGED', 'DELETED']));

    // The status subscription: the current status first, every change after it, and completion on delete.
    await waitFor('the status subscription to complete', async () => statusSub.state.done, 10_000);
    const statusEvents = statusSub.items.map((u) => (u as unknown as { event: { id: string } | null }).event?.id).filter(Boolean);
    expect(statusEvents).toEqual(stored.slice(stored.findIndex((e) => e.id === statusEvents[0])).map((e) => e.id));
    expect(statusSub.state.error).toBeUndefined();
    events.unsubscribe();
    await client.dispose();
    await statusClient.dispose();
  }, 120_000);

  test('a subscriber that reconnects with the last event id it saw gets what it missed, in order, without duplicates', async () => {
    const first = wsClient(a.url);
    const before = collect(first, EVENTS, { projectId, after: await latestEventId() });
    const id = (await restB('POST', '/dedicated/beta/endpoint', createBody(projectId, { hfModelRepo: 'test-org/no-weights' }))).body
      .endpointId as string;
    await waitFor('the first events', async () => before.items.some((e) => e.endpointId === id && e.type === 'CREATED'));
    const lastSeen = before.items.at(-1)!.id;
    await first.dispose(); // the connection drops

    await waitFor('FAILED', async () => (await status(id)) === 'FAILED');
    for (let i = 0; i < 5; i++) await restB('PUT', `/dedicated/beta/endpoint/${id}`, { newVersionComment: `while away ${i}` });

    const second = wsClient(b.url);
    const after = collect(second, EVENTS, { projectId, after: lastSeen });
    await restB('PUT', `/dedicated/beta/endpoint/${id}`, { newVersionComment: 'live again' });
    const stored = await waitFor(
      'the missed and the live events',
      async () => {
        const rows = await db.sql<
          { id: string }[]
        >`SELECT id::text FROM endpoint_events WHERE project_id = ${projectId} AND id > ${lastSeen}::bigint ORDER BY endpoint_events.id`;
        const live = after.items.some((e) => e.type === 'VERSION_ADDED' && e.versionIndex === 6);
        return live && after.items.length >= rows.length ? rows : undefined;
      },
      10_000,
    );
    expect(after.items.map((e) => e.id)).toEqual(stored.map((r) => r.id));
    expect(new Set(after.items.map((e) => e.id)).size).toBe(after.items.length);
    await second.dispose();
  }, 120_000);
});
