/**
 * A closed-loop load phase, shared by the load generators: `concurrency`
 * workers each run one operation after another until the phase's time (or
 * request budget) is spent. A warm-up phase runs first and is reported apart.
 */

/** One operation's outcome: its latency, and why it failed. */
export interface Attempt {
  ok: boolean;
  ms: number;
  detail?: string;
}

export interface ClosedLoopConfig {
  concurrency: number;
  warmupMs: number;
  durationMs: number;
  /** Stop the measured phase after this many operations (0 or absent: no limit). */
  maxRequests?: number;
}

export interface ClosedLoopResult {
  ok: number;
  /** Failures of the warm-up and the measured phase. */
  errors: number;
  /** Up to 5 failure details from each phase. */
  errorSamples: string[];
  /** Latencies of the measured phase's successes, ms. */
  latencyMs: Float64Array;
  windowMs: number;
  warmup: { ok: number; errors: number };
}

async function phase(concurrency: number, durationMs: number, maxRequests: number, attempt: () => Promise<Attempt>) {
  const end = performance.now() + durationMs;
  const latencies: number[] = [];
  const samples: string[] = [];
  let ok = 0;
  let errors = 0;
  let sent = 0;
  const worker = async () => {
    while (performance.now() < end && (maxRequests === 0 || sent < maxRequests)) {
      sent++;
      const r = await attempt();
      if (r.ok) {
        ok++;
        latencies.push(r.ms);
      } else {
        errors++;
        if (samples.length < 5 && r.detail) samples.push(r.detail);
      }
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ok, errors, latencies, samples, windowMs: performance.now() - start };
}

/** The warm-up, then the measured phase. */
export async function runClosedLoop(config: ClosedLoopConfig, attempt: () => Promise<Attempt>): Promise<ClosedLoopResult> {
  const warm = await phase(config.concurrency, config.warmupMs, 0, attempt);
  const measured = await phase(config.concurrency, config.durationMs, config.maxRequests ?? 0, attempt);
  return {
    ok: measured.ok,
    errors: measured.errors + warm.errors,
    errorSamples: [...warm.samples, ...measured.samples],
    latencyMs: Float64Array.from(measured.latencies),
    windowMs: measured.windowMs,
    warmup: { ok: warm.ok, errors: warm.errors },
  };
}
