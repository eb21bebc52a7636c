/**
 * How many CPU replicas this machine can run, and with how many threads each.
 *
 * llama.cpp's worker threads spin while they wait for each other: with more
 * threads than free cores, every decode step becomes a scheduling storm (on a
 * 2-vCPU machine the tiny model decoded at 4 tokens/s with llama.cpp's default
 * of 4 threads, and at 3,500 with 1). So the budget counts the cores the
 * process may really use (the CPU affinity mask and a cgroup CPU quota, not
 * the host's core count), keeps one for the gateway and PostgreSQL when it
 * shares out threads, and never gives the replicas more threads in total
 * than the cores.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';

/** Most replicas offered by default: past this a core is worth more as a thread than as a replica. */
const DEFAULT_MAX_SLOTS = 4;

/** A cgroup v2 `cpu.max` ("max 100000" or "200000 100000") as cores, or undefined when unlimited. */
export function parseCpuMax(text: string): number | undefined {
  const [quota, period] = text.trim().split(/\s+/);
  if (quota === undefined || quota === 'max') return undefined;
  const q = Number(quota);
  const p = Number(period ?? 100_000);
  return q > 0 && p > 0 ? q / p : undefined;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Cores allowed by a cgroup quota (v2, then v1), or undefined when none is set. */
function cgroupQuotaCores(): number | undefined {
  const v2 = readText('/sys/fs/cgroup/cpu.max');
  if (v2 !== undefined) return parseCpuMax(v2);
  const quota = Number(readText('/sys/fs/cgroup/cpu/cpu.cfs_quota_us') ?? -1);
  const period = Number(readText('/sys/fs/cgroup/cpu/cpu.cfs_period_us') ?? 0);
  return quota > 0 && period > 0 ? quota / period : undefined;
}

/** Whole cores this process may use: its affinity mask, capped by a cgroup quota (rounded down, at least 1). */
export function usableCores(): number {
  const affinity = os.availableParallelism();
  const quota = cgroupQuotaCores();
  return Math.max(1, Math.floor(quota === undefined ? affinity : Math.min(affinity, quota)));
}

export interface CpuBudget {
  /** Cores counted. */
  cores: number;
  /** CPU replicas offered per kind (CPU_SLOTS, or the default). */
  slots: number;
  /** Threads per built-in engine (ENGINE_THREADS, or the default). */
  threads: number;
  /** Set when an explicit setting asks for more engine threads in total than there are cores. */
  warning?: string;
}

/**
 * The default: one slot per core, at most 4; the cores but one (kept for the
 * gateway, PostgreSQL and the engines' own HTTP work) shared out among the
 * slots as threads, at least 1 each. On 2 cores: 2 replicas of 1 thread; on
 * 8: 4 of 1; on 16: 4 of 3; an engine alone on 16 cores: 15. Measured on 2
 * vCPUs (`npm run bench -- threads`): 1 thread beat 2 for one replica alone,
 * on the tiny model (36x) and on a 512-dim, 8-layer one (1.8x), and 2
 * replicas of 1 thread beat 1 replica. Explicit settings win, with a warning
 * when they oversubscribe.
 */
export function cpuBudget(options: { cores?: number; slots?: number; threads?: number } = {}): CpuBudget {
  const cores = options.cores ?? usableCores();
  const slots = options.slots ?? Math.min(DEFAULT_MAX_SLOTS, cores);
  const threads = options.threads ?? Math.max(1, Math.floor((cores - 1) / Math.max(1, slots)));
  const budget: CpuBudget = { cores, slots, threads };
  if (slots * threads > cores) {
    budget.warning =
      `${slots} CPU replicas x ${threads} engine threads exceed the ${cores} cores: ` +
      `llama.cpp's threads spin-wait, so an oversubscribed machine decodes many times slower. Lower CPU_SLOTS or ENGINE_THREADS.`;
  }
  return budget;
}
