/**
 * The names a Kubernetes runtime gives its pool (src/runtime/kubernetes/cluster-identity.ts): the namespace and the
 * cluster, told apart by the cluster's certificate authority (the API server's address inside a cluster is the same
 * in every cluster of a kind), the namespace's alone without one; and the database's reads of a pool's replicas, which
 * count the rows of its former name (before the cluster was named) and no other cluster's.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { clusterId, clusterNames } from '../../src/runtime/kubernetes/cluster-identity.js';
import { poolNodes } from '../../src/runtime/runtime.js';
import { createServices } from '../../src/services/index.js';
import { insertReplica, liveReplicaIdsOnNode, markReplica, requestedGpus } from '../../src/storage/replicas-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

/** A PEM certificate whose body is these bytes (the fingerprint reads the PEM, not the DER inside). */
const pem = (seed: string, lineLength = 64) => {
  const body = Buffer.from(seed.repeat(40)).toString('base64');
  const lines = body.match(new RegExp(`.{1,${lineLength}}`, 'g'))!;
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
};

/** A kubeconfig of one cluster, as client-node loads it. */
function kubeConfig(cluster: { server: string; caData?: string; caFile?: string; skipTLSVerify?: boolean }): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', skipTLSVerify: false, ...cluster }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u', namespace: 'default' }],
    currentContext: 'x',
  });
  return kc;
}

let dir: string;
let db: TestDatabase;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'cluster-identity-'));
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('the certificate authority names the cluster, wherever the configuration holds it and however its PEM is laid out', async () => {
  const inCluster = 'https://10.96.0.1:443';
  const a = pem('cluster A');
  const idA = clusterId(kubeConfig({ server: inCluster, caData: Buffer.from(a).toString('base64') }));
  expect(idA).toMatch(/^[0-9a-f]{12}$/);
  // The same authority: through another address, as a file (a Pod's service account ca.crt), with other line
  // lengths and Windows line endings, and in a bundle beside another certificate in either order.
  const file = path.join(dir, 'ca.crt');
  await writeFile(file, pem('cluster A', 76).replace(/\n/g, '\r\n'));
  expect(clusterId(kubeConfig({ server: 'https://api.a.example:6443', caFile: file }))).toBe(idA);
  // Two clusters of one kind, one in-cluster address: told apart.
  expect(clusterId(kubeConfig({ server: inCluster, caData: Buffer.from(pem('cluster B')).toString('base64') }))).not.toBe(idA);
  const bundle = (first: string, second: string) => Buffer.from(first + second).toString('base64');
  expect(clusterId(kubeConfig({ server: inCluster, caData: bundle(a, pem('other')) }))).toBe(
    clusterId(kubeConfig({ server: inCluster, caData: bundle(pem('other'), a) })),
  );
  // No authority (plain HTTP, TLS not verified alone), or a file that cannot be read: nothing names the cluster.
  expect(clusterId(kubeConfig({ server: 'http://127.0.0.1:6443', skipTLSVerify: true }))).toBeUndefined();
  expect(clusterId(kubeConfig({ server: 'https://127.0.0.1:6443', caFile: path.join(dir, 'missing.crt') }))).toBeUndefined();

  const names = clusterNames(kubeConfig({ server: inCluster, caData: Buffer.from(a).toString('base64') }), 'serving');
  expect(names).toEqual({ node: `kubernetes/serving@${idA}`, formerNodes: ['kubernetes/serving'], pool: `kubernetes:${idA}/serving` });
  expect(poolNodes(names)).toEqual([`kubernetes/serving@${idA}`, 'kubernetes/serving']);
  // Unnamed, the names are the namespace's alone, as those of the versions before (the pool: by the server's address).
  expect(clusterNames(kubeConfig({ server: 'http://127.0.0.1:6443', skipTLSVerify: true }), 'serving')).toEqual({
    node: 'kubernetes/serving',
    formerNodes: [],
    pool: 'kubernetes:http://127.0.0.1:6443/serving',
  });
});

test("a pool's live replicas and GPUs, as the database counts them: its rows under either name, no other cluster's or namespace's", async () => {
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'cluster-identity');
  const endpointId = await createEndpointThrough(services, principal, projectId);
  const ours = { node: 'kubernetes/default@aaaaaaaaaaaa', formerNodes: ['kubernetes/default'] };
  const rows: [string, string, number][] = [
    ['rep_new', ours.node, 2],
    ['rep_former', 'kubernetes/default', 1],
    ['rep_other_cluster', 'kubernetes/default@bbbbbbbbbbbb', 4],
    ['rep_other_namespace', 'kubernetes/other@aaaaaaaaaaaa', 8],
  ];
  for (const [id, node, numGpu] of rows) {
    await insertReplica(db.sql, { id, endpointId, versionIndex: 1, runtime: 'kubernetes', node, gpuType: 'H100', numGpu });
    expect(await markReplica(db.sql, id, { state: 'READY', address: 'http://10.0.0.1:8000', locator: id })).toBe(true);
  }
  expect((await liveReplicaIdsOnNode(db.sql, poolNodes(ours))).sort()).toEqual(['rep_former', 'rep_new']);
  expect(await requestedGpus(db.sql, poolNodes(ours))).toEqual({ H100: 3 });
  expect(await requestedGpus(db.sql, poolNodes(ours), 'A100')).toEqual({});
});
