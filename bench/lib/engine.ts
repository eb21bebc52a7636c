/** The built-in engine (`npm run engine`) started on its own, as the controller starts it. */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { onCleanup, REPO_ROOT, stopChild } from './env.js';

export interface StandaloneEngine {
  url: string;
  child: ChildProcess;
  /** Milliseconds from spawn to ENGINE_READY. */
  readyMs: number;
  stop(): Promise<void>;
}

export async function startStandaloneEngine(
  modelPath: string,
  options: {
    maxBatchSize: number;
    contextSize: number;
    threads: number;
    nodeArgs?: string[];
    /** Another engine entry point (default src/engine/main.ts), e.g. an older checkout's, to compare. */
    main?: string;
    /** More engine flags (e.g. --prefix-reuse). */
    extraArgs?: string[];
    /** How to run it instead, the program and its first arguments: the gateway's (src/runtime/engine-bundle.ts). */
    entry?: readonly string[];
  },
): Promise<StandaloneEngine> {
  const t0 = performance.now();
  const [program, ...first] = options.entry ?? [
    process.execPath,
    ...(options.nodeArgs ?? []),
    '--import',
    'tsx',
    options.main ?? path.join(REPO_ROOT, 'src/engine/main.ts'),
  ];
  const child = spawn(
    program!,
    [
      ...first,
      '--model',
      modelPath,
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--max-batch-size',
      String(options.maxBatchSize),
      '--context-size',
      String(options.contextSize),
      '--threads',
      String(options.threads),
      '--cpu',
      ...(options.extraArgs ?? []),
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const stop = onCleanup('standalone engine', () => stopChild(child, 5000));
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const match = /ENGINE_READY (\{.*\})/.exec(out);
      if (match) resolve((JSON.parse(match[1]!) as { port: number }).port);
    });
    child.once('exit', (code) => reject(new Error(`the engine exited (${code}): ${stderr}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child, readyMs: performance.now() - t0, stop };
}
