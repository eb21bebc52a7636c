/**
 * Pods whose create may have happened though the call failed: the API server committed the pod and its answer was
 * lost (a connection reset, a 504 while etcd was slow, a 500 "etcdserver: request timed out"). The start is then an
 * outage (its replica stopped, a later pass starts another under a new name), so such a pod would run, holding its
 * GPUs, with no replica row: each is deleted now, and again whenever the pod watch shows it (a create committed after
 * the first delete found nothing, or a delete that met the outage too), until the watch shows it gone or ten
 * minutes have passed. A gateway that restarts meanwhile reaps it with the other orphans (a pod with no live row).
 */
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { isStatus } from './endpoint-secrets.js';

/** How long a failed create's pod is looked out for: far longer than any API server's request timeout. */
const WATCH_FOR_MS = 10 * 60_000;

export class UncertainCreates {
  /** Pod name → when its create failed. */
  private readonly names = new Map<string, number>();
  private readonly deleting = new Set<string>();

  constructor(
    private readonly api: CoreV1Api,
    private readonly namespace: string,
    private readonly log: (message: string, error?: unknown) => void,
  ) {}

  /** The create of `name` failed in a way that does not say whether the pod exists: it is deleted if it does. */
  add(name: string): void {
    const now = Date.now();
    for (const [old, since] of this.names) if (now - since > WATCH_FOR_MS) this.names.delete(old);
    this.names.set(name, now);
    this.delete(name);
  }

  /** A pod the watch showed (`verb`): one of ours that should not exist is deleted; one gone is no longer looked out for. */
  seen(pod: V1Pod, verb: 'add' | 'update' | 'delete'): void {
    const name = pod.metadata?.name ?? '';
    const since = this.names.get(name);
    if (since === undefined) return;
    if (Date.now() - since > WATCH_FOR_MS) return void this.names.delete(name);
    if (verb === 'delete') this.names.delete(name);
    else if (!pod.metadata?.deletionTimestamp) this.delete(name);
  }

  private delete(name: string): void {
    if (this.deleting.has(name)) return;
    this.deleting.add(name);
    this.api
      .deleteNamespacedPod({ name, namespace: this.namespace, gracePeriodSeconds: 1 })
      .catch((error: unknown) => {
        // Not there (yet): the watch brings it if it comes. Any other failure: the watch brings it when the API is back.
        if (!isStatus(error, 404)) this.log(`deleting the pod ${name}, whose create failed, failed`, error);
      })
      .finally(() => this.deleting.delete(name));
  }
}
