/**
 * The rows of new replicas, as the controller writes them when a runtime admits every replica (the Kubernetes
 * runtime: the cluster's scheduler places each Pod), on a real database: one statement, under the endpoint's lease,
 * only while the endpoint wants to run, checked on its row as locked (a sleep committed while the statement waited is
 * seen); otherwise nothing is written and the step is stale.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { EndpointWrites, StaleError } from '../../src/controller/endpoint-writes.js';
import { findInstanceOption } from '../../src/domain/instance-catalog.js';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import type { Sql } from '../../src/storage/database.js';
import { acquireLeases } from '../../src/storage/leases-repository.js';
import { createTestDatabase, waitForLockWait, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
let services: Services;
let principal: Principal;
let projectId: string;
/** The statements sent, as sent. */
const sent: string[] = [];
const OWNER = 'gw-admission';
/** What the controller asks of a runtime that admits every replica: its name and its pool (no `admit`). */
const cluster = { name: 'kubernetes', node: 'https://kube.example:6443/ns' };
const option = findInstanceOption('zfTutSiLn0Hq')!; // two H100s

beforeAll(async () => {
  db = await createTestDatabase({ onQuery: (query) => sent.push(query) });
  services = createServices(db.sql);
  ({ principal, projectId } = await seedPrincipal(db.sql, services, 'admission'));
});

afterAll(() => db?.close());

/** A new endpoint whose lease `owner` holds. */
async function leasedEndpoint(owner = OWNER): Promise<string> {
  const id = await createEndpointThrough(services, principal, projectId);
  expect([...(await acquireLeases(db.sql, [id], owner, 60_000))]).toEqual([id]);
  return id;
}

const rowsOf = (endpointId: string) =>
  db.sql`SELECT id, state, runtime, node, gpu_type, num_gpu, version_index FROM replicas WHERE endpoint_id = ${endpointId} ORDER BY id`;

test("a runtime that admits every replica: the rows in one statement, STARTING, in the runtime's pool", async () => {
  const id = await leasedEndpoint();
  const writes = new EndpointWrites(db.sql, OWNER);
  sent.length = 0;
  const { begun, refusal } = await writes.admitReplicas(id, cluster, option, 1, 3);
  expect(sent).toHaveLength(1);
  expect(refusal).toBeUndefined();
  expect(begun).toHaveLength(3);
  const rows = await rowsOf(id);
  expect(rows.map((r) => r.id)).toEqual([...begun].sort());
  for (const row of rows) {
    expect(row).toMatchObject({ state: 'STARTING', runtime: 'kubernetes', node: cluster.node, version_index: 1 });
    expect(row).toMatchObject({ gpu_type: option.gpuType, num_gpu: option.numGpu });
  }
});

test("without the endpoint's lease (another gateway's, or expired), or once the endpoint no longer wants to run: stale, nothing written", async () => {
  const writes = new EndpointWrites(db.sql, OWNER);
  const others = await leasedEndpoint('gw-other');
  await expect(writes.admitReplicas(others, cluster, option, 1, 2)).rejects.toBeInstanceOf(StaleError);
  expect(await rowsOf(others)).toHaveLength(0);

  const expired = await leasedEndpoint();
  await db.sql`UPDATE endpoint_leases SET expires_at = now() - interval '1 second' WHERE endpoint_id = ${expired}`;
  await expect(writes.admitReplicas(expired, cluster, option, 1, 2)).rejects.toBeInstanceOf(StaleError);
  expect(await rowsOf(expired)).toHaveLength(0);

  const asleep = await leasedEndpoint();
  await db.sql`UPDATE endpoints SET desired_state = 'SLEEPING' WHERE id = ${asleep}`;
  await expect(writes.admitReplicas(asleep, cluster, option, 1, 2)).rejects.toBeInstanceOf(StaleError);
  expect(await rowsOf(asleep)).toHaveLength(0);
});

/**
 * Runs `change` in another transaction that holds its locks until the admission of `endpointId`'s rows waits for them,
 * then commits: what the admission answered ('written', 'stale') and the rows it left.
 */
async function admitWhileHeld(endpointId: string, change: (tx: Sql) => Promise<unknown>) {
  const writes = new EndpointWrites(db.sql, OWNER);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const changed = new Promise<void>((resolve) => (locked = resolve));
  const other = db.sql.begin(async (tx) => {
    await change(tx as unknown as Sql);
    locked();
    await held;
  });
  try {
    await changed;
    const outcome = writes.admitReplicas(endpointId, cluster, option, 1, 2).then(
      () => 'written',
      (error: unknown) => (error instanceof StaleError ? 'stale' : error),
    );
    await waitForLockWait(db.sql, 'the rows', '%INSERT INTO replicas%');
    release();
    await other;
    return { outcome: await outcome, rows: await rowsOf(endpointId) };
  } finally {
    release();
    await other.catch(() => {});
  }
}

test("a sleep committed while the rows waited for the endpoint's lock is seen: nothing written", async () => {
  const id = await leasedEndpoint();
  const seen = await admitWhileHeld(id, (tx) => tx`UPDATE endpoints SET desired_state = 'SLEEPING' WHERE id = ${id}`);
  expect(seen).toEqual({ outcome: 'stale', rows: [] });
});

test('a lease taken over while the rows waited for it is seen: nothing written', async () => {
  const id = await leasedEndpoint();
  const seen = await admitWhileHeld(
    id,
    (tx) => tx`UPDATE endpoint_leases SET owner = 'gw-other', expires_at = now() + interval '1 minute' WHERE endpoint_id = ${id}`,
  );
  expect(seen).toEqual({ outcome: 'stale', rows: [] });
});

test('a change that leaves the endpoint wanted and the lease ours (a renewal, a write to the row): the rows are written once it commits', async () => {
  const id = await leasedEndpoint();
  const seen = await admitWhileHeld(id, async (tx) => {
    await tx`UPDATE endpoint_leases SET expires_at = now() + interval '1 minute' WHERE endpoint_id = ${id}`;
    await tx`UPDATE endpoints SET updated_at = now() WHERE id = ${id}`;
  });
  expect(seen.outcome).toBe('written');
  expect(seen.rows).toHaveLength(2);
});
