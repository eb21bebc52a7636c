/** Small statistics and formatting helpers shared by the benchmarks. */

/** The q-quantile (0..1) of `values`, nearest-rank on a sorted copy; NaN when empty. */
export function percentile(values: ArrayLike<number>, q: number): number {
  const n = values.length;
  if (n === 0) return Number.NaN;
  const sorted = Float64Array.from(values as ArrayLike<number>).sort();
  const rank = Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
  return sorted[rank]!;
}

/** Several quantiles at once, sorting once. */
export function quantiles(values: ArrayLike<number>, qs: readonly number[]): number[] {
  const n = values.length;
  if (n === 0) return qs.map(() => Number.NaN);
  const sorted = Float64Array.from(values as ArrayLike<number>).sort();
  return qs.map((q) => sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!);
}

export function mean(values: ArrayLike<number>): number {
  if (values.length === 0) return Number.NaN;
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]!;
  return sum / values.length;
}

export function median(values: ArrayLike<number>): number {
  return percentile(values, 0.5);
}

/** Concatenates typed or plain number arrays. */
export function concat(parts: ArrayLike<number>[]): Float64Array {
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Float64Array(total);
  let offset = 0;
  for (const part of parts) {
    out.set(part as ArrayLike<number>, offset);
    offset += part.length;
  }
  return out;
}

/** A number for a table: fixed decimals, `–` for NaN/undefined. */
export function fmt(value: number | undefined | null, decimals = 2): string {
  if (value === undefined || value === null || Number.isNaN(value)) return '–';
  if (!Number.isFinite(value)) return String(value);
  return value.toFixed(decimals);
}

/** Rounds for JSON output (keeps files readable). */
export function round(value: number, decimals = 3): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** decimals;
  return Math.round(value * f) / f;
}

/** A plain-text table with aligned columns (also valid Markdown). */
export function markdownTable(columns: string[], rows: (string | number)[][]): string {
  const cells = [columns, ...rows.map((r) => r.map(String))];
  const widths = columns.map((_, i) => Math.max(3, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(cells[0]!), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...cells.slice(1).map(line)].join('\n');
}
