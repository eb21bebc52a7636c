/**
 * The autoscaling decision, as a pure function: replicas follow the demand
 * (the requests on the engines plus those waiting in every gateway process's
 * admission queue) against max_batch_size, within [min, max]; scaling down
 * waits for the cooldown; with min = 0, an endpoint idle for the cooldown
 * sleeps.
 */
export interface ScaleInput {
  minReplica: number;
  maxReplica: number;
  cooldownMs: number;
  maxBatchSize: number;
  /** Serving replicas now. */
  current: number;
  /** Requests generating or queued, over all replicas (the engines' own count). */
  load: number;
  /** Requests waiting in the gateways' admission queues, over every gateway process. */
  waiting: number;
  /** The last request, or when the endpoint started serving if it has had none since. */
  lastActivityAt: number;
  /** The last time replicas were added. */
  lastScaleUpAt: number;
  /** The last time the demand needed every serving replica (more than one fewer could take). @default 0 */
  lastBusyAt?: number;
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
  const { minReplica, maxReplica, cooldownMs, maxBatchSize, current, now } = input;
  const demand = input.load + input.waiting;
  const idleFor = now - input.lastActivityAt;
  if (minReplica === 0 && demand === 0 && idleFor >= cooldownMs) return { replicas: 0, sleep: true };

  // More than the policy allows (an update lowered maxReplica): down to it at once, not one per cooldown.
  if (current > Math.max(maxReplica, 1)) return { replicas: Math.max(maxReplica, 1), sleep: false };

  const needed = Math.ceil(demand / Math.max(1, maxBatchSize));
  const wanted = Math.min(maxReplica, Math.max(needed, minReplica, 1));
  if (wanted >= current) return { replicas: wanted, sleep: false };
  // Fewer are needed: wait until the demand has been low for the cooldown, and remove one at a time.
  const lowFor = now - Math.max(input.lastScaleUpAt, input.lastBusyAt ?? 0);
  const calm = (demand === 0 && idleFor >= cooldownMs) || (demand <= (current - 1) * maxBatchSize && lowFor >= cooldownMs);
  return { replicas: calm ? current - 1 : current, sleep: false };
}
