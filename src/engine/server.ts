/**
 * The inference engine of one endpoint replica: one model, one llama.cpp context with
 * `maxBatchSize` sequences, and an OpenAI-compatible HTTP API (node:http, no framework).
 *
 * Concurrency: each chat request takes a free sequence of the context (or waits FIFO for one) and
 * runs its own evaluate() loop on it; node-llama-cpp collects the pending evaluations of all
 * sequences of a context into one llama_decode per step, so concurrent requests decode together.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename } from 'node:path';
import { getLlama, LlamaLogLevel, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel } from 'node-llama-cpp';
import { LIMITS } from '../domain/endpoint-spec.js';
import { checkTokenLimits, invalidRequest, parseChatRequest, type ChatRequest, type RequestError } from '../domain/chat-request.js';
import { classifyEngineError, EngineStartError } from './errors.js';
import { generate, type FinishReason, type GenerationParams } from './generation.js';
import { BodyTooLargeError, MAX_BODY_BYTES, readBody, sendError, sendJson, serverError } from './http.js';
import { errorBody } from '../domain/openai-errors.js';
import { assertCompleteGguf } from './model-file.js';
import { ChatPromptRenderer, ChatTemplateError, type RenderedPrompt } from './prompt.js';
import type { Segment } from './reasoning.js';
import { QueueAbortedError, SequencePool } from './scheduler.js';

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
};

export type EngineServer = {
  url: string;
  port: number;
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

const SHUTDOWN = Symbol('shutdown');

type ResolvedOptions = Required<Omit<EngineServerOptions, 'llama' | 'log' | 'threads'>> & {
  threads: number | undefined;
  /** Sequences decoded at once: maxBatchSize, up to MAX_SEQUENCES. */
  sequences: number;
};

function invalidArgument(message: string): EngineStartError {
  return new EngineStartError('INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR', message);
}

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
    threads,
    gpu: options.gpu ?? 'auto',
    modelName: options.modelName ?? basename(options.modelPath),
    drainTimeoutMs: checkInteger('drainTimeoutMs', options.drainTimeoutMs ?? ENGINE_DEFAULTS.drainTimeoutMs, 0, 2 ** 31 - 1),
  };
}

type Engine = {
  llama: Llama;
  ownsLlama: boolean;
  model: LlamaModel;
  context: LlamaContext;
  renderer: ChatPromptRenderer;
  pool: SequencePool<LlamaContextSequence>;
};

/**
 * When to decode the batch of tokens that sequences have queued. node-llama-cpp's default waits one
 * event-loop turn (setImmediate) so that other sequences can add theirs, unless every sequence of
 * the context has one queued. With fewer requests than sequences (one request: always), every
 * token then waits a turn for sequences that nobody uses: about a tenth of a decode step of the
 * tiny model. Here the batch goes at once when every sequence a request holds has queued its
 * tokens, and waits the turn, as before, while some holder has not (it may be about to).
 * `_queuedDecodeSequenceIds` is node-llama-cpp's own count (internal, 3.x); without it, the default.
 */
function dispatchWhenAllQueued(context: () => LlamaContext | undefined, active: () => number): (dispatch: () => void) => void {
  return (dispatch) => {
    const queued = (context() as unknown as { _queuedDecodeSequenceIds?: { size: number } } | undefined)?._queuedDecodeSequenceIds?.size;
    if (queued !== undefined && queued >= active()) dispatch();
    else setImmediate(dispatch);
  };
}

/** Loads the model and creates its context; on failure frees what was created and throws EngineStartError. */
async function loadEngine(options: ResolvedOptions, llamaOption: Llama | undefined, log: (line: string) => void): Promise<Engine> {
  const logLines: string[] = [];
  let llama = llamaOption;
  let model: LlamaModel | undefined;
  try {
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
    let pool: SequencePool<LlamaContextSequence> | undefined;
    const context: LlamaContext = await model.createContext({
      contextSize: options.contextSize,
      sequences: options.sequences,
      threads: options.threads,
      // Exactly the configured size or a clear failure, never a silently smaller context.
      failedCreationRemedy: false,
      batching: {
        dispatchSchedule: dispatchWhenAllQueued(
          () => context,
          () => pool?.active ?? 0,
        ),
      },
    });
    const sequences = Array.from({ length: options.sequences }, () => context.getSequence());
    pool = new SequencePool(sequences);
    return { llama, ownsLlama: llamaOption == null, model, context, renderer, pool };
  } catch (error) {
    if (!(error instanceof EngineStartError)) await delay(LOG_FLUSH_MS);
    const classified = classifyEngineError(error, logLines);
    if (llama != null && llamaOption == null) await settleWithin(llama.dispose(), FAILED_START_DISPOSE_TIMEOUT_MS, 'llama.dispose()', log);
    else if (model != null) await settleWithin(model.dispose(), FAILED_START_DISPOSE_TIMEOUT_MS, 'model.dispose()', log);
    throw new EngineStartError(classified.code, classified.message, { cause: error });
  }
}

// ---------------------------------------------------------------------------------------------

export async function startEngineServer(options: EngineServerOptions): Promise<EngineServer> {
  const config = resolveOptions(options);
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const engine = await loadEngine(config, options.llama, log);
  const { model, renderer, pool } = engine;
  const createdAt = Math.floor(Date.now() / 1000);

  let totalRequests = 0;
  /** Tokens generated since start, cancelled generations included (throughput metrics). */
  let totalCompletionTokens = 0;
  let lastRequestAt: Date | null = null;
  let draining = false;
  /** Requests past the draining check; close() waits for them. */
  const inflight = new Set<AbortController>();
  let onInflightEmpty: (() => void) | null = null;

  function health(status: 'ok' | 'draining') {
    return {
      status,
      model: config.modelName,
      maxBatchSize: config.maxBatchSize,
      sequences: config.sequences,
      contextSize: config.contextSize,
      active: pool.active,
      queued: pool.queued,
      totalRequests,
      totalCompletionTokens,
      lastRequestAt: lastRequestAt?.toISOString() ?? null,
    };
  }

  /** Validates the request and its prompt length; returns the generation parameters or an error. */
  function prepare(request: ChatRequest): { params: GenerationParams; prompt: RenderedPrompt } | RequestError {
    let prompt: RenderedPrompt;
    try {
      prompt = renderer.render(request.messages, request.chatTemplateKwargs);
    } catch (error) {
      if (error instanceof ChatTemplateError) return invalidRequest(error.message, 'messages', 'chat_template_error');
      throw error;
    }
    const promptTokens = prompt.tokens.length;
    const overLimit = checkTokenLimits(promptTokens, request, config);
    if (overLimit) return overLimit;
    return {
      prompt,
      params: {
        promptTokens: prompt.tokens,
        maxTokens: request.maxTokens ?? config.contextSize - promptTokens,
        temperature: request.temperature,
        topP: request.topP,
        seed: request.seed,
        stop: request.stop,
        reasoning: { enabled: renderer.supportsThinking, startInReasoning: prompt.opensThinkBlock },
      },
    };
  }

  async function runGeneration(
    sequence: LlamaContextSequence,
    params: GenerationParams,
    onSegment: (segment: Segment) => void,
    signal: AbortSignal,
  ) {
    return generate(
      sequence,
      model,
      params,
      { skipSpecialTokens: config.skipSpecialTokens, thinkTagTokens: renderer.thinkTagTokens },
      {
        onSegment,
        onToken: () => {
          totalCompletionTokens++;
        },
      },
      signal,
    );
  }

  /** Reads and checks a chat-completion body; answers the error itself and returns undefined when it is refused. */
  async function readChatRequest(req: IncomingMessage, res: ServerResponse): Promise<ChatRequest | undefined> {
    let raw: string;
    try {
      raw = await readBody(req);
    } catch (error) {
      if (error instanceof BodyTooLargeError) {
        sendError(
          res,
          { ...invalidRequest(`The request body is larger than ${MAX_BODY_BYTES} bytes`, null), status: 413 },
          { Connection: 'close' },
        );
        return undefined;
      }
      throw error;
    }
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      sendError(res, invalidRequest('The request body is not valid JSON', null, 'invalid_json'));
      return undefined;
    }
    const parsed = parseChatRequest(body);
    if (!parsed.ok) {
      sendError(res, parsed.error);
      return undefined;
    }
    return parsed.request;
  }

  /**
   * POST /tokenize (vLLM's chat form): renders the messages with the chat
   * template and counts the prompt's tokens, without taking a sequence, so
   * that the gateway can refuse a prompt over the limits before the request
   * waits for a slot. Answers `{ count, max_model_len, max_input_length }`,
   * or the 400 the completion would get (a template that cannot render).
   */
  async function handleTokenize(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const controller = new AbortController();
    inflight.add(controller);
    try {
      const request = await readChatRequest(req, res);
      if (!request) return;
      let prompt: RenderedPrompt;
      try {
        prompt = renderer.render(request.messages, request.chatTemplateKwargs);
      } catch (error) {
        if (error instanceof ChatTemplateError) return sendError(res, invalidRequest(error.message, 'messages', 'chat_template_error'));
        throw error;
      }
      sendJson(res, 200, { count: prompt.tokens.length, max_model_len: config.contextSize, max_input_length: config.maxInputLength });
    } finally {
      inflight.delete(controller);
      if (inflight.size === 0) onInflightEmpty?.();
    }
  }

  async function handleChat(req: IncomingMessage, res: ServerResponse): Promise<void> {
    totalRequests++;
    lastRequestAt = new Date();
    const controller = new AbortController();
    // 'close' before the response finished = the client went away: cancel at once (queued or not).
    res.on('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    // Tracked from the first byte, so close() never frees the model under a request still reading its body.
    inflight.add(controller);
    try {
      const request = await readChatRequest(req, res);
      if (!request) return;
      // Every check runs here, before the request waits for a sequence: a bad request is refused at once, however busy.
      const prepared = prepare(request);
      if ('status' in prepared) return sendError(res, prepared);
      const { params } = prepared;
      const promptTokens = params.promptTokens.length;

      let lease;
      try {
        lease = await pool.acquire(controller.signal);
      } catch (error) {
        if (error instanceof QueueAbortedError) {
          if (controller.signal.reason === SHUTDOWN)
            sendError(res, serverError(503, 'The engine is shutting down', 'engine_shutting_down'), { Connection: 'close' });
          return;
        }
        throw error;
      }
      try {
        if (request.stream) await streamCompletion(res, request, params, lease.item, controller.signal, promptTokens);
        else await completeOnce(res, params, lease.item, controller.signal, promptTokens);
      } finally {
        lease.release();
      }
    } finally {
      inflight.delete(controller);
      if (inflight.size === 0) onInflightEmpty?.();
    }
  }

  async function completeOnce(
    res: ServerResponse,
    params: GenerationParams,
    sequence: LlamaContextSequence,
    signal: AbortSignal,
    promptTokens: number,
  ) {
    let content = '';
    let reasoning = '';
    const result = await runGeneration(
      sequence,
      params,
      (segment) => {
        if (segment.channel === 'reasoning') reasoning += segment.text;
        else content += segment.text;
      },
      signal,
    );
    if (result.finishReason == null) {
      if (signal.reason === SHUTDOWN)
        sendError(res, serverError(503, 'The engine is shutting down', 'engine_shutting_down'), { Connection: 'close' });
      return;
    }
    sendJson(res, 200, {
      id: `chatcmpl-${randomUUID().replaceAll('-', '')}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: config.modelName,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content, ...(reasoning !== '' ? { reasoning_content: reasoning } : {}) },
          finish_reason: result.finishReason,
        },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: result.completionTokens,
        total_tokens: promptTokens + result.completionTokens,
      },
    });
  }

  async function streamCompletion(
    res: ServerResponse,
    request: ChatRequest,
    params: GenerationParams,
    sequence: LlamaContextSequence,
    signal: AbortSignal,
    promptTokens: number,
  ) {
    if (res.destroyed) return;
    const id = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
    const created = Math.floor(Date.now() / 1000);
    // OpenAI sends "usage": null on every chunk but the last when usage was asked for.
    const usageField = request.includeUsage ? { usage: null } : {};
    const write = (data: unknown) => {
      if (!res.destroyed) res.write(`data: ${JSON.stringify(data)}\n\n`);
    };
    const chunk = (delta: Record<string, string>, finishReason: FinishReason | null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model: config.modelName,
      choices: [{ index: 0, delta, finish_reason: finishReason }],
      ...usageField,
    });

    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache',
      Connection: 'keep-alive',
      // Ask reverse proxies not to buffer the stream.
      'X-Accel-Buffering': 'no',
    });
    // Each token is a tiny write: send it now rather than coalescing (Nagle).
    res.socket?.setNoDelay(true);
    write(chunk({ role: 'assistant', content: '' }, null));

    let result;
    try {
      result = await runGeneration(
        sequence,
        params,
        (segment) => write(chunk(segment.channel === 'reasoning' ? { reasoning_content: segment.text } : { content: segment.text }, null)),
        signal,
      );
    } catch (error) {
      // Headers are sent: report in-stream, as OpenAI-compatible servers do.
      log(`[engine] generation failed: ${error instanceof Error ? error.message : String(error)}`);
      write(errorBody(serverError(500, 'The generation failed', 'generation_failed')));
      if (!res.destroyed) res.end('data: [DONE]\n\n');
      return;
    }
    if (result.finishReason == null) {
      if (signal.reason === SHUTDOWN && !res.destroyed) {
        write(errorBody(serverError(503, 'The engine is shutting down', 'engine_shutting_down')));
        res.end('data: [DONE]\n\n');
      }
      return;
    }
    write(chunk({}, result.finishReason));
    if (request.includeUsage) {
      write({
        id,
        object: 'chat.completion.chunk',
        created,
        model: config.modelName,
        choices: [],
        usage: {
          prompt_tokens: promptTokens,
          completion_tokens: result.completionTokens,
          total_tokens: promptTokens + result.completionTokens,
        },
      });
    }
    res.end('data: [DONE]\n\n');
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/health') {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return sendError(res, { ...invalidRequest('Use GET /health', null, 'method_not_allowed'), status: 405 });
      return sendJson(res, draining ? 503 : 200, health(draining ? 'draining' : 'ok'));
    }
    if (path === '/v1/models') {
      if (req.method !== 'GET') return sendError(res, { ...invalidRequest('Use GET /v1/models', null, 'method_not_allowed'), status: 405 });
      return sendJson(res, 200, {
        object: 'list',
        data: [{ id: config.modelName, object: 'model', created: createdAt, owned_by: 'engine', max_model_len: config.contextSize }],
      });
    }
    if (path === '/v1/chat/completions') {
      if (req.method !== 'POST')
        return sendError(res, { ...invalidRequest('Use POST /v1/chat/completions', null, 'method_not_allowed'), status: 405 });
      if (draining) return sendError(res, serverError(503, 'The engine is shutting down', 'engine_shutting_down'), { Connection: 'close' });
      return handleChat(req, res);
    }
    if (path === '/tokenize') {
      if (req.method !== 'POST')
        return sendError(res, { ...invalidRequest('Use POST /tokenize', null, 'method_not_allowed'), status: 405 });
      if (draining) return sendError(res, serverError(503, 'The engine is shutting down', 'engine_shutting_down'), { Connection: 'close' });
      return handleTokenize(req, res);
    }
    return sendError(res, {
      status: 404,
      message: `No route for ${req.method} ${path}`,
      type: 'not_found_error',
      param: null,
      code: 'not_found',
    });
  }

  const server: Server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      log(`[engine] request failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      if (!res.headersSent) sendError(res, serverError(500, 'Internal engine error', 'internal_error'));
      else res.destroy();
    });
  });

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
    draining = true;
    const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    if (inflight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const drained = new Promise<void>((resolve) => {
        onInflightEmpty = resolve;
      });
      const graceOver = new Promise<void>((resolve) => {
        endGrace = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      await Promise.race([drained, graceOver]);
      clearTimeout(timer);
      if (inflight.size > 0) {
        // Grace is over: cancel what is left (queued and generating) and wait for the loops to stop.
        for (const controller of inflight) controller.abort(SHUTDOWN);
        await drained;
      }
    }
    server.closeAllConnections();
    await serverClosed;
    await disposeEngine(engine, log);
  }

  return {
    url: `http://${urlHost}:${port}`,
    port,
    close: (graceMs = config.drainTimeoutMs) => {
      if (closing == null) closing = close(graceMs);
      else setTimeout(() => endGrace?.(), graceMs).unref();
      return closing;
    },
  };
}

async function disposeEngine(engine: Engine, log: (line: string) => void): Promise<void> {
  await settleWithin(engine.context.dispose(), DISPOSE_TIMEOUT_MS, 'context.dispose()', log);
  await settleWithin(engine.model.dispose(), DISPOSE_TIMEOUT_MS, 'model.dispose()', log);
  if (engine.ownsLlama) await settleWithin(engine.llama.dispose(), DISPOSE_TIMEOUT_MS, 'llama.dispose()', log);
}
