/**
 * GraphQL reads: requests per second of a nested single-endpoint read and of
 * a 50-endpoint list, against a bare graphql-yoga `{ hello }` server started
 * in the same run, and the SQL statements each operation sends.
 *
 * The gateway is built in this process (`startGateway(sql, createServices(sql))`,
 * no controller) over a database pool whose `onQuery` hook counts every
 * statement; the load generator is a separate process.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSchema, createYoga } from 'graphql-yoga';
import { startGateway } from '../src/gateway.js';
import { findEndpointsWithOwners } from '../src/storage/endpoints-repository.js';
import { createServices } from '../src/services/index.js';
import { authenticate } from '../src/services/principal.js';
import { ADMIN_KEY, onCleanup, runChild, startDatabase, TINY_REPO } from './lib/env.js';
import { H100_X1 } from './lib/endpoints.js';
import { fmt, quantiles, concat, round } from './lib/stats.js';
import { cpuTimeMs } from './lib/proc.js';
import { target, type Bench, type BenchContext, type BenchOutcome } from './lib/result.js';
import { startInProcessProfile } from './lib/inprocess-profile.js';
import type { HttpLoadConfig, HttpLoadResult } from './load/http-client.js';

const ROUND_MS = Number(process.env.BENCH_GRAPHQL_ROUND_MS ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_GRAPHQL_CONCURRENCY ?? 16);
const LIST_SIZE = 50;
const COUNT_OPS = 40;

const SINGLE = 'query($id: ID!) { endpoint(id: $id) { spec { name } status { status } project { team { name } } } }';
const LIST = `{ endpoints(first: ${LIST_SIZE}) { nodes { spec { name } status { status } project { team { name } } } } }`;
const HELLO = '{ hello }';
/** The same statement as the gateway's single read, from a bare resolver: the floor of any read that goes to PostgreSQL. */
const BARE_SQL = 'query($id: ID!) { endpoint(id: $id) { name status team } }';

type Case = 'bare' | 'bareSql' | 'single' | 'list';

async function run(context: BenchContext): Promise<BenchOutcome> {
  const problems: string[] = [];
  const db = await startDatabase({ migrate: true });
  const statements = { count: 0, last: [] as string[] };
  const sql = db.connect({
    onQuery: (query) => {
      statements.count++;
      if (statements.last.length < 50) statements.last.push(query.replace(/\s+/g, ' ').slice(0, 160));
    },
  });
  const services = createServices(sql);
  const boot = await services.identity.bootstrap(ADMIN_KEY);
  if (!boot) throw new Error('the bootstrap did not run on an empty database');
  const principal = await authenticate(sql, `Bearer ${ADMIN_KEY}`, null);
  if (principal.type === 'error') throw new Error(principal.error.message);
  const ids: string[] = [];
  for (let i = 0; i < LIST_SIZE; i++) {
    const created = await services.endpoints.create(principal.value, {
      projectId: boot.project.id,
      name: `read-${i}`,
      instanceOptionId: H100_X1,
      hfModelRepo: TINY_REPO,
      advanced: {},
    });
    if (created.type === 'error') throw new Error(created.error.message);
    ids.push(created.value.id);
  }
  const gateway = await startGateway(sql, services, { port: 0, host: '127.0.0.1', log: () => {} });
  const closeGateway = onCleanup('in-process gateway', () => gateway.close());

  const bareYoga = createYoga({
    schema: createSchema({
      typeDefs:
        'type Query { hello: String, endpoint(id: ID!): BareEndpoint } type BareEndpoint { name: String, status: String, team: String }',
      resolvers: {
        Query: {
          hello: () => 'world',
          endpoint: async (_: unknown, { id }: { id: string }) => {
            const [row] = await findEndpointsWithOwners(sql, [id]);
            return row && { name: row.endpoint.current.spec.name, status: row.endpoint.status, team: row.team.name };
          },
        },
      },
    }),
    logging: false,
    landingPage: false,
  });
  const bare = http.createServer(bareYoga);
  bare.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
  onCleanup(
    'bare yoga',
    () =>
      new Promise<void>((resolve) => {
        bare.closeAllConnections();
        bare.close(() => resolve());
      }),
  );
  const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;

  const requestOf = (c: Case, i = 0) => ({
    method: 'POST',
    path: '/graphql',
    body: JSON.stringify(
      c === 'bare'
        ? { query: HELLO }
        : c === 'bareSql'
          ? { query: BARE_SQL, variables: { id: ids[i % ids.length] } }
          : c === 'single'
            ? { query: SINGLE, variables: { id: ids[i % ids.length] } }
            : { query: LIST },
    ),
  });

  // Correctness, and statements per operation (sequential, after one warm call).
  const statementsPer: Record<string, number> = {};
  const samples: Record<string, string[]> = {};
  for (const c of ['single', 'list'] as const) {
    const call = async (i: number) => {
      const r = requestOf(c, i);
      const response = await fetch(`${gateway.url}${r.path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
        body: r.body,
      });
      const body = (await response.json()) as { data?: Record<string, any>; errors?: unknown };
      if (response.status !== 200 || body.errors) throw new Error(`${c} failed: ${JSON.stringify(body)}`);
      return body.data!;
    };
    const first = await call(0);
    if (c === 'list' && first.endpoints.nodes.length !== LIST_SIZE)
      problems.push(`the list returned ${first.endpoints.nodes.length} endpoints, not ${LIST_SIZE}`);
    if (c === 'single' && !first.endpoint?.project?.team?.name) problems.push(`the single read returned ${JSON.stringify(first)}`);
    statements.count = 0;
    statements.last = [];
    for (let i = 1; i <= COUNT_OPS; i++) await call(i);
    statementsPer[c] = statements.count / COUNT_OPS;
    samples[c] = statements.last.slice(0, Math.round(statementsPer[c]!));
  }

  type Totals = {
    ok: number;
    errors: number;
    windowMs: number;
    latency: Float64Array[];
    samples: string[];
    sent: number;
    serverCpuMs: number;
    postgresCpuMs: number;
  };
  const empty = (): Totals => ({ ok: 0, errors: 0, windowMs: 0, latency: [], samples: [], sent: 0, serverCpuMs: 0, postgresCpuMs: 0 });
  const totals: Record<Case, Totals> = { bare: empty(), bareSql: empty(), single: empty(), list: empty() };
  // PostgreSQL's side of a read: the CPU of the bench database's backends (the pools keep their connections).
  const backendPids = async () =>
    (await db.sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`).map((r) => r.pid);
  const backendCpu = (pids: number[], before: Map<number, number>) =>
    pids.reduce((sum, pid) => sum + (cpuTimeMs(pid) ?? 0) - (before.get(pid) ?? 0), 0);
  const load = (c: Case) => {
    const config: HttpLoadConfig = {
      baseUrl: c === 'bare' || c === 'bareSql' ? bareUrl : gateway.url,
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
      requests: c === 'single' || c === 'bareSql' ? ids.map((_, i) => requestOf(c, i)) : [requestOf(c)],
      concurrency: CONCURRENCY,
      warmupMs: 500,
      durationMs: ROUND_MS,
      expectStatus: 200,
      graphql: true,
    };
    return runChild<HttpLoadResult>('load/http-client.ts', config, { timeoutMs: ROUND_MS + 60_000 }).result;
  };
  for (const c of ['bare', 'bareSql', 'single', 'list', 'list', 'single', 'bareSql', 'bare'] as Case[]) {
    const pgBefore = new Map((await backendPids()).map((pid) => [pid, cpuTimeMs(pid) ?? 0]));
    const cpuBefore = process.cpuUsage();
    const r = await load(c);
    const cpu = process.cpuUsage(cpuBefore);
    const t = totals[c];
    t.sent += r.ok + r.errors + r.warmup.ok + r.warmup.errors;
    t.serverCpuMs += (cpu.user + cpu.system) / 1000;
    t.postgresCpuMs += backendCpu(await backendPids(), pgBefore);
    t.ok += r.ok;
    t.errors += r.errors;
    t.windowMs += r.windowMs;
    t.latency.push(r.latencyMs);
    t.samples.push(...r.errorSamples);
    console.log(`  ${c.padEnd(6)}: ${(r.ok / (r.windowMs / 1000)).toFixed(0)} req/s, ${r.errors} errors`);
  }

  if (context.cpuProf) {
    // Extra, unmeasured rounds under the inspector's profiler (this process is the gateway's and the bare servers'),
    // one profile per case: the single read beside its floor (bare yoga sending the same SQL), and the list.
    for (const [c, name] of [
      ['bareSql', 'graphql-read-bare-sql'],
      ['single', 'graphql-read-gateway-single'],
      ['list', 'graphql-read-gateway-list'],
    ] as const) {
      const stopProfile = await startInProcessProfile(name);
      const r = await load(c);
      await stopProfile();
      console.log(`  profiled ${c}: ${r.ok + r.warmup.ok + r.errors + r.warmup.errors} requests (${name})`);
    }
  }
  const rps = (c: Case) => totals[c].ok / (totals[c].windowMs / 1000);
  const bareRps = rps('bare');
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown> = {
    concurrency: CONCURRENCY,
    roundMs: ROUND_MS,
    statementsPerOperation: statementsPer,
    statementSamples: samples,
  };
  const serverUs = (c: Case) => (totals[c].serverCpuMs * 1000) / Math.max(1, totals[c].sent);
  const postgresUs = (c: Case) => (totals[c].postgresCpuMs * 1000) / Math.max(1, totals[c].sent);
  const label: Record<Case, string> = {
    bare: 'bare yoga `{ hello }`',
    bareSql: 'bare yoga + the same SQL read',
    single: '`endpoint(id)` nested',
    list: `\`endpoints(first: ${LIST_SIZE})\` nested`,
  };
  for (const c of ['bare', 'bareSql', 'single', 'list'] as Case[]) {
    const t = totals[c];
    if (t.errors > 0) problems.push(`${c}: ${t.errors} errors: ${t.samples.slice(0, 2).join(' | ')}`);
    const [p50, p99] = quantiles(concat(t.latency), [0.5, 0.99]) as [number, number];
    data[c] = {
      requestsPerSecond: round(rps(c), 1),
      ratioToBare: round(rps(c) / bareRps, 4),
      ratioToBareSql: round(rps(c) / rps('bareSql'), 4),
      p50Ms: round(p50),
      p99Ms: round(p99),
      serverCpuUsPerRequest: round(serverUs(c), 1),
      postgresCpuUsPerRequest: round(postgresUs(c), 1),
      requests: t.ok,
      errors: t.errors,
    };
    rows.push([
      label[c],
      fmt(rps(c), 0),
      fmt(rps(c) / bareRps, 3),
      c === 'single' ? fmt(rps(c) / rps('bareSql'), 3) : '–',
      fmt(p50),
      fmt(p99),
      fmt(serverUs(c), 0),
      fmt(postgresUs(c), 0),
      c === 'single' || c === 'list' ? fmt(statementsPer[c], 2) : c === 'bareSql' ? '1.00' : '–',
      t.errors,
    ]);
  }
  await closeGateway();
  return {
    method:
      `The gateway is built in the benchmark process (startGateway(sql, createServices(sql)), no controller) over a fresh embedded PostgreSQL holding ${LIST_SIZE} endpoints; ` +
      `a bare graphql-yoga server answering \`{ hello }\` runs next to it. The same bare server also answers \`${BARE_SQL}\` by sending the gateway's own single-read statement (findEndpointsWithOwners) ` +
      `from its resolver, with no authentication, dataloader or access check: the floor of any GraphQL read that goes to PostgreSQL. A load-generator child process keeps ${CONCURRENCY} keep-alive connections busy (closed loop) ` +
      `for rounds of ${ROUND_MS / 1000} s (bare, bare + SQL, single, list, list, single, bare + SQL, bare; 0.5 s warm-up each). The single read is \`${SINGLE}\` over the ${LIST_SIZE} ids in turn; the list is \`${LIST}\`. ` +
      `Server CPU per request is this process's CPU (it serves both) over a round ÷ the requests sent; PostgreSQL's is the CPU of the database's backend processes over the same round. ` +
      `Statements per operation are counted by the pool's onQuery hook over ${COUNT_OPS} sequential operations (authentication included).`,
    valid: problems.length === 0,
    problems,
    table: {
      columns: [
        'operation',
        'req/s',
        'ratio to bare',
        'ratio to bare + SQL',
        'p50 ms',
        'p99 ms',
        'server CPU µs / req',
        'PostgreSQL CPU µs / req',
        'SQL statements / op',
        'errors',
      ],
      rows,
    },
    targets: [
      target('single nested read, req/s ÷ bare yoga', rps('single') / bareRps, '>=', 0.5, '', 3),
      target(`${LIST_SIZE}-endpoint list, SQL statements per operation`, statementsPer.list ?? Number.NaN, '<=', 4, '', 2),
    ],
    notes: [
      `One PostgreSQL read alone takes a bare server to ${fmt(rps('bareSql') / bareRps, 3)} of bare \`{ hello }\` (server CPU ${fmt(serverUs('bareSql'), 0)} µs/req against ${fmt(serverUs('bare'), 0)}, plus PostgreSQL's own ${fmt(postgresUs('bareSql'), 0)} µs on the same processors); ` +
        `the gateway's single read reaches ${fmt(rps('single') / rps('bareSql'), 3)} of that floor.`,
      `SQL statements of one list operation: ${(samples.list ?? []).map((s) => `\`${s.slice(0, 90)}\``).join('; ')}`,
    ],
    data,
  };
}

export const graphqlRead: Bench = { name: 'graphql-read', title: 'GraphQL reads vs a bare graphql-yoga server', run };
