/**
 * The admission gates of the endpoints this process routes to, one per
 * endpoint (see admission.ts), each sized from the serving view: the ready
 * replicas' slots, the slots of replicas being added, and the endpoint's
 * slots at its largest.
 */
import { EndpointGate, type AdmissionLimits } from './admission.js';
import type { ServingView } from './serving-view.js';
import type { DrainWaits } from './drain-waits.js';

export class EndpointGates {
  private readonly gates = new Map<string, EndpointGate>();

  /** `onQueueChange` is called with an endpoint's id whenever its queue grows or shrinks. */
  constructor(
    private readonly view: ServingView,
    private readonly limits: AdmissionLimits,
    private readonly onQueueChange: (endpointId: string) => void,
    /** The waits its gateway's drain answers (drain-waits.ts). */
    private readonly drain?: DrainWaits,
  ) {}

  /** The endpoint's gate, if one was made. */
  get(endpointId: string): EndpointGate | undefined {
    return this.gates.get(endpointId);
  }

  /** The endpoints with requests waiting for a slot. */
  waiting(): string[] {
    return [...this.gates.entries()].filter(([, gate]) => gate.queued > 0).map(([id]) => id);
  }

  /** The endpoint's gate, made on first use. */
  for(endpointId: string): EndpointGate {
    let gate = this.gates.get(endpointId);
    if (!gate) {
      gate = new EndpointGate(
        () => {
          const entry = this.view.cachedReplicas(endpointId);
          return entry ? entry.replicas.length * entry.maxBatchSize : 0;
        },
        this.limits,
        // Replicas being added (the controller wants more than are ready): their slots are counted as coming.
        () => {
          const entry = this.view.cachedReplicas(endpointId);
          const desired = this.view.cachedEndpoint(endpointId)?.desiredReplicaCnt ?? 0;
          return entry ? Math.max(0, desired - entry.replicas.length) * entry.maxBatchSize : 0;
        },
        () => this.onQueueChange(endpointId),
        // The endpoint at its largest: before any hold is measured, one round of its slots may queue.
        () => {
          const spec = this.view.cachedEndpoint(endpointId)?.current.spec;
          return spec ? spec.autoscaling.maxReplica * spec.advanced.maxBatchSize : 0;
        },
        this.drain,
      );
      this.gates.set(endpointId, gate);
    }
    return gate;
  }
}
