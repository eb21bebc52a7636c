/**
 * The autoscaling decision, as a pure function: replicas follow the requests
 * in flight against max_batch_size, within [min, max]; scaling down waits for
 * the cooldown; with min = 0, an endpoint idle for the cooldown sleeps.
 */
export interface ScaleInput {
  minReplica: number;
  maxReplica: number;
  cooldownMs: number;
  maxBatchSize: number;
  /** Serving replicas now. */
  current: number;
  /** Requests generating or queued, over all replicas. */
  load: number;
  /** The last request, or when the endpoint started serving if it has had none since. */
  lastActivityAt: number;
  /** The last time replicas were added. */
  lastScaleUpAt: number;
  now: number;
}

export interface ScaleDecision {
  /** Replicas wanted now. */
  replicas: number;
  /** Whether the endpoint should go to sleep. */
  sleep: boolean;
}

/**
 * What one replica takes at once: max_batch_size, or fewer when its engine
 * reports that it decodes fewer sequences and queues the rest (the built-in
 * engine runs at most 256).
 */
export function replicaCapacity(maxBatchSize: number, healths: readonly ({ sequences?: number } | undefined)[]): number {
  return Math.min(maxBatchSize, ...healths.map((h) => h?.sequences ?? Infinity));
}

export function decideScale(input: ScaleInput): ScaleDecision {
  const { minReplica, maxReplica, cooldownMs, maxBatchSize, current, load, now } = input;
  const idleFor = now - input.lastActivityAt;
  if (minReplica === 0 && load === 0 && idleFor >= cooldownMs) return { replicas: 0, sleep: true };

  const demand = Math.ceil(load / Math.max(1, maxBatchSize));
  const wanted = Math.min(maxReplica, Math.max(demand, minReplica, 1));
  if (wanted >= current) return { replicas: wanted, sleep: false };
  // Fewer are needed: wait until the load has been low for the cooldown, and remove one at a time.
  const calm = idleFor >= cooldownMs || (load <= (current - 1) * maxBatchSize && now - input.lastScaleUpAt >= cooldownMs);
  return { replicas: calm ? current - 1 : current, sleep: false };
}
