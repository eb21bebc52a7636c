/**
 * Which cluster a gateway's Kubernetes runtime places replicas in.
 *
 * A replica's row names its pool (`node`, `kubernetes/<namespace>`): a gateway follows the replicas of its own pool
 * and leaves those of another as "unknown" (never "gone": their pods are not in its cache to miss). The namespace
 * alone does not tell two clusters apart, and two installations on one PostgreSQL may well use the same namespace in
 * two clusters (two regions, each from the example overlay): each would take the other's replicas for its own, find
 * no pod, and replace them. Nor does the API server's address: inside a cluster it is the `kubernetes` Service's
 * ClusterIP, the same in every cluster of a kind (10.96.0.1 for kubeadm's), and one cluster may be reached at several.
 *
 * The cluster's certificate authority tells them apart (each cluster has its own), and is in every way a gateway
 * reaches its API server: the kubeconfig's, or the service account's `ca.crt` in a Pod. Its fingerprint is recorded
 * in a column of its own (`replicas.cluster`), not in `node`: gateways of earlier versions, during a rolling update
 * or after a rollback, compare `node` alone, and reap the pods of rows whose `node` is not theirs. A certificate
 * authority may also change (a rotation, a bundle): a replica whose pod this runtime's cache holds is its own whatever
 * its row says (KubernetesRuntime.elsewhere). Without a certificate authority (a plain-HTTP server,
 * `insecure-skip-tls-verify` alone) nothing names the cluster, and the pool's name alone tells, as before.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import type { ReplicaRef } from '../runtime.js';

/** Hex characters of the fingerprint kept: 48 bits, no two clusters of one installation alike. */
const ID_LENGTH = 12;

/** The certificates' DER bytes of a PEM bundle, in a fixed order (the bundle's order and layout aside); else the bytes. */
function certificates(pem: Buffer): Buffer {
  const blocks = [...pem.toString('latin1').matchAll(/-----BEGIN CERTIFICATE-----([^-]+)-----END CERTIFICATE-----/g)];
  if (blocks.length === 0) return pem;
  return Buffer.concat(blocks.map((m) => Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64')).sort(Buffer.compare));
}

/**
 * The current cluster's certificate authority (its PEM bytes) as client-node reads it (the file first, then the
 * inline data); undefined when the configuration names none, or its file cannot be read (client-node's calls then
 * fail and say why).
 */
function authority(kc: KubeConfig): Buffer | undefined {
  const cluster = kc.getCurrentCluster();
  if (cluster?.caFile) {
    try {
      return readFileSync(cluster.caFile);
    } catch {
      return undefined;
    }
  }
  return cluster?.caData ? Buffer.from(cluster.caData, 'base64') : undefined;
}

/**
 * The current cluster's name: 12 hex characters of the SHA-256 of its certificate authority's certificate (of a
 * bundle's certificates, in order of their bytes): the start of `openssl x509 -noout -fingerprint -sha256` of a
 * single certificate, without its colons. Undefined when the configuration names no certificate authority.
 */
export function clusterId(kc: KubeConfig): string | undefined {
  const ca = authority(kc);
  return ca && createHash('sha256').update(certificates(ca)).digest('hex').slice(0, ID_LENGTH);
}

/** Gateways of the same cluster and namespace adopt each other's replicas (Runtime.adoptablePool): its name. */
export function adoptablePool(kc: KubeConfig, namespace: string, cluster: string | undefined): string {
  return `kubernetes:${cluster ?? kc.getCurrentCluster()?.server ?? ''}/${namespace}`;
}

/** Replicas remembered as this cluster's despite their rows (see `PoolMembership.elsewhere`), at most. */
const SEEN_MAX = 10_000;

/** Which replicas' rows are another pool's: another namespace's, or another cluster's whose pod this cluster does not run. */
export class PoolMembership {
  /** Replicas recorded in another cluster whose pod this cluster's cache held: this cluster's, even once the pod is gone. */
  private readonly seen = new Set<string>();

  constructor(
    readonly node: string,
    readonly cluster: string | undefined,
  ) {}

  /**
   * Whether another pool's gateway placed the replica (its pod is not this cache's to miss). A row of this namespace
   * that names no cluster (an earlier version's, a gateway's without a certificate authority) is this pool's; one that
   * names another cluster is too once this cluster's cache has held its pod (`podHere`: a certificate authority
   * rotated since), and stays so when the pod goes (it is then gone, not unknown).
   */
  elsewhere(ref: Pick<ReplicaRef, 'replicaId' | 'node' | 'cluster'>, podHere: () => boolean): boolean {
    if (ref.node !== this.node) return true;
    if (!ref.cluster || !this.cluster || ref.cluster === this.cluster || this.seen.has(ref.replicaId)) return false;
    if (!podHere()) return true;
    if (this.seen.size >= SEEN_MAX) this.seen.clear();
    this.seen.add(ref.replicaId);
    return false;
  }
}
