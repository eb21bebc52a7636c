/**
 * core/v1 Events written by the stand-in's own components (default-scheduler, kubelet), aggregated as client-go's
 * event recorder does: the same object, reason and message again bumps `count` and `lastTimestamp` of one Event.
 */
import { randomBytes } from 'node:crypto';
import { newUid, timestamp, type KubeObject } from './objects.js';
import type { ObjectStore } from './store.js';

export class EventRecorder {
  /** uid of the involved object → aggregation key (reason, message, component) → the Event's name */
  private readonly seen = new Map<string, Map<string, string>>();

  constructor(private readonly store: ObjectStore) {}

  record(
    involved: KubeObject,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
    component: 'default-scheduler' | 'kubelet',
    host?: string,
  ): void {
    const ns: string = involved.metadata.namespace ?? 'default';
    const key = `${reason}\u0000${message}\u0000${component}`;
    const now = timestamp();
    let seen = this.seen.get(involved.metadata.uid);
    if (!seen) this.seen.set(involved.metadata.uid, (seen = new Map()));
    const existing = seen.get(key);
    if (existing && this.store.get('events', ns, existing)) {
      this.store.update('events', ns, existing, (event) => {
        event.count = (event.count ?? 1) + 1;
        event.lastTimestamp = now;
      });
      return;
    }
    const name = `${involved.metadata.name}.${randomBytes(8).toString('hex')}`;
    seen.set(key, name);
    this.store.create('events', {
      kind: 'Event',
      apiVersion: 'v1',
      metadata: { name, namespace: ns, uid: newUid(), creationTimestamp: now },
      involvedObject: {
        kind: involved.kind ?? 'Pod',
        namespace: ns,
        name: involved.metadata.name,
        uid: involved.metadata.uid,
        apiVersion: 'v1',
        resourceVersion: involved.metadata.resourceVersion,
      },
      reason,
      message,
      source: host ? { component, host } : { component },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
      type,
      eventTime: null,
      reportingComponent: component,
      reportingInstance: host ?? '',
    });
  }

  /** Drops the aggregation keys of a deleted object. */
  forget(uid: string): void {
    this.seen.delete(uid);
  }
}
