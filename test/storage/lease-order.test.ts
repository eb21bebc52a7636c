/**
 * Statements that write several lease rows lock them in id order, so that they never deadlock with one another.
 * Here gateway A's leases have expired and gateway B takes them over (acquireLeases, which writes in id order) while
 * A, late, renews them (heartbeat) or hands them back as it stops (releaseLeases). The interleaving that deadlocked
 * (40P01) is forced, not hoped for: B's takeover is held, by a trigger waiting on an advisory lock the test holds,
 * once it has locked the lower id's row; A's statement starts only then, and B goes on only once A waits for a lock.
 * A's rows are stored higher id first, so a scan without an order (the UPDATE or DELETE alone) locks the higher id's
 * row first, and B then waits on it while A waits on B. In id order, A waits for the lower id's row holding nothing,
 * B takes both, and A finds neither is its own any more.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createServices } from '../../src/services/index.js';
import { acquireLeases, heartbeat, releaseLeases } from '../../src/storage/leases-repository.js';
import { createTestDatabase, waitForLockWait, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

const HOLD = 4242;
let db: TestDatabase;
let ids: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'lease-order');
  ids = [await createEndpointThrough(services, principal, projectId), await createEndpointThrough(services, principal, projectId)].sort();
  // Holds B's takeover of A's row once it has locked it (the first: the lower id), until the test lets it go on.
  await db.sql.unsafe(`
    CREATE FUNCTION hold_takeover() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.owner = 'gw-B' AND OLD.owner = 'gw-A' THEN PERFORM pg_advisory_xact_lock_shared(${HOLD}); END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER hold_takeover BEFORE UPDATE ON endpoint_leases FOR EACH ROW EXECUTE FUNCTION hold_takeover();`);
});

afterAll(() => db.close());

test.each([
  [
    'renews its leases (heartbeat)',
    (): Promise<unknown> => heartbeat(db.sql, 'gw-A', 'default', 60_000),
    '%INSERT INTO controller_members%',
  ],
  ['hands its leases back (releaseLeases)', (): Promise<unknown> => releaseLeases(db.sql, 'gw-A'), '%DELETE FROM controller_members%'],
])(
  'a gateway that %s while another takes them over waits in id order, and neither deadlocks',
  async (_, statement, like) => {
    const [low, high] = ids as [string, string];
    await db.sql`DELETE FROM endpoint_leases`;
    // Stored higher id first: the order a scan without ORDER BY finds them in.
    for (const id of [high, low])
      await db.sql`INSERT INTO endpoint_leases (endpoint_id, owner, expires_at) VALUES (${id}, 'gw-A', now() - interval '1 s')`;
    const holder = await db.sql.reserve();
    try {
      await holder`SELECT pg_advisory_lock(${HOLD})`;
      const takeover = acquireLeases(db.sql, [low, high], 'gw-B', 60_000);
      await waitForLockWait(db.sql, "B's takeover, once it locked the lower id's row", '%INSERT INTO endpoint_leases%');
      const ofA = statement();
      await waitForLockWait(db.sql, "A's statement", like);
      await holder`SELECT pg_advisory_unlock(${HOLD})`;
      const [taken, done] = await Promise.allSettled([takeover, ofA]);
      expect(taken).toEqual({ status: 'fulfilled', value: new Set([low, high]) });
      expect(done.status === 'rejected' ? done.reason : null).toBeNull();
    } finally {
      holder.release();
    }
    const rows = await db.sql<
      { endpoint_id: string; owner: string }[]
    >`SELECT endpoint_id, owner FROM endpoint_leases ORDER BY endpoint_id`;
    expect(rows).toEqual([
      { endpoint_id: low, owner: 'gw-B' },
      { endpoint_id: high, owner: 'gw-B' },
    ]);
  },
  30_000,
);
