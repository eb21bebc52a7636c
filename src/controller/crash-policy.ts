/**
 * What the controller does after a replica's engine dies, as a pure function:
 * like a pod's restart policy, a replacement starts after an exponential
 * back-off (1 s, 2 s, 4 s, … up to 30 s by default) counted from the last
 * death, and the endpoint goes FAILED only after `failures` deaths within
 * `windowMs` (5 within 10 minutes by default). A failure to start at all (a
 * bad model, no memory) is not a death: it fails the endpoint at once.
 */
export interface CrashPolicy {
  /** Deaths within the window that mark the endpoint FAILED. */
  failures: number;
  windowMs: number;
  /** The first replacement's delay; each further death in the window doubles it. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** A serving engine that answers no health check for this long (hung, stopped) is killed: a death like any other. */
  hangMs: number;
  /**
   * A replica left starting or draining by a gateway that stopped, whose liveness this runtime could not tell for
   * this long without a break (another machine's engine, a Pod cache that cannot sync), is given up: marked
   * STOPPED, so that the endpoint is no longer held waiting for it (a new replica is started in its place).
   */
  unknownMs: number;
}

export const DEFAULT_CRASH_POLICY: CrashPolicy = {
  failures: 5,
  windowMs: 10 * 60_000,
  backoffBaseMs: 1000,
  backoffMaxMs: 30_000,
  hangMs: 30_000,
  unknownMs: 5 * 60_000,
};

/** The replicas of an endpoint that died within the window: how many, and when the last one did. */
/**
 * The user's actions after which an endpoint's engines' deaths are counted anew (the causes of their status changes):
 * a restart is the user's answer to a crash loop, and an update or a rollback runs another version.
 */
export const CRASH_COUNT_RESETS = ['api:restart', 'api:wake', 'api:update', 'api:rollback'] as const;

export interface RecentDeaths {
  count: number;
  lastAt: number | null;
}

export type CrashDecision = { kind: 'fail' } | { kind: 'wait'; untilMs: number } | { kind: 'start' };

/** The back-off before the next replacement after `count` deaths in the window (0 for none); placements after outages wait the same way. */
export function restartDelayMs(policy: Pick<CrashPolicy, 'backoffBaseMs' | 'backoffMaxMs'>, count: number): number {
  if (count <= 0) return 0;
  return Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** Math.min(count - 1, 30));
}

export function decideAfterDeaths(policy: CrashPolicy, deaths: RecentDeaths, now: number): CrashDecision {
  if (deaths.count >= policy.failures) return { kind: 'fail' };
  if (deaths.lastAt === null) return { kind: 'start' };
  const untilMs = deaths.lastAt + restartDelayMs(policy, deaths.count);
  return now < untilMs ? { kind: 'wait', untilMs } : { kind: 'start' };
}
