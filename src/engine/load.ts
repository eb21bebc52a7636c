/**
 * Loading and freeing what an engine runs on: the Llama backend (unless the caller lends one),
 * the model, its chat template renderer, and one context of `sequences` sequences. Start-up
 * failures are classified into EngineStartError with llama.cpp's own log lines.
 */
import { getLlama, LlamaLogLevel, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel } from 'node-llama-cpp';
import { rememberBinaryTests } from './binary-test-cache.js';
import { classifyEngineError, EngineStartError } from './errors.js';
import { assertCompleteGguf } from './model-file.js';
import { ChatPromptRenderer } from './prompt.js';
import { dispatchWhenAllQueued } from './scheduler.js';

const LOG_LINES_KEPT = 50;
/** llama.cpp log lines reach JavaScript asynchronously, after the failing call has returned. */
const LOG_FLUSH_MS = 100;
/** Upper bound on freeing native resources: a stuck dispose must not keep a stopping process alive. */
const DISPOSE_TIMEOUT_MS = 5_000;
/**
 * After a failed start, shorter: node-llama-cpp 3.21 can leave a dispose guard behind when a native
 * model load fails (see model-file.ts), and the error report should not wait long for it.
 */
const FAILED_START_DISPOSE_TIMEOUT_MS = 1_000;

export type LoadOptions = {
  modelPath: string;
  contextSize: number;
  sequences: number;
  threads: number | undefined;
  gpu: 'auto' | false;
  addSpecialTokens: boolean;
};

export type LoadedEngine = {
  llama: Llama;
  ownsLlama: boolean;
  model: LlamaModel;
  context: LlamaContext;
  sequences: LlamaContextSequence[];
  renderer: ChatPromptRenderer;
  placement: EnginePlacement;
};

/**
 * What the engine runs on, as /health and the ENGINE_READY line report it. `backend` is the
 * llama.cpp backend node-llama-cpp loaded (its `llama.gpu`, false being 'cpu'); `gpuLayers` the
 * layers the model put on that GPU (0 on the CPU) out of `totalLayers`, which counts as llama.cpp
 * does: the GGUF's `block_count` plus the output layer (a fully offloaded model has
 * gpuLayers == totalLayers). `gpuWanted`: the engine was started without --cpu.
 */
export type EnginePlacement = {
  backend: 'cuda' | 'vulkan' | 'metal' | 'cpu';
  gpuWanted: boolean;
  gpuLayers: number;
  totalLayers: number;
  /** The GPU devices llama.cpp sees (e.g. "NVIDIA H100 80GB HBM3"); empty on the CPU. */
  gpuDevices: string[];
};

/** One warning line in the engine's log: `ENGINE_WARNING {"code":…,"message":…}` (the engine still serves). */
export type EngineWarning = { code: 'NO_GPU' | 'PARTIAL_GPU_OFFLOAD'; message: string };

/** The warnings a placement deserves: a GPU was wanted and none is used, or the model only partly fits on it. */
export function placementWarnings(placement: EnginePlacement): EngineWarning[] {
  if (placement.gpuWanted && placement.backend === 'cpu') {
    return [
      {
        code: 'NO_GPU',
        message:
          'A GPU was wanted (the engine was started without --cpu) but llama.cpp found no usable GPU backend here (no CUDA, Vulkan or Metal device, or its prebuilt GPU binary did not load: see the lines above); serving on the CPU',
      },
    ];
  }
  if (placement.backend !== 'cpu' && placement.gpuLayers < placement.totalLayers) {
    return [
      {
        code: 'PARTIAL_GPU_OFFLOAD',
        message: `Only ${placement.gpuLayers} of the model's ${placement.totalLayers} layers are on the GPU (${placement.backend}); the rest run on the CPU`,
      },
    ];
  }
  return [];
}

/** The backend, layers and devices of a loaded model. */
async function placementOf(llama: Llama, model: LlamaModel, gpu: 'auto' | false): Promise<EnginePlacement> {
  const backend = llama.gpu === false ? 'cpu' : llama.gpu;
  return {
    backend,
    gpuWanted: gpu !== false,
    gpuLayers: backend === 'cpu' ? 0 : model.gpuLayers,
    totalLayers: model.fileInsights.totalLayers,
    gpuDevices: backend === 'cpu' ? [] : await llama.getGpuDeviceNames().catch(() => []),
  };
}

export function invalidArgument(message: string): EngineStartError {
  return new EngineStartError('INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR', message);
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves when `promise` settles or after `ms`, whichever is first; reports a timeout. */
async function settleWithin(promise: Promise<unknown>, ms: number, what: string, log: (line: string) => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  // A referenced timer on purpose: a dispose stuck on a promise that nothing native backs would
  // otherwise let the event loop drain and the process exit 0 halfway through.
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  const result = await Promise.race([
    promise.then(
      () => 'done',
      () => 'done',
    ),
    timedOut,
  ]);
  clearTimeout(timer);
  if (result === 'timeout') log(`[engine] ${what} did not finish within ${ms} ms; continuing`);
}

/**
 * Loads the model and creates its context; on failure frees what was created and throws
 * EngineStartError. `active` counts the sequences held by requests (the batch dispatch reads it).
 */
export async function loadEngine(
  options: LoadOptions,
  llamaOption: Llama | undefined,
  log: (line: string) => void,
  active: () => number,
): Promise<LoadedEngine> {
  const logLines: string[] = [];
  let llama = llamaOption;
  let model: LlamaModel | undefined;
  try {
    if (!llama) rememberBinaryTests(process.env, log);
    llama ??= await getLlama({
      gpu: options.gpu,
      // Never compile llama.cpp on a replica: use a prebuilt binary (GPU if it works, else CPU).
      build: 'never',
      progressLogs: false,
      logLevel: LlamaLogLevel.warn,
      logger: (level, message) => {
        const line = `[llama ${level}] ${message.trimEnd()}`;
        logLines.push(line);
        if (logLines.length > LOG_LINES_KEPT) logLines.shift();
        log(line);
      },
    });
    await assertCompleteGguf(llama, options.modelPath);
    model = await llama.loadModel({ modelPath: options.modelPath });
    if (options.contextSize > model.trainContextSize) {
      throw invalidArgument(
        `contextSize ${options.contextSize} is larger than the model's training context length (${model.trainContextSize} tokens)`,
      );
    }
    const renderer = new ChatPromptRenderer(model, { addSpecialTokens: options.addSpecialTokens });
    const context: LlamaContext = await model.createContext({
      contextSize: options.contextSize,
      sequences: options.sequences,
      threads: options.threads,
      // Exactly the configured size or a clear failure, never a silently smaller context.
      failedCreationRemedy: false,
      batching: { dispatchSchedule: dispatchWhenAllQueued(() => context, active) },
    });
    const sequences = Array.from({ length: options.sequences }, () => context.getSequence());
    const placement = await placementOf(llama, model, options.gpu);
    return { llama, ownsLlama: llamaOption == null, model, context, sequences, renderer, placement };
  } catch (error) {
    if (!(error instanceof EngineStartError)) await delay(LOG_FLUSH_MS);
    const classified = classifyEngineError(error, logLines);
    if (llama != null && llamaOption == null) await settleWithin(llama.dispose(), FAILED_START_DISPOSE_TIMEOUT_MS, 'llama.dispose()', log);
    else if (model != null) await settleWithin(model.dispose(), FAILED_START_DISPOSE_TIMEOUT_MS, 'model.dispose()', log);
    throw new EngineStartError(classified.code, classified.message, { cause: error });
  }
}

/** Frees the context, the model and (if owned) the Llama, each within a bounded time. */
export async function disposeEngine(engine: LoadedEngine, log: (line: string) => void): Promise<void> {
  await settleWithin(engine.context.dispose(), DISPOSE_TIMEOUT_MS, 'context.dispose()', log);
  await settleWithin(engine.model.dispose(), DISPOSE_TIMEOUT_MS, 'model.dispose()', log);
  if (engine.ownsLlama) await settleWithin(engine.llama.dispose(), DISPOSE_TIMEOUT_MS, 'llama.dispose()', log);
}
