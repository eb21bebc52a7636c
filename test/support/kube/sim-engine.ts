/**
 * The engine of every simulated pod, for the Kubernetes simulation through the controller
 * (test/runtime/kubernetes-sim-controller.test.ts): the stand-in's kubelet in simulated mode (`processes: false`)
 * marks pods ready without running anything, and gives them loopback IPs of 127/8 (pod-ips.ts); one node:http server
 * bound to 0.0.0.0 on one port answers all of them, and the runtime dials `http://<pod IP>:<that port>`
 * (KUBERNETES_ENGINE_PORT).
 *
 * It answers what the gateway's engine client asks (src/engine-client/): GET /health (EngineHealth's shape, idle) and
 * the warm-up, one short chat completion (POST /v1/chat/completions). It counts both per pod IP (the socket's local
 * address), and the calls that came without the engine token's Authorization header or to any other route.
 *
 * It runs in a child process of its own (sim-engine-child.ts), so that serving thousands of health checks a pass is not
 * counted as the controller's CPU; the test reads its counts and CPU time over IPC.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { onCleanup } from '../cleanup.js';

/** What the engine has been asked so far. */
export interface SimEngineCounts {
  /** GET /health, by pod IP */
  health: Record<string, number>;
  /** warm-up completions, by pod IP */
  warmUps: Record<string, number>;
  /** requests without `authorization: Bearer …` */
  unauthenticated: number;
  /** requests to any other route or method (answered 404) */
  other: number;
}

export interface SimEngine {
  /** The port every pod IP answers on. */
  readonly port: number;
  readonly pid: number;
  counts(): Promise<SimEngineCounts>;
  /** The child's CPU time so far (process.cpuUsage(), µs). */
  cpuUsage(): Promise<NodeJS.CpuUsage>;
  close(): Promise<void>;
}

/** Messages: to the child `{ id, method }`; from it `{ ready: port }` first, then `{ id, result }`. */
export type SimEngineRequest = { id: number; method: 'counts' | 'cpuUsage' };
export type SimEngineAnswer = { ready: number } | { id: number; result: unknown };

const CHILD = fileURLToPath(new URL('./sim-engine-child.ts', import.meta.url));

/** Starts the engine in a child process; closed when the test file ends. */
export async function startSimEngine(): Promise<SimEngine> {
  const child = fork(CHILD, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pending = new Map<number, { resolve: (result: unknown) => void; reject: (error: Error) => void }>();
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code, signal) => {
      const error = new Error(`the simulated engine exited (${signal ?? code})`);
      reject(error);
      for (const call of pending.values()) call.reject(error);
      pending.clear();
    });
    child.on('message', (message: SimEngineAnswer) => {
      if ('ready' in message) resolve(message.ready);
      else {
        pending.get(message.id)?.resolve(message.result);
        pending.delete(message.id);
      }
    });
  });
  let nextId = 1;
  const call = <T>(method: SimEngineRequest['method']): Promise<T> =>
    new Promise((resolve, reject) => {
      if (!child.connected) return reject(new Error('the simulated engine is gone'));
      const id = nextId++;
      pending.set(id, { resolve: resolve as (result: unknown) => void, reject });
      child.send({ id, method } satisfies SimEngineRequest);
    });
  let closing: Promise<void> | undefined;
  const engine: SimEngine = {
    port,
    pid: child.pid!,
    counts: () => call('counts'),
    cpuUsage: () => call('cpuUsage'),
    close() {
      closing ??= (async () => {
        if (child.connected) child.disconnect();
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      })();
      return closing;
    },
  };
  onCleanup(() => engine.close());
  return engine;
}
