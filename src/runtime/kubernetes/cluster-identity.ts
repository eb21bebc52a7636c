/**
 * Which cluster a gateway's Kubernetes runtime places replicas in, as the names its replicas' rows and its pool carry.
 *
 * A replica's row names its pool (`node`): a gateway follows the replicas of its own pool and leaves those of another
 * as "unknown" (never "gone": their pods are not in its cache to miss). The namespace alone does not tell two clusters
 * apart, and two installations on one PostgreSQL may well use the same namespace in two clusters (two regions, each
 * from the example overlay): each would then take the other's replicas for its own, find no pod, and replace them.
 * Nor does the API server's address: inside a cluster it is the `kubernetes` Service's ClusterIP, the same in every
 * cluster of a kind (10.96.0.1 for kubeadm's), and one cluster may be reached at several. The cluster's certificate
 * authority tells them apart (each cluster has its own), and is in every way a gateway reaches its API server (the
 * kubeconfig's, or the service account's `ca.crt` in a Pod). Without one (a plain-HTTP server,
 * `insecure-skip-tls-verify` alone) nothing tells the cluster: the names are the namespace's alone, as before.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';

/** Hex characters of the fingerprint kept in names: 48 bits, no two clusters of one installation alike. */
const ID_LENGTH = 12;

/** The certificates' DER bodies of a PEM bundle (whitespace and line endings aside), or the bytes as they are. */
function certificateBodies(pem: Buffer): Buffer {
  const bodies = [...pem.toString('latin1').matchAll(/-----BEGIN CERTIFICATE-----([^-]+)-----END CERTIFICATE-----/g)].map((m) =>
    m[1]!.replace(/\s+/g, ''),
  );
  return bodies.length > 0 ? Buffer.from(bodies.sort().join('\n')) : pem;
}

/** The current cluster's certificate authority (its PEM bytes), or undefined when the configuration names none. */
function authority(kc: KubeConfig): Buffer | undefined {
  const cluster = kc.getCurrentCluster();
  if (cluster?.caData) return Buffer.from(cluster.caData, 'base64');
  if (cluster?.caFile) {
    try {
      return readFileSync(cluster.caFile);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** A short, stable fingerprint of the current cluster's certificate authority; undefined when it names none. */
export function clusterId(kc: KubeConfig): string | undefined {
  const ca = authority(kc);
  return ca && createHash('sha256').update(certificateBodies(ca)).digest('hex').slice(0, ID_LENGTH);
}

/** The names a runtime of this cluster and namespace gives its replicas' rows and its pool. */
export interface ClusterNames {
  /** Written in each new replica's row (`node`): `kubernetes/<namespace>@<cluster>` (without a cluster, `kubernetes/<namespace>`). */
  node: string;
  /**
   * Rows of the versions before the cluster was named (`kubernetes/<namespace>`): still this runtime's, as they were
   * (their replicas are adopted, not replaced), until they are replaced in turn.
   */
  formerNodes: readonly string[];
  /** Gateways of the same cluster and namespace adopt each other's replicas (Runtime.adoptablePool). */
  pool: string;
}

export function clusterNames(kc: KubeConfig, namespace: string): ClusterNames {
  const id = clusterId(kc);
  const unnamed = `kubernetes/${namespace}`;
  if (id === undefined) return { node: unnamed, formerNodes: [], pool: `kubernetes:${kc.getCurrentCluster()?.server ?? ''}/${namespace}` };
  return { node: `${unnamed}@${id}`, formerNodes: [unnamed], pool: `kubernetes:${id}/${namespace}` };
}
