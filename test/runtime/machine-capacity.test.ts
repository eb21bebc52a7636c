/**
 * The local runtime's admission (src/runtime/machine-capacity.ts), on a real database: asked for several replicas at
 * once, it admits as many as the machine's free GPUs of the kind hold, counting the live replicas every gateway
 * placed there, and says why the others wait; the rows written in the same transaction are counted by the next ask.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { findInstanceOption, type InstanceOption } from '../../src/domain/instance-catalog.js';
import { admitOnMachine } from '../../src/runtime/machine-capacity.js';
import { createServices } from '../../src/services/index.js';
import { insertReplicas, markReplica } from '../../src/storage/replicas-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
let endpointId: string;
const ONE_H100 = findInstanceOption('TwD5AqnBSVN0')!;
const TWO_H100 = findInstanceOption('zfTutSiLn0Hq')!;

beforeAll(async () => {
  db = await createTestDatabase();
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'capacity');
  endpointId = await createEndpointThrough(services, principal, projectId);
});

afterAll(() => db?.close());

let next = 0;
const rowsOn = (node: string, option: InstanceOption, n: number) =>
  Array.from({ length: n }, () => ({
    id: `rep_capacity_${next++}`,
    endpointId,
    versionIndex: 1,
    runtime: 'local',
    node,
    gpuType: option.gpuType,
    numGpu: option.numGpu,
  }));

test('admits as many as fit, and says why the rest wait', async () => {
  // One H100 of four in use on this machine; a stopped replica holds none.
  await insertReplicas(db.sql, rowsOn('m1', ONE_H100, 2));
  await markReplica(db.sql, `rep_capacity_${next - 1}`, { state: 'STOPPED' });
  const offered = { H100: 4 };
  await db.sql.begin(async (tx) => {
    expect(await admitOnMachine(tx, 'm1', offered, ONE_H100, 5)).toEqual({
      admitted: 3,
      node: 'm1',
      reason: 'waiting for 1 × H100 80 GB: 4 of 4 in use',
    });
  });
  await db.sql.begin(async (tx) => {
    expect(await admitOnMachine(tx, 'm1', offered, TWO_H100, 3)).toEqual({
      admitted: 1,
      node: 'm1',
      reason: 'waiting for 2 × H100 80 GB: 3 of 4 in use',
    });
    // What this transaction writes is counted by its next ask.
    await insertReplicas(tx, rowsOn('m1', TWO_H100, 1));
    expect(await admitOnMachine(tx, 'm1', offered, ONE_H100, 2)).toEqual({
      admitted: 1,
      node: 'm1',
      reason: 'waiting for 1 × H100 80 GB: 4 of 4 in use',
    });
  });
  await db.sql.begin(async (tx) => {
    // Committed: three in use now.
    expect(await admitOnMachine(tx, 'm1', offered, ONE_H100, 2)).toEqual({
      admitted: 1,
      node: 'm1',
      reason: 'waiting for 1 × H100 80 GB: 4 of 4 in use',
    });
    expect(await admitOnMachine(tx, 'm1', offered, TWO_H100, 1)).toEqual({
      admitted: 0,
      node: 'm1',
      reason: 'waiting for 2 × H100 80 GB: 3 of 4 in use',
    });
  });
});

test('all asked when they fit; none, with the reason, on a machine without the kind or with too few', async () => {
  await db.sql.begin(async (tx) => {
    expect(await admitOnMachine(tx, 'm2', { H100: 8 }, TWO_H100, 4)).toEqual({ admitted: 4, node: 'm2' });
    expect(await admitOnMachine(tx, 'm2', { H100: 8 }, TWO_H100, 0)).toEqual({ admitted: 0, node: 'm2' });
    expect(await admitOnMachine(tx, 'm2', {}, ONE_H100, 1)).toEqual({
      admitted: 0,
      node: 'm2',
      reason: 'waiting for 1 × H100 80 GB: this runtime offers none',
    });
    expect(await admitOnMachine(tx, 'm2', { H100: 1 }, TWO_H100, 1)).toEqual({
      admitted: 0,
      node: 'm2',
      reason: 'waiting for 2 × H100 80 GB: this runtime offers only 1',
    });
  });
});
