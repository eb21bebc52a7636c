/**
 * Fixed latency buckets, the mergeable form in which per-minute roll-ups keep
 * time to first token, time per output token and queue wait: counts per
 * bucket add up across minutes and gateway processes, so percentiles over any
 * range come from the summed counts.
 *
 * Bucket i (0 ≤ i < BUCKET_COUNT - 1) counts values up to BUCKET_BOUNDS_MS[i]
 * and above the previous bound; the last one counts everything larger. The
 * bounds grow by a quarter each (0.5 ms to about 10 minutes), so an estimate
 * is within 25 % of the true value.
 */

const GROWTH = 1.25;
const FIRST_BOUND_MS = 0.5;
const BOUNDED = 64;

/** Upper bounds in milliseconds of every bucket but the last (open) one. */
export const BUCKET_BOUNDS_MS: readonly number[] = Array.from({ length: BOUNDED }, (_, i) => FIRST_BOUND_MS * GROWTH ** i);

export const BUCKET_COUNT = BOUNDED + 1;

export function bucketOf(ms: number): number {
  if (!(ms > FIRST_BOUND_MS)) return 0;
  const i = Math.ceil(Math.log(ms / FIRST_BOUND_MS) / Math.log(GROWTH) - 1e-9);
  return Math.min(i, BOUNDED);
}

export function emptyHistogram(): number[] {
  return new Array<number>(BUCKET_COUNT).fill(0);
}

/** Adds b's counts into a (missing entries count 0). */
export function mergeInto(a: number[], b: readonly number[]): number[] {
  for (let i = 0; i < BUCKET_COUNT; i++) a[i] = (a[i] ?? 0) + (b[i] ?? 0);
  return a;
}

/**
 * The q-quantile (0 < q ≤ 1) of the counted values, interpolated within its
 * bucket and never above `maxMs` (the largest value seen); null when nothing
 * was counted.
 */
export function quantile(counts: readonly number[], q: number, maxMs?: number | null): number | null {
  const total = counts.reduce((sum, c) => sum + c, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < BUCKET_COUNT; i++) {
    const c = counts[i] ?? 0;
    if (c === 0) continue;
    if (seen + c >= rank) {
      const lower = i === 0 ? 0 : BUCKET_BOUNDS_MS[i - 1]!;
      const upper = i < BOUNDED ? BUCKET_BOUNDS_MS[i]! : (maxMs ?? lower);
      const value = lower + ((rank - seen) / c) * (upper - lower);
      return maxMs === undefined || maxMs === null ? value : Math.min(value, maxMs);
    }
    seen += c;
  }
  return maxMs ?? null;
}
