/** What every benchmark returns, writes to bench/results/<name>.json, and BENCHMARKS.md summarizes. */
import type { Machine } from './env.js';

export interface Target {
  /** e.g. "added TTFT p99 at 64 streams" */
  what: string;
  /** e.g. "< 2 ms" */
  target: string;
  /** the measured value, formatted */
  value: string;
  /** null when it could not be measured */
  met: boolean | null;
  /** by how much it was missed, formatted (e.g. "4.1× the target") */
  miss?: string;
}

export interface BenchResult {
  name: string;
  title: string;
  /** One paragraph: what is compared with what, and how. */
  method: string;
  startedAt: string;
  durationS: number;
  machine: Machine;
  /** False when the run itself was broken (errors, dropped streams, lost versions): figures are not to be trusted. */
  valid: boolean;
  problems: string[];
  table: { columns: string[]; rows: (string | number)[][] };
  targets: Target[];
  notes: string[];
  /** The raw figures behind the table. */
  data: Record<string, unknown>;
}

export interface BenchContext {
  /** Write V8 CPU profiles of the gateway process under load (bench/results/profiles). */
  cpuProf: boolean;
}

export type BenchOutcome = Omit<BenchResult, 'name' | 'title' | 'startedAt' | 'durationS' | 'machine'>;

export interface Bench {
  name: string;
  title: string;
  run(context: BenchContext): Promise<BenchOutcome>;
}

/** A target of the form "value < limit" (or ≤, ≥): met, and by how much it was missed. */
export function target(what: string, value: number, op: '<' | '<=' | '>=' | '>' | '==', limit: number, unit = '', decimals = 2): Target {
  const shown = `${Number.isFinite(value) ? value.toFixed(decimals) : String(value)}${unit}`;
  if (!Number.isFinite(value)) return { what, target: `${op} ${limit}${unit}`, value: shown, met: null };
  const met =
    op === '<' ? value < limit : op === '<=' ? value <= limit : op === '>=' ? value >= limit : op === '>' ? value > limit : value === limit;
  const t: Target = { what, target: `${op.replace('<=', '≤').replace('>=', '≥')} ${limit}${unit}`, value: shown, met };
  if (!met) {
    if (op === '<' || op === '<=')
      t.miss =
        limit > 0
          ? `${(value / limit).toFixed(1)}× the limit (+${(value - limit).toFixed(decimals)}${unit})`
          : `+${(value - limit).toFixed(decimals)}${unit}`;
    else if (op === '>=' || op === '>')
      t.miss = `${(limit - value).toFixed(decimals)}${unit} short (${((value / limit) * 100).toFixed(0)}% of the target)`;
    else t.miss = `off by ${(value - limit).toFixed(decimals)}${unit}`;
  }
  return t;
}
