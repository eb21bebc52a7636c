/**
 * The cluster a Kubernetes runtime names (src/runtime/kubernetes/cluster-identity.ts): its certificate authority's
 * fingerprint, as `openssl x509 -fingerprint -sha256` starts (the API server's address inside a cluster is the same in
 * every cluster of a kind), none without one; the pool it shares with the gateways of its cluster and namespace; and
 * the replicas' rows, which record it beside their pool (`node`), and the GPUs a pool's rows request, which leave out
 * another cluster's.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createHash } from 'node:crypto';
import { adoptablePool, clusterId, PoolMembership } from '../../src/runtime/kubernetes/cluster-identity.js';
import { createServices } from '../../src/services/index.js';
import { claimReplicas, insertReplica, liveReplicas, markReplica, requestedGpus } from '../../src/storage/replicas-repository.js';
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
  const base64 = (text: string) => Buffer.from(text).toString('base64');
  const idA = clusterId(kubeConfig({ server: inCluster, caData: base64(a) }));
  // The certificate's SHA-256 (of its DER bytes), as openssl prints it without colons: its first 12 characters.
  const der = Buffer.from(a.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
  expect(idA).toBe(createHash('sha256').update(der).digest('hex').slice(0, 12));
  // The same authority: through another address, as a file (a Pod's service account ca.crt), with other line
  // lengths and Windows line endings, and in a bundle beside another certificate in either order.
  const file = path.join(dir, 'ca.crt');
  await writeFile(file, pem('cluster A', 76).replace(/\n/g, '\r\n'));
  expect(clusterId(kubeConfig({ server: 'https://api.a.example:6443', caFile: file }))).toBe(idA);
  // A file and inline data both: the file, as client-node trusts it.
  expect(clusterId(kubeConfig({ server: inCluster, caFile: file, caData: base64(pem('cluster B')) }))).toBe(idA);
  // Two clusters of one kind, one in-cluster address: told apart.
  expect(clusterId(kubeConfig({ server: inCluster, caData: base64(pem('cluster B')) }))).not.toBe(idA);
  expect(clusterId(kubeConfig({ server: inCluster, caData: base64(a + pem('other')) }))).toBe(
    clusterId(kubeConfig({ server: inCluster, caData: base64(pem('other') + a) })),
  );
  // No authority (plain HTTP, TLS not verified alone), or a file that cannot be read: nothing names the cluster.
  const plain = kubeConfig({ server: 'http://127.0.0.1:6443', skipTLSVerify: true });
  expect(clusterId(plain)).toBeUndefined();
  expect(clusterId(kubeConfig({ server: 'https://127.0.0.1:6443', caFile: path.join(dir, 'missing.crt') }))).toBeUndefined();

  // The pool: the cluster and the namespace; without a cluster, the server's address (as before clusters were named).
  expect(adoptablePool(plain, 'serving', idA)).toBe(`kubernetes:${idA}/serving`);
  expect(adoptablePool(plain, 'serving', undefined)).toBe('kubernetes:http://127.0.0.1:6443/serving');
});

test("which replicas' rows are another pool's: another namespace's, another cluster's unless this cluster runs its pod", () => {
  const ours = new PoolMembership('kubernetes/default', 'aaaaaaaaaaaa');
  const row = (replicaId: string, node: string, cluster?: string) => ({ replicaId, node, ...(cluster ? { cluster } : {}) });
  const noPod = () => false;
  expect(ours.elsewhere(row('r1', 'kubernetes/other', 'aaaaaaaaaaaa'), () => true)).toBe(true);
  expect(ours.elsewhere(row('r2', 'kubernetes/default', 'aaaaaaaaaaaa'), noPod)).toBe(false);
  // No cluster named (an earlier version's row): this pool's.
  expect(ours.elsewhere(row('r3', 'kubernetes/default'), noPod)).toBe(false);
  expect(ours.elsewhere(row('r4', 'kubernetes/default', 'bbbbbbbbbbbb'), noPod)).toBe(true);
  // Another cluster's by its row, but its pod runs here (the authority rotated): this pool's, then even without it.
  expect(ours.elsewhere(row('r5', 'kubernetes/default', 'bbbbbbbbbbbb'), () => true)).toBe(false);
  expect(ours.elsewhere(row('r5', 'kubernetes/default', 'bbbbbbbbbbbb'), noPod)).toBe(false);
  expect(ours.elsewhere(row('r4', 'kubernetes/default', 'bbbbbbbbbbbb'), noPod)).toBe(true);
  // A runtime that names no cluster: the namespace alone tells.
  const unnamed = new PoolMembership('kubernetes/default', undefined);
  expect(unnamed.elsewhere(row('r6', 'kubernetes/default', 'bbbbbbbbbbbb'), noPod)).toBe(false);
  expect(unnamed.elsewhere(row('r7', 'kubernetes/other'), noPod)).toBe(true);
});

test("a replica's row records its cluster beside its pool; a pool's GPUs leave out another cluster's rows of the same name", async () => {
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'cluster-identity');
  const endpointId = await createEndpointThrough(services, principal, projectId);
  const node = 'kubernetes/default';
  const owner = 'gw-cluster-identity';
  await db.sql`INSERT INTO endpoint_leases (endpoint_id, owner, expires_at) VALUES (${endpointId}, ${owner}, now() + interval '1 hour')`;
  await db.sql`UPDATE endpoints SET desired_state = 'RUNNING' WHERE id = ${endpointId}`;
  const replica = { endpointId, versionIndex: 1, runtime: 'kubernetes', node, gpuType: 'H100', numGpu: 2 } as const;
  expect(await claimReplicas(db.sql, owner, { ...replica, cluster: 'aaaaaaaaaaaa' }, ['rep_ours'])).toEqual(['rep_ours']);
  await insertReplica(db.sql, { ...replica, id: 'rep_earlier', numGpu: 1 });
  await insertReplica(db.sql, { ...replica, id: 'rep_other_cluster', cluster: 'bbbbbbbbbbbb', numGpu: 4 });
  await insertReplica(db.sql, { ...replica, id: 'rep_other_namespace', node: 'kubernetes/other', cluster: 'aaaaaaaaaaaa', numGpu: 8 });
  for (const id of ['rep_ours', 'rep_earlier', 'rep_other_cluster', 'rep_other_namespace'])
    expect(await markReplica(db.sql, id, { state: 'READY', address: 'http://10.0.0.1:8000', locator: id })).toBe(true);
  const clusters = Object.fromEntries((await liveReplicas(db.sql, endpointId)).map((r) => [r.id, r.cluster]));
  expect(clusters).toEqual({
    rep_ours: 'aaaaaaaaaaaa',
    rep_earlier: null,
    rep_other_cluster: 'bbbbbbbbbbbb',
    rep_other_namespace: 'aaaaaaaaaaaa',
  });
  // This cluster's and those no cluster names (an earlier version's, one without a certificate authority).
  expect(await requestedGpus(db.sql, node, undefined, 'aaaaaaaaaaaa')).toEqual({ H100: 3 });
  expect(await requestedGpus(db.sql, node, 'H100', 'bbbbbbbbbbbb')).toEqual({ H100: 5 });
  // A runtime that names none: the pool's name alone.
  expect(await requestedGpus(db.sql, node)).toEqual({ H100: 7 });
});
