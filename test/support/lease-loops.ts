/**
 * Real reconcile loops (src/controller/reconcile-loop.ts) on a test database of their own, for the tests of how
 * gateways share the endpoints (test/controller/lease-share.test.ts, installations-share.test.ts): endpoints created
 * through the services, each endpoint's holder, and loops whose passes are recorded.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll } from 'vitest';
import { ReconcileLoop, type ReconcileLoopOptions } from '../../src/controller/reconcile-loop.js';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { readPassState } from '../../src/storage/pass-reads.js';
import { QUEUE_DEPTH_STALE_MS } from '../../src/storage/queue-depth-repository.js';
import { onCleanup } from './cleanup.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { createBody, seedPrincipal } from './gateway.js';

/**
 * The loops' lease TTL: short, so that membership and hand-overs come quickly, yet long enough that a loop's renewal is
 * not late on a loaded machine (at 1.5 s, a full run's load let leases lapse and another gateway take them).
 */
export const LEASE_TTL_MS = 3000;

/** A test database (created before the file's tests, closed after them), and the helpers over it. */
export function useLeaseLoops(name: string) {
  const kit = {} as { db: TestDatabase; services: Services; principal: Principal; projectId: string };
  beforeAll(async () => {
    kit.db = await createTestDatabase();
    kit.services = createServices(kit.db.sql);
    ({ principal: kit.principal, projectId: kit.projectId } = await seedPrincipal(kit.db.sql, kit.services, name));
  });
  afterAll(() => kit.db?.close());
  /** The database, once created (read by the tests, not at import). */
  const db = {
    get sql() {
      return kit.db.sql;
    },
  };

  async function createEndpoints(n: number, prefix: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const created = await kit.services.endpoints.create(
        kit.principal,
        createBody(kit.projectId, { name: `${prefix}-${i}`, hfModelRepo: 'test-org/none' }),
      );
      if (created.type === 'error') throw new Error(created.error.message);
      ids.push(created.value.id);
    }
    return ids;
  }

  /** Each endpoint's holder (a live lease), by owner. */
  async function holders(ids: readonly string[]): Promise<Map<string, string[]>> {
    const rows = await db.sql<{ endpoint_id: string; owner: string }[]>`
      SELECT endpoint_id, owner FROM endpoint_leases WHERE endpoint_id = ANY(${ids as string[]}) AND expires_at > now()`;
    const by = new Map<string, string[]>();
    for (const r of rows) by.set(r.owner, [...(by.get(r.owner) ?? []), r.endpoint_id]);
    return by;
  }

  async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
    const ends = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > ends) throw new Error(`timed out waiting for ${what}`);
      await sleep(50);
    }
  }

  /**
   * Real reconcile loops on the test database, their passes recorded: which owner passed which endpoint, and any two
   * passes at once on one endpoint (two controllers acting on it); what each logged and was told to forget.
   */
  function loops() {
    /** Passes running now, by endpoint: two at once on one endpoint would be two controllers acting on it. */
    const inPass = new Map<string, string>();
    const overlaps: string[] = [];
    const passesBy = new Map<string, Set<string>>();
    const logged: string[] = [];
    /** The endpoints each loop told its controller to forget (it no longer holds them). */
    const forgotten = new Map<string, string[]>();
    const loop = (owner: string, pool: string, more: Partial<ReconcileLoopOptions> = {}) => {
      const l = new ReconcileLoop({
        sql: db.sql,
        owner,
        pool,
        intervalMs: 50,
        // At rest after its first pass: the endpoint is passed again only when handed over, or after 10 minutes.
        restIntervalMs: 600_000,
        leaseTtlMs: LEASE_TTL_MS,
        reconcile: async (id) => {
          if (inPass.has(id)) overlaps.push(`${id}: ${inPass.get(id)} and ${owner}`);
          inPass.set(id, owner);
          passesBy.set(owner, (passesBy.get(owner) ?? new Set()).add(id));
          try {
            await sleep(5);
            return (await readPassState(db.sql, id, QUEUE_DEPTH_STALE_MS))?.stamp;
          } finally {
            inPass.delete(id);
          }
        },
        log: (message) => logged.push(`${owner}: ${message}`),
        forget: (ids) => forgotten.set(owner, [...(forgotten.get(owner) ?? []), ...ids]),
        ...more,
      });
      l.start();
      onCleanup(() => l.stop());
      return l;
    };
    return { loop, overlaps, passesBy, logged, forgotten };
  }

  return { db, createEndpoints, holders, until, loops };
}
