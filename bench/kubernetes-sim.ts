/**
 * The Kubernetes runtime at scale: test/runtime/kubernetes-sim.test.ts run with
 * 1,000 endpoints (5,500 replicas) against the stand-in API server in its
 * simulated mode, the stand-in in a child process of its own. The test asserts
 * the counts (no API call per controller pass, one call per change); this
 * reports the figures: time to converge from nothing, the CPU time each
 * process spent on it, API calls per replica, the time of one pass over every
 * replica. With --cpu-prof, both processes are profiled
 * (bench/results/profiles/kubernetes-sim-runtime, kubernetes-sim-stand-in).
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { cpuProfArgs, REPO_ROOT, tempDir } from './lib/env.js';
import type { Bench, BenchContext, BenchOutcome } from './lib/result.js';

const ENDPOINTS = Number(process.env.BENCH_SIM_ENDPOINTS ?? 1000);

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

async function run(context: BenchContext): Promise<BenchOutcome> {
  const out = path.join(await tempDir('kubernetes-sim'), 'figures.json');
  // Vitest's own --execArgv reaches the test's worker (the runtime); the stand-in's child takes SIM_STAND_IN_EXEC_ARGV.
  const runtimeProf = context.cpuProf ? (await cpuProfArgs('kubernetes-sim-runtime')).map((arg) => `--execArgv=${arg}`) : [];
  const standInProf = context.cpuProf ? (await cpuProfArgs('kubernetes-sim-stand-in')).join(' ') : '';
  const code = await new Promise<number>((resolve) => {
    const args = ['node_modules/vitest/vitest.mjs', 'run', 'test/runtime/kubernetes-sim.test.ts', ...runtimeProf];
    const child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env: { ...process.env, SIM_ENDPOINTS: String(ENDPOINTS), SIM_OUT: out, SIM_STAND_IN_EXEC_ARGV: standInProf },
      stdio: 'inherit',
    });
    child.once('exit', (exitCode) => resolve(exitCode ?? 1));
  });
  const figures = code === 0 ? (JSON.parse(await readFile(out, 'utf8')) as SimFigures) : undefined;
  return {
    method:
      `${ENDPOINTS} endpoints of 1 to 10 replicas each (one pod per replica) started through the Kubernetes runtime against the ` +
      'stand-in API server, which runs in a child process of its own and whose kubelet marks pods ready without processes ' +
      '(100 starts at once); then 20 controller passes (liveness of every replica and the capacity), then 10 replicas stopped. ' +
      'API calls counted by the stand-in; CPU time of each process over the convergence from process.cpuUsage().',
    valid: figures !== undefined,
    problems: figures ? [] : [`the simulation failed (exit code ${code})`],
    table: {
      columns: [
        'endpoints',
        'replicas',
        'converge (s)',
        'runtime CPU (s)',
        'stand-in CPU (s)',
        'API calls per replica',
        'one pass over all (ms)',
        'API calls per pass',
        'API calls per change',
      ],
      rows: figures
        ? [
            [
              figures.endpoints,
              figures.replicas,
              (figures.convergeMs / 1000).toFixed(1),
              (figures.convergeCpuMs / 1000).toFixed(1),
              figures.standInCpuMs === null ? '–' : (figures.standInCpuMs / 1000).toFixed(1),
              figures.callsPerReplica,
              figures.passMs,
              figures.callsPerPass,
              figures.callsPerChange,
            ],
          ]
        : [],
    },
    targets: [],
    notes: [
      'Calls per replica: one pod create, plus one Secret read and one create per endpoint (its engine token, the owner of its pods).',
      'A pass reads the informers’ caches only; the watches stay open (one for pods, one for nodes).',
      'The runtime (its API calls, its pod informer: about four watch events per pod) and the stand-in (HTTP, JSON, store, ' +
        'watch, scheduler, kubelet) each use one core at most; on a machine shared with other work the convergence time ' +
        'follows the load, the CPU times much less. BENCHMARKS.md, "Kubernetes simulation (session 16)", has the profiles.',
    ],
    data: { ...figures },
  };
}

export const kubernetesSim: Bench = { name: 'kubernetes-sim', title: 'Kubernetes runtime: 1,000 endpoints reconciled', run };
