/** Gateway processes for tests: `src/main.ts` run as a child process, exactly as `npm start` runs it. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { onCleanup } from './cleanup.js';

export interface GatewayProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** The gateways this test file started and has not stopped: stopped together (each drains) when it ends. */
const running = new Set<() => Promise<void>>();

async function stopAll(): Promise<void> {
  const stops = [...running];
  running.clear();
  await Promise.all(stops.map((stop) => stop()));
}

export function startGatewayProcess(env: Record<string, string>): Promise<GatewayProcess> {
  return new Promise((resolve, reject) => {
    // TEST_GATEWAY_EXEC_ARGV: Node.js flags for every gateway a test starts (e.g. `--cpu-prof --cpu-prof-dir=DIR`).
    const flags = (process.env.TEST_GATEWAY_EXEC_ARGV ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...flags, '--import', 'tsx', 'src/main.ts'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const stop = () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once('exit', () => done());
        child.kill('SIGTERM');
      });
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Serving on (http:\/\/[\d.:]+)/.exec(output);
      if (match) {
        child.stdout!.off('data', onData);
        child.stdout!.on('data', (more: Buffer) => (output += more.toString()));
        const handle: GatewayProcess = { url: match[1]!, child, output: () => output, stop };
        if (running.size === 0) onCleanup(stopAll);
        running.add(stop);
        resolve(handle);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code}:\n${output}`)));
  });
}

/** Whether a process runs (a zombie, dead but not yet reaped by whoever inherited it, does not). */
export async function isRunning(pid: number): Promise<boolean> {
  try {
    return !/^\d+ \(.*\) [ZX]/s.test(await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
