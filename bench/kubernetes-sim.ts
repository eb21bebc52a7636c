/**
 * The Kubernetes runtime at scale, against the stand-in API server in its simulated mode (its kubelet marks pods
 * ready without processes), the stand-in in a child process of its own, four times:
 *
 * - test/runtime/kubernetes-sim.test.ts: the runtime alone, 1,000 endpoints (5,500 replicas) started by calling it
 *   directly; the test asserts the counts (no API call per pass, one call per change);
 * - test/runtime/kubernetes-sim-controller.test.ts: the same endpoints created through the services and reconciled by
 *   the real controller on PostgreSQL, every pod's engine a small HTTP server in another process (warm-ups, health
 *   checks); the test asserts the counts (no call while idle, a few per change);
 * - test/runtime/kubernetes-sim-gateways.test.ts, with one gateway process, two, then four (src/main.ts, RUNTIME=kubernetes):
 *   the same endpoints created while the gateways run and share them.
 *
 * This reports the figures: time to converge from nothing, the CPU time each process spent on it, API calls per
 * replica, per idle pass and per change. With --cpu-prof, the test processes and the stand-ins are profiled
 * (bench/results/profiles/kubernetes-sim-runtime, -stand-in, -controller, -controller-stand-in).
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { cpuProfArgs, REPO_ROOT, tempDir } from './lib/env.js';
import type { Bench, BenchContext, BenchOutcome } from './lib/result.js';
import { DEFAULTS } from '../src/defaults.js';

const ENDPOINTS = Number(process.env.BENCH_SIM_ENDPOINTS ?? 1000);

/** test/runtime/kubernetes-sim.test.ts's figures. */
interface SimFigures {
  endpoints: number;
  replicas: number;
  convergeMs: number;
  /** CPU time of the runtime's process (the test) while converging */
  convergeCpuMs: number;
  /** CPU time of the stand-in's process while converging */
  standInCpuMs: number | null;
  convergeCalls: number;
  callsPerReplica: number;
  passMs: number;
  callsPerPass: number;
  callsPerChange: number;
}

/** CPU milliseconds of each process over a phase. */
interface ProcessCpu {
  /** the test's: controller, runtime, engine client */
  test: number;
  standIn: number;
  engine: number;
  /** the database's backends */
  postgres: number;
}

/** test/runtime/kubernetes-sim-controller.test.ts's figures. */
interface ControllerFigures {
  endpoints: number;
  replicas: number;
  intervalMs: number;
  convergeMs: number;
  convergeCpuMs: ProcessCpu;
  convergeCalls: number;
  callsPerReplica: number;
  convergeStatements: number;
  statementsPerReplica: number;
  /** when every endpoint was RUNNING (one replica ready each), before all their replicas were (since session 27) */
  servingMs?: number;
  /** an endpoint's read through the services while converging, one every 20 ms (since session 27) */
  convergeApiReadMs?: { reads: number; p50: number; p99: number; max: number };
  /** requests to the hub while converging (since session 28) */
  convergeHubRequests?: number;
  idleWindowMs: number;
  idleHealthChecksPerReplica: { min: number; max: number };
  idleCallsPerPass: number;
  /** the idle window ÷ the health checks every replica got in it */
  idleRoundMs: number;
  idleStatements: number;
  idleStatementsPerEndpointRound: number;
  idleCpuMs: ProcessCpu;
  /** the test process's CPU per round over every endpoint at rest */
  idleCpuPerRoundMs: number;
  /** how often the simulation's controller passes over an endpoint at rest */
  restIntervalMs: number;
  callsPerChange: { scaleOut: number; scaleIn: number; podDeleted: number };
}

/** test/runtime/kubernetes-sim-gateways.test.ts's figures. */
interface GatewaysFigures {
  endpoints: number;
  replicas: number;
  gateways: number;
  createdMs: number;
  convergeMs: number;
  convergeCpuMs: { gateways: number[]; standIn: number; engine: number; postgres: number };
  leases: number[];
}

/** Runs one simulation file with SIM_ENDPOINTS (and `env`); its figures, or undefined with the exit code when it failed. */
async function simulate<T>(
  file: string,
  profile: string | undefined,
  env: Record<string, string> = {},
): Promise<{ figures: T; code: number } | { figures: undefined; code: number }> {
  const out = path.join(await tempDir('kubernetes-sim'), 'figures.json');
  // Vitest's own --execArgv reaches the test's worker; the stand-in's child takes SIM_STAND_IN_EXEC_ARGV.
  const testProf = profile ? (await cpuProfArgs(profile)).map((arg) => `--execArgv=${arg}`) : [];
  const standInProf = profile ? (await cpuProfArgs(`${profile}-stand-in`)).join(' ') : '';
  const code = await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', file, ...testProf], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        SIM_ENDPOINTS: String(ENDPOINTS),
        SIM_OUT: out,
        SIM_STAND_IN_EXEC_ARGV: standInProf,
        // Production's rest interval (the controller's interval is production's too).
        SIM_REST_INTERVAL_MS: String(DEFAULTS.restIntervals * DEFAULTS.controllerIntervalMs),
        ...env,
      },
      stdio: 'inherit',
    });
    child.once('exit', (exitCode) => resolve(exitCode ?? 1));
  });
  return code === 0 ? { figures: JSON.parse(await readFile(out, 'utf8')) as T, code } : { figures: undefined, code };
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);

/** "scale-out / scale-in / pod deleted". */
function changeCalls(c: ControllerFigures): string {
  const changes = ['scaleOut', 'scaleIn', 'podDeleted'] as const;
  return changes.map((k) => c.callsPerChange[k]).join(' / ');
}

async function run(context: BenchContext): Promise<BenchOutcome> {
  const runtime = await simulate<SimFigures>('test/runtime/kubernetes-sim.test.ts', context.cpuProf ? 'kubernetes-sim-runtime' : undefined);
  const controlled = await simulate<ControllerFigures>(
    'test/runtime/kubernetes-sim-controller.test.ts',
    context.cpuProf ? 'kubernetes-sim-controller' : undefined,
  );
  // Gateway processes sharing the endpoints: one, two, then four (the endpoints created once they run and count each
  // other), each following the pods of its own shards.
  const shared = [];
  for (const n of [1, 2, 4])
    shared.push(await simulate<GatewaysFigures>('test/runtime/kubernetes-sim-gateways.test.ts', undefined, { SIM_GATEWAYS: String(n) }));
  const r = runtime.figures;
  const c = controlled.figures;
  const problems = [
    ...(r ? [] : [`the runtime's simulation failed (exit code ${runtime.code})`]),
    ...(c ? [] : [`the controller's simulation failed (exit code ${controlled.code})`]),
    ...shared.flatMap((g, i) => (g.figures ? [] : [`the simulation of ${i + 1} gateway process(es) failed (exit code ${g.code})`])),
  ];
  const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
  const coreShare = (cpuMs: number) => (c ? `${((cpuMs / c.idleWindowMs) * 100).toFixed(0)}%` : '–');
  return {
    method:
      `${ENDPOINTS} endpoints of 1 to 10 replicas each (one pod per replica) against the stand-in API server, which runs in a ` +
      'child process of its own and whose kubelet marks pods ready without processes. "runtime alone": started by calling ' +
      'the Kubernetes runtime directly (100 starts at once), then 20 passes (liveness of every replica and the capacity), ' +
      'then 10 replicas stopped. "controller": the endpoints created through the services, then the real controller ' +
      '(production interval, 500 ms) on PostgreSQL reconciling them from nothing through the same runtime, every pod IP ' +
      'answered by one small engine server in a third process (warm-up, health checks); then an idle window in which every ' +
      'replica is health-checked 6 times; then one endpoint scaled out by one, back in, and one pod deleted behind the ' +
      "controller's back. API calls counted by the stand-in; CPU time of each process from process.cpuUsage(), PostgreSQL's " +
      'from /proc (the database’s backends). "N gateway processes": the same endpoints created while N gateways ' +
      '(src/main.ts, RUNTIME=kubernetes) run and share them, each taking the endpoints of its shards and watching their ' +
      'pods alone (src/controller/lease-share.ts, src/domain/shards.ts).',
    valid: problems.length === 0,
    problems,
    table: {
      columns: [
        'path',
        'endpoints',
        'replicas',
        'converge (s)',
        'test process CPU (s)',
        'stand-in CPU (s)',
        'engine CPU (s)',
        'PostgreSQL CPU (s)',
        'API calls per replica',
        'one round over all, idle (ms)',
        'API calls per idle pass',
        'API calls per change',
      ],
      rows: [
        ...(r
          ? [
              [
                'runtime alone',
                r.endpoints,
                r.replicas,
                seconds(r.convergeMs),
                seconds(r.convergeCpuMs),
                r.standInCpuMs === null ? '–' : seconds(r.standInCpuMs),
                '–',
                '–',
                r.callsPerReplica,
                r.passMs,
                r.callsPerPass,
                r.callsPerChange,
              ],
            ]
          : []),
        ...(c
          ? [
              [
                'controller',
                c.endpoints,
                c.replicas,
                seconds(c.convergeMs),
                seconds(c.convergeCpuMs.test),
                seconds(c.convergeCpuMs.standIn),
                seconds(c.convergeCpuMs.engine),
                seconds(c.convergeCpuMs.postgres),
                c.callsPerReplica,
                c.idleRoundMs,
                c.idleCallsPerPass,
                changeCalls(c),
              ],
            ]
          : []),
        ...shared.flatMap(({ figures: g }) =>
          g
            ? [
                [
                  `${g.gateways} gateway process${g.gateways > 1 ? 'es' : ''}`,
                  g.endpoints,
                  g.replicas,
                  seconds(g.convergeMs),
                  seconds(sum(g.convergeCpuMs.gateways)),
                  seconds(g.convergeCpuMs.standIn),
                  seconds(g.convergeCpuMs.engine),
                  seconds(g.convergeCpuMs.postgres),
                  '–',
                  '–',
                  '–',
                  '–',
                ],
              ]
            : [],
        ),
      ],
    },
    targets: [],
    notes: [
      'Calls per replica: one pod create, plus one Secret read and one create per endpoint (its engine token, the owner of its pods).',
      'A pass reads the informers’ caches only; the watches stay open (one for pods, one for nodes).',
      'One round over all, idle: the runtime alone, the liveness of every replica and the capacity read once; the controller, ' +
        'the idle window divided by the health checks every replica got in it (one per pass since session 18: the ' +
        'autoscaler reads the crash watch’s answers; at most 16 passes run at once).',
      'API calls per change, controller: an endpoint scaled out by one (a pod create) / back in (a pod delete) / a pod ' +
        'deleted behind its back (since session 28 a disruption, not a death: the crash watch asks for its deletion, ' +
        'answered 404 as it is gone, then a replacement is created; before, it read the log tail first and counted a death).',
      ...(c
        ? [
            `Controller, idle: ${c.idleStatements} SQL statements in ${seconds(c.idleWindowMs)} s ` +
              `(${c.idleStatementsPerEndpointRound} per endpoint per round of health checks); CPU over the window: test process ` +
              `${coreShare(c.idleCpuMs.test)} of a core, engine ${coreShare(c.idleCpuMs.engine)}, PostgreSQL ` +
              `${coreShare(c.idleCpuMs.postgres)}, stand-in ${coreShare(c.idleCpuMs.standIn)}. Endpoints at rest are passed ` +
              `over every ${seconds(c.restIntervalMs)} s here; the test process spent ${c.idleCpuPerRoundMs} ms per round ` +
              `over all of them, ${((c.idleCpuPerRoundMs / (DEFAULTS.restIntervals * c.intervalMs)) * 100).toFixed(0)}% of a ` +
              `core at production's rest interval (${seconds(DEFAULTS.restIntervals * c.intervalMs)} s).`,
            `Controller, convergence: ${c.convergeStatements} SQL statements (${c.statementsPerReplica} per replica).` +
              (c.convergeHubRequests !== undefined
                ? ` ${c.convergeHubRequests} requests to the hub (${(c.convergeHubRequests / c.endpoints).toFixed(2)} per endpoint: ` +
                  "each endpoint's revision and file HEAD, its commit's file list once per gateway)."
                : '') +
              (c.servingMs !== undefined ? ` Every endpoint served (RUNNING) after ${seconds(c.servingMs)} s.` : '') +
              (c.convergeApiReadMs
                ? ` An endpoint read through the services meanwhile (one every 20 ms, ${c.convergeApiReadMs.reads} reads), in the ` +
                  `process whose event loop the controller keeps busy: p50 ${c.convergeApiReadMs.p50} ms, p99 ` +
                  `${c.convergeApiReadMs.p99} ms, slowest ${c.convergeApiReadMs.max} ms.`
                : ''),
            'No start is given up (since session 19 a pod waits for its node, however long the scheduler takes, up to the ' +
              'scheduling deadline): the test fails on any replica row that ends.',
          ]
        : []),
      ...shared.flatMap(({ figures: g }) =>
        g
          ? [
              `${g.gateways} gateway process(es) (test/runtime/kubernetes-sim-gateways.test.ts): the endpoints created through the ` +
                `services while the gateways run (in ${seconds(g.createdMs)} s, counted in the convergence), then reconciled by ` +
                `src/main.ts processes with RUNTIME=kubernetes; "test process CPU" is the gateways' together ` +
                `(${g.convergeCpuMs.gateways.map(seconds).join(' + ')} s); leases held at the end: ${g.leases.join(' / ')}.`,
            ]
          : [],
      ),
      'The test processes and the stand-in each use one core at most; on a machine shared with other work the convergence time ' +
        'follows the load, the CPU times much less. BENCHMARKS.md, "Kubernetes simulation (session 16)", has the profiles.',
    ],
    data: { ...r, controller: c, gateways: shared.map((g) => g.figures) },
  };
}

export const kubernetesSim: Bench = { name: 'kubernetes-sim', title: 'Kubernetes runtime: 1,000 endpoints reconciled', run };
