/**
 * The inference engine of one endpoint replica: one model, one llama.cpp context with
 * `maxBatchSize` sequences, and an OpenAI-compatible HTTP API (node:http, no framework).
 *
 * Concurrency: each chat request takes a free sequence of the context (or waits FIFO for one) and
 * runs its own evaluate() loop on it; node-llama-cpp collects the pending evaluations of all
 * sequences of a context into one llama_decode per step, so concurrent requests decode together.
 *
 * Modules: load.ts (model, context, sequences), scheduler.ts (sequences handed out FIFO, request
 * checks, generation), routes.ts (HTTP), format.ts (the OpenAI wire format); this file resolves
 * the options, listens, and drains on close().
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename } from 'node:path';
import type { Llama } from 'node-llama-cpp';
import { DEFAULTS } from '../defaults.js';
import { LIMITS } from '../domain/endpoint-spec.js';
import { EngineStartError } from './errors.js';
import { disposeEngine, invalidArgument, loadEngine, placementWarnings, type EnginePlacement, type EngineWarning } from './load.js';
import { createRoutes, SHUTDOWN } from './routes.js';
import { Scheduler } from './scheduler.js';

export type EngineServerOptions = {
  modelPath: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
  /** Concurrent requests: up to MAX_SEQUENCES decode at once in the one context, the rest wait in the queue. Default 8, at most 1024. */
  maxBatchSize?: number;
  /** Tokens per sequence: prompt + completion (the endpoint's max_token_count). Default 4096. */
  contextSize?: number;
  /** Most prompt tokens. Default contextSize. */
  maxInputLength?: number;
  /** Prepend BOS to the rendered prompt when the model uses one. Default false. */
  addSpecialTokens?: boolean;
  /** Leave control tokens out of the output text. Default true. */
  skipSpecialTokens?: boolean;
  /**
   * Keep the KV cache of the prompt prefix a sequence already holds from its previous request
   * (evaluate only the new tokens), as llama.cpp's server does. Faster, but the first token's
   * logits then come from a different batch shape than a fresh evaluation's, so a seeded or
   * greedy answer can part from the fresh one at a near-tie. Default false.
   */
  reusePrefix?: boolean;
  /** CPU threads for evaluation. Default: node-llama-cpp's choice. */
  threads?: number;
  /** 'auto' uses CUDA/Vulkan/Metal when a prebuilt binary works here; false forces the CPU. Default 'auto'. */
  gpu?: 'auto' | false;
  /** Model id reported by the API. Default: the file's basename. */
  modelName?: string;
  /** Default grace period of close(). Default 10 000 ms. */
  drainTimeoutMs?: number;
  /**
   * An existing Llama instance to load the model with (in-process use such as tests: llama.cpp's
   * backend is process-global, so a process should hold one). close() does not dispose it.
   */
  llama?: Llama;
  /** Receives llama.cpp warning/error log lines. Default: standard error. */
  log?: (line: string) => void;
  /**
   * When set, every request must carry `Authorization: Bearer <token>` (the gateway passes one
   * per engine at spawn); others get 401. Default: none (an engine run by hand answers anyone).
   */
  token?: string;
  /**
   * When set, `onIdle` is called once no request has come for this long (its gateway is gone and
   * none adopted it: the gateway polls /health of every replica it serves). Default: never.
   */
  idleExitMs?: number;
  onIdle?: () => void;
};

export type EngineServer = {
  url: string;
  port: number;
  /** What the engine runs on (backend, layers on the GPU), as /health reports it. */
  placement: EnginePlacement;
  /** What was logged as `ENGINE_WARNING {…}` at start (a GPU wanted and none used, a partial offload). */
  warnings: EngineWarning[];
  /**
   * Stops accepting requests, lets in-flight ones finish for up to `graceMs` (default
   * drainTimeoutMs), cancels the rest, then frees the context, model and (if owned) llama.
   */
  close(graceMs?: number): Promise<void>;
};

export const ENGINE_DEFAULTS = {
  host: '127.0.0.1',
  maxBatchSize: 8,
  contextSize: 4096,
  drainTimeoutMs: 10_000,
} as const;

/**
 * llama.cpp's LLAMA_MAX_SEQ: sequences one context decodes at once. A larger
 * `maxBatchSize` (up to the endpoint spec's limit) is accepted; the requests
 * past this many wait in the engine's queue for a sequence.
 */
export const MAX_SEQUENCES = 256;

type ResolvedOptions = Required<Omit<EngineServerOptions, 'llama' | 'log' | 'threads' | 'token' | 'idleExitMs' | 'onIdle'>> & {
  threads: number | undefined;
  /** Sequences decoded at once: maxBatchSize, up to MAX_SEQUENCES. */
  sequences: number;
};

function checkInteger(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidArgument(`${name} must be an integer from ${min} to ${max} (got ${value})`);
  }
  return value;
}

function resolveOptions(options: EngineServerOptions): ResolvedOptions {
  if (typeof options.modelPath !== 'string' || options.modelPath === '') throw invalidArgument('modelPath is required');
  const contextSize = checkInteger('contextSize', options.contextSize ?? ENGINE_DEFAULTS.contextSize, 8, 2 ** 31 - 1);
  const maxBatchSize = checkInteger('maxBatchSize', options.maxBatchSize ?? ENGINE_DEFAULTS.maxBatchSize, 1, LIMITS.maxBatchSize);
  const sequences = Math.min(maxBatchSize, MAX_SEQUENCES);
  if (contextSize * sequences > 2 ** 31 - 1) {
    throw invalidArgument(`contextSize x sequences must stay below 2^31 tokens (got ${contextSize} x ${sequences})`);
  }
  const threads = options.threads === undefined ? undefined : checkInteger('threads', options.threads, 1, 1024);
  return {
    modelPath: options.modelPath,
    host: options.host ?? ENGINE_DEFAULTS.host,
    port: checkInteger('port', options.port ?? 0, 0, 65535),
    maxBatchSize,
    sequences,
    contextSize,
    maxInputLength: checkInteger('maxInputLength', options.maxInputLength ?? contextSize, 1, contextSize),
    addSpecialTokens: options.addSpecialTokens ?? false,
    skipSpecialTokens: options.skipSpecialTokens ?? true,
    reusePrefix: options.reusePrefix ?? false,
    threads,
    gpu: options.gpu ?? 'auto',
    modelName: options.modelName ?? basename(options.modelPath),
    drainTimeoutMs: checkInteger('drainTimeoutMs', options.drainTimeoutMs ?? ENGINE_DEFAULTS.drainTimeoutMs, 0, 2 ** 31 - 1),
  };
}

export async function startEngineServer(options: EngineServerOptions): Promise<EngineServer> {
  const config = resolveOptions(options);
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  // The batch dispatch (created with the context) reads how many sequences requests hold.
  const held: { scheduler?: Scheduler } = {};
  const engine = await loadEngine(config, options.llama, log, () => held.scheduler?.active ?? 0);
  const scheduler = (held.scheduler = new Scheduler(engine.model, engine.renderer, engine.sequences, config, log));
  // Never a silent fall-back to the CPU: one line the runtime's log reader (and a person) can find.
  const warnings = placementWarnings(engine.placement);
  for (const warning of warnings) log(`ENGINE_WARNING ${JSON.stringify(warning)}`);
  let lastContactAt = performance.now();
  const routes = createRoutes({ ...config, placement: engine.placement }, scheduler, log, {
    ...(options.token ? { token: options.token } : {}),
    onContact: () => void (lastContactAt = performance.now()),
  });
  const { inflight } = routes;
  const server: Server = createServer(routes.handle);
  // Idle connections are kept (and the gateway told so): its health checks and requests reuse them.
  server.keepAliveTimeout = DEFAULTS.engineKeepAliveMs;
  server.headersTimeout = DEFAULTS.engineKeepAliveMs + 1000;
  const idleExitMs = options.idleExitMs;
  const idleWatch =
    idleExitMs === undefined
      ? undefined
      : setInterval(
          () => {
            if (inflight.size > 0 || performance.now() - lastContactAt < idleExitMs) return;
            clearInterval(idleWatch);
            options.onIdle?.();
          },
          Math.max(10, Math.min(idleExitMs / 4, 5_000)),
        ).unref();

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    await disposeEngine(engine, log);
    const code = (error as { code?: string }).code;
    throw new EngineStartError(
      'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR',
      `Cannot listen on ${config.host}:${config.port}${code ? ` (${code})` : ''}`,
      { cause: error },
    );
  }
  const port = (server.address() as AddressInfo).port;
  const urlHost = config.host.includes(':') ? `[${config.host}]` : config.host;

  let closing: Promise<void> | null = null;
  /** Ends the grace period early (a later close() call with a shorter grace). */
  let endGrace: (() => void) | null = null;
  async function close(graceMs: number): Promise<void> {
    clearInterval(idleWatch);
    routes.drain();
    const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    if (inflight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<void>((resolve) => {
        endGrace = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      await Promise.race([inflight.whenEmpty(), graceOver]);
      clearTimeout(timer);
      if (inflight.size > 0) {
        // Grace is over: cancel what is left (queued and generating) and wait for the loops to stop.
        inflight.abortAll(SHUTDOWN);
        await inflight.whenEmpty();
      }
    }
    server.closeAllConnections();
    await serverClosed;
    await disposeEngine(engine, log);
  }

  return {
    url: `http://${urlHost}:${port}`,
    port,
    placement: engine.placement,
    warnings,
    close: (graceMs = config.drainTimeoutMs) => {
      if (closing == null) closing = close(graceMs);
      else setTimeout(() => endGrace?.(), graceMs).unref();
      return closing;
    },
  };
}
