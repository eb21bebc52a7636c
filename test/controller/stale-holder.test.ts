/**
 * A gateway that lost an endpoint's lease while it decided a step (paused, or slow, and another gateway took the
 * endpoint over) writes nothing of that step: the version's rollout state is fenced by the lease like the endpoint's
 * status is. Here gateway A read the endpoint during a rollout, B took it over and finished the rollout, then A
 * carries on with the failure it had decided on.
 */
import { expect, test } from 'vitest';
import { EndpointWrites, StaleError } from '../../src/controller/endpoint-writes.js';
import { Rollout } from '../../src/controller/rollout.js';
import { ReplicaStartError } from '../../src/runtime/runtime.js';
import { createServices } from '../../src/services/index.js';
import { findEndpoints } from '../../src/storage/endpoints-repository.js';
import { acquireLeases } from '../../src/storage/leases-repository.js';
import { createTestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

test("a holder whose lease was taken over cannot mark the version it rolled out FAILED: the new holder's ROLLED_OUT stands", async () => {
  const db = await createTestDatabase();
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'stale-holder');
  const id = await createEndpointThrough(services, principal, projectId);
  await services.endpoints.update(principal, id, { newVersionComment: 'v1' });
  await db.sql`UPDATE endpoints SET status = 'UPDATING', phase = NULL WHERE id = ${id}`;
  const [seenByA] = await findEndpoints(db.sql, [id]);
  // A's lease lapsed; B took the endpoint over and finished the rollout.
  await db.sql`INSERT INTO endpoint_leases (endpoint_id, owner, expires_at) VALUES (${id}, 'gw-A', now() - interval '1 s')`;
  expect(await acquireLeases(db.sql, [id], 'gw-B', 60_000)).toEqual(new Set([id]));
  await new EndpointWrites(db.sql, 'gw-B').setRollout(id, 1, { rolloutState: 'ROLLED_OUT' });
  await db.sql`UPDATE endpoints SET status = 'RUNNING' WHERE id = ${id}`;

  const rolloutA = new Rollout(db.sql, new EndpointWrites(db.sql, 'gw-A'), undefined as never, undefined as never, 0, () => {});
  const outcome = await rolloutA.fail(seenByA!, new ReplicaStartError('INFERENCE_ENGINE_UNKNOWN_ERROR', 'x')).catch((e: unknown) => e);
  expect(outcome).toBeInstanceOf(StaleError);
  const [row] = await db.sql<{ status: string; rollout_state: string }[]>`
    SELECT e.status, v.rollout_state FROM endpoints e
    JOIN endpoint_versions v ON v.endpoint_id = e.id AND v.version_index = e.current_version WHERE e.id = ${id}`;
  expect(row).toEqual({ status: 'RUNNING', rollout_state: 'ROLLED_OUT' });
  await db.close();
});
