/**
 * The reconcile loop renews its leases a third of their TTL apart, not on every interval's pass (each renewal
 * rewrites every lease row the process holds), and they never lapse while it runs: on a real database, a loop of a
 * 50 ms interval and a 1.5 s TTL, watched for 2.5 s, over an endpoint at rest (whose lease no pass takes again).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ReconcileLoop } from '../../src/controller/reconcile-loop.js';
import { createServices } from '../../src/services/index.js';
import { readPassState } from '../../src/storage/pass-reads.js';
import { QUEUE_DEPTH_STALE_MS } from '../../src/storage/queue-depth-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
const sent: string[] = [];
const sentLike = (prefix: string) => sent.filter((q) => q.replace(/\s+/g, ' ').trim().startsWith(prefix)).length;

beforeAll(async () => {
  db = await createTestDatabase({ onQuery: (query) => sent.push(query) });
});

afterAll(() => db?.close());

test('renewed a third of the TTL apart, never lapsing, while the interval lists the endpoints every 50 ms', async () => {
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'renewal');
  const id = await createEndpointThrough(services, principal, projectId);
  const owner = 'gw-renewal';
  const leaseTtlMs = 1500;
  let passes = 0;
  // The endpoint is at rest after its first pass (the pass answers the stamp it read) and the rest interval outlasts
  // the test: no pass takes its lease again, the renewals alone keep it.
  const loop = new ReconcileLoop({
    sql: db.sql,
    owner,
    intervalMs: 50,
    restIntervalMs: 600_000,
    leaseTtlMs,
    reconcile: async (endpointId) => {
      passes++;
      return (await readPassState(db.sql, endpointId, QUEUE_DEPTH_STALE_MS))?.stamp;
    },
    log: () => {},
  });
  sent.length = 0;
  loop.start();
  const lapsed: Date[] = [];
  try {
    const ends = Date.now() + 2500;
    while (Date.now() < ends) {
      const [lease] = await db.sql<{ owner: string; live: boolean; expires_at: Date }[]>`
        SELECT owner, expires_at > now() AS live, expires_at FROM endpoint_leases WHERE endpoint_id = ${id}`;
      if (lease && (lease.owner !== owner || !lease.live)) lapsed.push(lease.expires_at);
      await sleep(25);
    }
  } finally {
    await loop.stop();
  }
  expect(lapsed).toEqual([]);
  const listings = sentLike('SELECT e.id, e.updated_at');
  const renewals = sentLike('WITH member AS');
  // About fifty listings (one per interval), and five renewals in 2.5 s (one each 500 ms), give or take a slow tick.
  expect(listings).toBeGreaterThanOrEqual(15);
  expect(renewals).toBeGreaterThanOrEqual(3);
  expect(renewals).toBeLessThanOrEqual(7);
  expect(passes).toBe(1);
});
