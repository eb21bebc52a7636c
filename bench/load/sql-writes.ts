/**
 * The database floor for the writes benchmark (a child process): the minimal
 * transaction behind a new version — lock the head row, insert the version
 * row, bump the head, append an event, read the head back — on scratch
 * tables, with the same concurrency and spread as the gateway run.
 */
import postgres from 'postgres';
import { runClosedLoop, type Attempt, type ClosedLoopConfig, type ClosedLoopResult } from '../lib/closed-loop.js';
import { childMain } from '../lib/env.js';

export interface SqlWritesConfig extends ClosedLoopConfig {
  url: string;
  /** Scratch head-row ids to spread over (one for the single-endpoint case). */
  heads: string[];
}

export type SqlWritesResult = ClosedLoopResult;

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
  const attempt = async (): Promise<Attempt> => {
    const started = performance.now();
    try {
      await once(config.heads[next++ % config.heads.length]!);
      return { ok: true, ms: performance.now() - started };
    } catch (error) {
      return { ok: false, ms: performance.now() - started, detail: String(error) };
    }
  };
  const result = await runClosedLoop(config, attempt);
  await sql.end({ timeout: 2 });
  return result;
});
