/**
 * Writes: updates per second through `PUT /dedicated/beta/endpoint/{id}`
 * (each appends one version) on one endpoint — every writer contends for its
 * row lock — and spread over many, with latency percentiles; then every
 * endpoint's versions are checked: consecutive from 0, none lost, none
 * duplicated, and each acknowledged index returned exactly once.
 *
 * The baseline is the database floor: the minimal transaction a new version
 * needs (lock the head row, insert the version, bump the head, append an
 * event, read back), run on scratch tables of the same PostgreSQL by a child
 * process at the same concurrency and spread.
 */
import {
  ADMIN_KEY,
  defaultProject,
  gatewayEnv,
  runChild,
  startDatabase,
  startGatewayProcess,
  startHub,
  tempDir,
  TINY_REPO,
} from './lib/env.js';
import { createEndpoint, H100_X1 } from './lib/endpoints.js';
import { concat, fmt, quantiles, round } from './lib/stats.js';
import { target, type Bench, type BenchContext, type BenchOutcome } from './lib/result.js';
import type { HttpLoadConfig, HttpLoadResult } from './load/http-client.js';
import type { SqlWritesConfig, SqlWritesResult } from './load/sql-writes.js';

const ROUND_MS = Number(process.env.BENCH_WRITES_ROUND_MS ?? 4000);
const CONCURRENCY = Number(process.env.BENCH_WRITES_CONCURRENCY ?? 16);
const SPREAD = 50;

type Case = 'one' | 'spread';

async function run(context: BenchContext): Promise<BenchOutcome> {
  const problems: string[] = [];
  const db = await startDatabase();
  const hub = await startHub();
  const dataDir = await tempDir('writes');
  // No capacity: endpoints wait in REQUESTING_VIRTUAL_MACHINE, so an update only appends a version (the controller still runs its passes).
  const gateway = await startGatewayProcess(
    gatewayEnv(dataDir, db.url, hub.url, { CPU_SLOTS: '0', CONTROLLER_INTERVAL_MS: '500' }),
    context.cpuProf ? { cpuProf: 'writes-gateway' } : {},
  );
  const { projectId } = await defaultProject(gateway.url);
  const ids: string[] = [];
  for (let i = 0; i <= SPREAD; i++) {
    ids.push(
      await createEndpoint(gateway.url, { projectId, name: `write-${i}`, instanceOptionId: H100_X1, hfModelRepo: TINY_REPO, advanced: {} }),
    );
  }
  const single = ids[0]!;
  const spread = ids.slice(1);

  await db.sql`CREATE TABLE bench_heads (id text PRIMARY KEY, current integer NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`;
  await db.sql`CREATE TABLE bench_versions (head_id text NOT NULL REFERENCES bench_heads (id), version_index integer NOT NULL, spec jsonb NOT NULL, comment text, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (head_id, version_index))`;
  await db.sql`CREATE TABLE bench_events (id bigserial PRIMARY KEY, head_id text NOT NULL, type text NOT NULL, version_index integer, created_at timestamptz NOT NULL DEFAULT now())`;
  await db.sql`INSERT INTO bench_heads (id, current) SELECT 'h' || g, 0 FROM generate_series(0, ${SPREAD}) g`;

  const acknowledged = new Map<string, number[]>();
  const results: Record<Case, { gateway?: HttpLoadResult; floor?: SqlWritesResult }> = { one: {}, spread: {} };
  for (const c of ['one', 'spread'] as Case[]) {
    const targetIds = c === 'one' ? [single] : spread;
    const floor = await runChild<SqlWritesResult>(
      'load/sql-writes.ts',
      {
        url: db.url,
        heads: c === 'one' ? ['h0'] : spread.map((_, i) => `h${i + 1}`),
        concurrency: CONCURRENCY,
        warmupMs: 500,
        durationMs: ROUND_MS,
      } satisfies SqlWritesConfig,
      { timeoutMs: ROUND_MS + 60_000 },
    ).result;
    const config: HttpLoadConfig = {
      baseUrl: gateway.url,
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
      requests: targetIds.map((id) => ({
        method: 'PUT',
        path: `/dedicated/beta/endpoint/${id}`,
        body: JSON.stringify({ newVersionComment: 'bench' }),
      })),
      concurrency: CONCURRENCY,
      warmupMs: 500,
      durationMs: ROUND_MS,
      expectStatus: 200,
      capture: 'versionIndex',
    };
    const r = await runChild<HttpLoadResult>('load/http-client.ts', config, { timeoutMs: ROUND_MS + 60_000 }).result;
    for (const [index, versionIndex] of r.captured) {
      const id = targetIds[index]!;
      acknowledged.set(id, [...(acknowledged.get(id) ?? []), versionIndex]);
    }
    results[c] = { gateway: r, floor };
    console.log(
      `  ${c.padEnd(6)}: gateway ${(r.ok / (r.windowMs / 1000)).toFixed(0)} updates/s (${r.errors} errors), database floor ${(floor.ok / (floor.windowMs / 1000)).toFixed(0)} tx/s`,
    );
  }

  // Every endpoint's versions: 0..n, consecutive, each acknowledged index exactly once.
  const rows = await db.sql<{ endpoint_id: string; indexes: number[]; current_version: number }[]>`
    SELECT v.endpoint_id, array_agg(v.version_index ORDER BY v.version_index) AS indexes, e.current_version
    FROM endpoint_versions v JOIN endpoints e ON e.id = v.endpoint_id
    WHERE v.endpoint_id = ANY(${ids}) GROUP BY v.endpoint_id, e.current_version`;
  const eventCounts = new Map(
    (
      await db.sql<
        { endpoint_id: string; n: number }[]
      >`SELECT endpoint_id, count(*)::int AS n FROM endpoint_events WHERE endpoint_id = ANY(${ids}) AND type = 'VERSION_ADDED' GROUP BY endpoint_id`
    ).map((r) => [r.endpoint_id, r.n]),
  );
  let checkedVersions = 0;
  const verifyProblems: string[] = [];
  for (const row of rows) {
    const stored = row.indexes;
    const acks = (acknowledged.get(row.endpoint_id) ?? []).slice().sort((a, b) => a - b);
    checkedVersions += stored.length;
    const consecutive = stored.every((v, i) => v === i);
    const ackUnique = new Set(acks).size === acks.length;
    const ackMatches = acks.length === stored.length - 1 && acks.every((v, i) => v === i + 1);
    const events = eventCounts.get(row.endpoint_id) ?? 0;
    if (!consecutive)
      verifyProblems.push(
        `${row.endpoint_id}: stored versions are not consecutive from 0 (${stored.length} rows, last ${stored[stored.length - 1]})`,
      );
    if (!ackUnique) verifyProblems.push(`${row.endpoint_id}: an acknowledged version index was returned twice`);
    if (!ackMatches)
      verifyProblems.push(`${row.endpoint_id}: ${acks.length} updates acknowledged but ${stored.length - 1} versions stored`);
    if (row.current_version !== stored.length - 1)
      verifyProblems.push(`${row.endpoint_id}: current_version ${row.current_version}, last stored ${stored.length - 1}`);
    if (events !== stored.length - 1)
      verifyProblems.push(`${row.endpoint_id}: ${events} VERSION_ADDED events for ${stored.length - 1} updates`);
  }
  if (rows.length !== ids.length) verifyProblems.push(`versions found for ${rows.length} of ${ids.length} endpoints`);
  problems.push(...verifyProblems.slice(0, 10));

  await gateway.stop();
  await db.stop();

  const table: (string | number)[][] = [];
  const data: Record<string, unknown> = {
    concurrency: CONCURRENCY,
    roundMs: ROUND_MS,
    spread: SPREAD,
    versionsChecked: checkedVersions,
    verification: verifyProblems.length === 0 ? 'ok' : verifyProblems,
  };
  const targets = [];
  for (const c of ['one', 'spread'] as Case[]) {
    const g = results[c].gateway!;
    const f = results[c].floor!;
    if (g.errors > 0) problems.push(`${c}: ${g.errors} failed updates: ${g.errorSamples.slice(0, 2).join(' | ')}`);
    if (f.errors > 0) problems.push(`${c}: ${f.errors} failed baseline transactions: ${f.errorSamples.slice(0, 2).join(' | ')}`);
    const gRate = g.ok / (g.windowMs / 1000);
    const fRate = f.ok / (f.windowMs / 1000);
    const [g50, g99] = quantiles(concat([g.latencyMs]), [0.5, 0.99]) as [number, number];
    const [f50, f99] = quantiles(concat([f.latencyMs]), [0.5, 0.99]) as [number, number];
    data[c] = {
      gatewayUpdatesPerSecond: round(gRate, 1),
      floorTxPerSecond: round(fRate, 1),
      ratio: round(gRate / fRate, 4),
      gatewayP50Ms: round(g50),
      gatewayP99Ms: round(g99),
      floorP50Ms: round(f50),
      floorP99Ms: round(f99),
      updates: g.ok + g.warmup.ok,
      errors: g.errors,
    };
    table.push([
      c === 'one' ? '1 endpoint (row-lock contention)' : `spread over ${SPREAD} endpoints`,
      fmt(gRate, 0),
      fmt(fRate, 0),
      fmt(gRate / fRate, 3),
      `${fmt(g50)} / ${fmt(g99)}`,
      `${fmt(f50)} / ${fmt(f99)}`,
      g.errors,
    ]);
  }
  targets.push(target('versions lost, duplicated or out of order', verifyProblems.length, '==', 0, '', 0));
  return {
    method:
      `A real gateway process (src/main.ts with its controller; CPU_SLOTS=0 so the ${SPREAD + 1} endpoints wait for capacity and an update only appends a version) on a fresh embedded PostgreSQL. ` +
      `A load-generator child keeps ${CONCURRENCY} keep-alive connections busy with \`PUT /dedicated/beta/endpoint/{id}\` \`{"newVersionComment":"bench"}\` for ${ROUND_MS / 1000} s after a 0.5 s warm-up, ` +
      `first all on one endpoint, then round-robin over ${SPREAD}. Baseline ("database floor"): a child process running the minimal new-version transaction ` +
      `(SELECT … FOR UPDATE, INSERT version, UPDATE head, INSERT event, SELECT back) directly on scratch tables, same concurrency and spread. ` +
      `Afterwards every endpoint's stored versions must be 0..n with each acknowledged versionIndex returned exactly once, current_version = n, and n VERSION_ADDED events; otherwise the run is invalid.`,
    valid: problems.length === 0,
    problems,
    table: {
      columns: ['case', 'gateway updates/s', 'floor tx/s', 'ratio', 'gateway p50 / p99 ms', 'floor p50 / p99 ms', 'errors'],
      rows: table,
    },
    targets,
    notes: [
      `${checkedVersions} stored versions checked over ${rows.length} endpoints: ${verifyProblems.length === 0 ? 'consecutive, none lost or duplicated' : `${verifyProblems.length} problems`}. No throughput target is set for writes: the ratio to the database floor is reported.`,
    ],
    data,
  };
}

export const writes: Bench = { name: 'writes', title: 'Endpoint updates (new versions) per second', run };
