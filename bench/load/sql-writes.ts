/**
 * The database floor for the writes benchmark (a child process): the minimal
 * transaction behind a new version — lock the head row, insert the version
 * row, bump the head, append an event, read the head back — on scratch
 * tables, with the same concurrency and spread as the gateway run.
 */
import postgres from 'postgres';
import { childMain } from '../lib/env.js';

export interface SqlWritesConfig {
  url: string;
  /** Scratch head-row ids to spread over (one for the single-endpoint case). */
  heads: string[];
  concurrency: number;
  warmupMs: number;
  durationMs: number;
}

export interface SqlWritesResult {
  ok: number;
  errors: number;
  errorSamples: string[];
  latencyMs: Float64Array;
  windowMs: number;
}

childMain<SqlWritesConfig, SqlWritesResult>(async (config) => {
  const sql = postgres(config.url, { max: 10, onnotice: () => {} });
  let next = 0;
  const once = (id: string) =>
    sql.begin(async (tx) => {
      const [head] = await tx<{ current: number }[]>`SELECT current FROM bench_heads WHERE id = ${id} FOR UPDATE`;
      const index = head!.current + 1;
      await tx`INSERT INTO bench_versions (head_id, version_index, spec, comment) VALUES (${id}, ${index}, ${tx.json({ name: 'x', maxBatchSize: 8 })}, 'bench')`;
      await tx`UPDATE bench_heads SET current = ${index}, updated_at = now() WHERE id = ${id}`;
      await tx`INSERT INTO bench_events (head_id, type, version_index) VALUES (${id}, 'VERSION_ADDED', ${index})`;
      await tx`SELECT h.id, h.current, v.spec FROM bench_heads h JOIN bench_versions v ON v.head_id = h.id AND v.version_index = h.current WHERE h.id = ${id}`;
    });
  const phase = async (durationMs: number) => {
    const end = performance.now() + durationMs;
    const latencies: number[] = [];
    const samples: string[] = [];
    let ok = 0;
    let errors = 0;
    const worker = async () => {
      while (performance.now() < end) {
        const started = performance.now();
        try {
          await once(config.heads[next++ % config.heads.length]!);
          ok++;
          latencies.push(performance.now() - started);
        } catch (error) {
          errors++;
          if (samples.length < 5) samples.push(String(error));
        }
      }
    };
    const start = performance.now();
    await Promise.all(Array.from({ length: config.concurrency }, worker));
    return { ok, errors, latencies, samples, windowMs: performance.now() - start };
  };
  const warm = await phase(config.warmupMs);
  const measured = await phase(config.durationMs);
  await sql.end({ timeout: 2 });
  return {
    ok: measured.ok,
    errors: measured.errors + warm.errors,
    errorSamples: [...warm.samples, ...measured.samples],
    latencyMs: Float64Array.from(measured.latencies),
    windowMs: measured.windowMs,
  };
});
