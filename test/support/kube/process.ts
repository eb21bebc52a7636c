/**
 * The stand-in in a child process of its own (child.ts runs `createKubeStandIn` there): a real API server does not
 * share its clients' event loop, and a test that measures a client at scale must not count the server's work as the
 * client's. The test talks to it as a client does, over HTTP (`url`, `writeKubeconfig()`), and drives it through the
 * IPC channel: the stand-in's methods below, by name, each answering with a promise.
 *
 * The options cross the channel as JSON: `imagePullFails` is a list of images, and there is no `entrypoint` (a child
 * for simulated pods, `processes: false`, is what this is for). The child ends with its parent.
 */
import { fork } from 'node:child_process';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeKubeconfig } from './kubeconfig.js';
import type { KubeStandIn, KubeStandInOptions } from './stand-in.js';

export interface KubeStandInChildOptions extends Omit<KubeStandInOptions, 'imagePullFails' | 'entrypoint'> {
  imagePullFails?: string[];
  /** Node.js options of the child (`--cpu-prof`, `--cpu-prof-dir=…`) */
  execArgv?: string[];
}

/** The stand-in's methods a test may call in the child. */
export const REMOTE_METHODS = [
  'addNode',
  'updateNode',
  'setNodeReady',
  'removeNode',
  'addNamespace',
  'pod',
  'pods',
  'events',
  'setImagePullFailure',
  'setImagePullDelay',
  'evictByNode',
  'cutWatches',
  'stallWatches',
  'resumeWatches',
  'expireHistory',
  'openWatches',
  'requests',
  'resetCounts',
] as const;
export type RemoteMethod = (typeof REMOTE_METHODS)[number];

type Remote = {
  [M in RemoteMethod]: (...args: Parameters<KubeStandIn[M]>) => Promise<Awaited<ReturnType<KubeStandIn[M]>>>;
};

export interface KubeStandInProcess extends Remote {
  readonly url: string;
  readonly token: string;
  readonly pid: number;
  /** Writes a kubeconfig for it (as KubeStandIn's); returns its path. */
  writeKubeconfig(namespace?: string): string;
  /** The CPU time the child has used so far (its process.cpuUsage(), µs). */
  cpuUsage(): Promise<NodeJS.CpuUsage>;
  /** Closes the stand-in and waits for the child to exit. */
  close(): Promise<void>;
}

/** Messages: to the child `{ options }` first, then `{ id, method, args }`; from it `{ ready }` or `{ failed }`, then `{ id, result }` or `{ id, error }`. */
export type ToChild = { options: KubeStandInChildOptions } | { id: number; method: RemoteMethod | 'cpuUsage' | 'close'; args: unknown[] };
export type FromChild = { ready: { url: string; token: string } } | { failed: string } | { id: number; result?: unknown; error?: string };

const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url));

export async function startKubeStandInChild(options: KubeStandInChildOptions = {}): Promise<KubeStandInProcess> {
  const { execArgv = [], ...standInOptions } = options;
  const child = fork(CHILD, [], { execArgv: ['--import', 'tsx', ...execArgv], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let nextId = 1;
  const ready = new Promise<{ url: string; token: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the stand-in process did not start within 60 s')), 60_000);
    child.on('message', (message: FromChild) => {
      if ('ready' in message) {
        clearTimeout(timer);
        resolve(message.ready);
      } else if ('failed' in message) {
        clearTimeout(timer);
        reject(new Error(`the stand-in process failed to start: ${message.failed}`));
      } else {
        const call = pending.get(message.id);
        pending.delete(message.id);
        if (message.error !== undefined) call?.reject(new Error(message.error));
        else call?.resolve(message.result);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      const error = new Error(`the stand-in process exited (${signal ?? code})`);
      reject(error);
      for (const call of pending.values()) call.reject(error);
      pending.clear();
    });
  });
  child.send({ options: standInOptions } satisfies ToChild);
  let started: { url: string; token: string };
  try {
    started = await ready;
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }

  const call = (method: RemoteMethod | 'cpuUsage' | 'close', args: unknown[]): Promise<any> =>
    new Promise((resolve, reject) => {
      if (!child.connected) return reject(new Error('the stand-in process is gone'));
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.send({ id, method, args } satisfies ToChild);
    });
  const remote = Object.fromEntries(REMOTE_METHODS.map((method) => [method, (...args: unknown[]) => call(method, args)])) as Remote;
  const kubeconfigs: string[] = [];
  let closing: Promise<void> | undefined;
  return {
    ...remote,
    url: started.url,
    token: started.token,
    pid: child.pid!,
    writeKubeconfig(namespace = 'default') {
      const path = writeKubeconfig({ server: started.url, token: started.token, namespace });
      kubeconfigs.push(path);
      return path;
    },
    cpuUsage: () => call('cpuUsage', []),
    close() {
      closing ??= (async () => {
        await call('close', []).catch(() => {});
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
        for (const path of kubeconfigs) rmSync(dirname(path), { recursive: true, force: true });
      })();
      return closing;
    },
  };
}
