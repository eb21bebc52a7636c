/**
 * Engine process of one replica, spawned by the controller:
 *
 *   npm run engine -- --model file.gguf [--port N] [--host H] [--max-batch-size N] [--context-size N]
 *     [--max-input-length N] [--add-special-tokens] [--no-skip-special-tokens] [--threads N] [--cpu]
 *     [--model-name S] [--drain-timeout-ms N] [--prefix-reuse] [--idle-exit-ms N]
 *
 * ENGINE_TOKEN in the environment (the runtime sets one per engine; an environment variable, not
 * a flag, so that `ps` does not show it) makes every request need `Authorization: Bearer <token>`.
 * --idle-exit-ms (or ENGINE_IDLE_EXIT_MS) makes an engine that no request reached for that long
 * (its gateway gone, none adopting it) drain and exit 0 by itself.
 *
 * Protocol with the controller: stdout carries exactly one line, `ENGINE_READY {"port":…,"pid":…,…}`,
 * once the server listens (llama.cpp and engine logs go to stderr). Readers take `port` and `pid`
 * and ignore other keys; the line also carries `readyAt` (when the server listened, milliseconds
 * since the epoch) and `uptimeMs` (milliseconds from this process's start to then), so that a log
 * reader can tell the engine's own load time from what started it, and what it runs on: `backend`
 * ('cuda', 'vulkan', 'metal' or 'cpu'), `gpuWanted` (started without --cpu), `gpuLayers` of
 * `totalLayers` on the GPU (as /health reports them). An engine that wanted a GPU and got none
 * (or fitted only part of the model on it) still serves, after one line on stderr:
 * `ENGINE_WARNING {"code":"NO_GPU"|"PARTIAL_GPU_OFFLOAD","message":…}`. A start-up failure prints one
 * `ENGINE_ERROR {"code":…,"message":…}` line to stderr and exits 3 (also for well-formed but
 * unusable values, e.g. --max-input-length above --context-size); malformed flags exit 2. SIGTERM
 * drains (in-flight requests get up to --drain-timeout-ms), frees the model and exits 0.
 */
import { parseArgs } from 'node:util';
import { LIMITS } from '../domain/endpoint-spec.js';
import { cpuBudget } from '../runtime/cpu-budget.js';
import { classifyEngineError } from './errors.js';
import { ENGINE_DEFAULTS, startEngineServer, type EngineServer, type EngineServerOptions } from './server.js';

const USAGE = `usage: npm run engine -- --model FILE.gguf [--port N] [--host H] [--max-batch-size N]
  [--context-size N] [--max-input-length N] [--add-special-tokens] [--no-skip-special-tokens]
  [--threads N] [--cpu] [--model-name S] [--drain-timeout-ms N] [--prefix-reuse] [--idle-exit-ms N]`;

class UsageError extends Error {}

function integerFlag(values: Record<string, unknown>, name: string, min: number, max: number): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const text = String(raw);
  if (!/^\d+$/.test(text)) throw new UsageError(`--${name} must be an integer (got "${text}")`);
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min || value > max)
    throw new UsageError(`--${name} must be from ${min} to ${max} (got ${text})`);
  return value;
}

function parseEngineArgs(argv: readonly string[]): EngineServerOptions & { drainTimeoutMs: number } {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        model: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'max-batch-size': { type: 'string' },
        'context-size': { type: 'string' },
        'max-input-length': { type: 'string' },
        'add-special-tokens': { type: 'boolean' },
        'no-skip-special-tokens': { type: 'boolean' },
        threads: { type: 'string' },
        cpu: { type: 'boolean' },
        'model-name': { type: 'string' },
        'drain-timeout-ms': { type: 'string' },
        'prefix-reuse': { type: 'boolean' },
        'idle-exit-ms': { type: 'string' },
      },
    });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const values = parsed.values as Record<string, unknown>;
  if (values['idle-exit-ms'] === undefined && process.env.ENGINE_IDLE_EXIT_MS) values['idle-exit-ms'] = process.env.ENGINE_IDLE_EXIT_MS;
  const idleExitMs = integerFlag(values, 'idle-exit-ms', 1, 2 ** 31 - 1);
  const model = values.model;
  if (typeof model !== 'string' || model === '') throw new UsageError('--model is required');
  const host = values.host;
  if (host !== undefined && (typeof host !== 'string' || host === '')) throw new UsageError('--host must not be empty');
  const modelName = values['model-name'];
  if (modelName !== undefined && (typeof modelName !== 'string' || modelName === ''))
    throw new UsageError('--model-name must not be empty');
  return {
    modelPath: model,
    host: host as string | undefined,
    port: integerFlag(values, 'port', 0, 65535),
    maxBatchSize: integerFlag(values, 'max-batch-size', 1, LIMITS.maxBatchSize),
    contextSize: integerFlag(values, 'context-size', 8, 2 ** 31 - 1),
    maxInputLength: integerFlag(values, 'max-input-length', 1, 2 ** 31 - 1),
    addSpecialTokens: values['add-special-tokens'] === true,
    skipSpecialTokens: values['no-skip-special-tokens'] !== true,
    reusePrefix: values['prefix-reuse'] === true,
    // Alone on the machine unless told otherwise: the cores it may use, never llama.cpp's default (which can exceed them).
    threads: integerFlag(values, 'threads', 1, 1024) ?? cpuBudget({ slots: 1 }).threads,
    gpu: values.cpu === true ? false : 'auto',
    modelName: modelName as string | undefined,
    drainTimeoutMs: integerFlag(values, 'drain-timeout-ms', 0, 2 ** 31 - 1) ?? ENGINE_DEFAULTS.drainTimeoutMs,
    ...(process.env.ENGINE_TOKEN ? { token: process.env.ENGINE_TOKEN } : {}),
    ...(idleExitMs !== undefined ? { idleExitMs } : {}),
  };
}

async function main(): Promise<void> {
  let options;
  try {
    options = parseEngineArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`engine: ${error.message}\n${USAGE}\n`);
    process.exit(2);
  }

  let server: EngineServer;
  // Set once the server runs: an idle engine stops like a signalled one.
  const running: { stop?: (why: string) => void } = {};
  if (options.idleExitMs !== undefined) {
    const idleS = Math.round(options.idleExitMs / 1000);
    options.onIdle = () => running.stop?.(`no request for ${idleS} s (its gateway is gone and none adopted it)`);
  }
  try {
    server = await startEngineServer(options);
  } catch (error) {
    const { code, message } = classifyEngineError(error);
    process.stderr.write(`ENGINE_ERROR ${JSON.stringify({ code, message })}\n`);
    process.exit(3);
  }

  let signals = 0;
  const shutdown = (why: string) => {
    signals++;
    // A second signal while draining: stop waiting for in-flight requests.
    const grace = signals === 1 ? options.drainTimeoutMs : 0;
    process.stderr.write(`[engine] ${why}: draining (up to ${grace} ms)\n`);
    server.close(grace).then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`[engine] shutdown failed: ${error instanceof Error ? error.message : String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  running.stop = shutdown;

  const uptimeMs = performance.now();
  const readyAt = performance.timeOrigin + uptimeMs;
  const { backend, gpuWanted, gpuLayers, totalLayers } = server.placement;
  const ready = {
    port: server.port,
    pid: process.pid,
    readyAt: round(readyAt),
    uptimeMs: round(uptimeMs),
    backend,
    gpuWanted,
    gpuLayers,
    totalLayers,
  };
  process.stdout.write(`ENGINE_READY ${JSON.stringify(ready)}\n`);
}

/** Three decimals: microseconds, enough for timings and short in the log. */
function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

main().catch((error: unknown) => {
  process.stderr.write(`[engine] fatal: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
