/**
 * The engine's HTTP API (node:http, no framework): GET /health, GET /v1/models,
 * POST /v1/chat/completions and /v1/completions (JSON or SSE: answers.ts), and POST /tokenize
 * and /detokenize. Requests in flight are tracked so
 * that a stopping server can drain them, then cancel what is left.
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseChatRequest, type ChatRequest, type GenerationRequest, type RequestError } from '../domain/chat-request.js';
import { invalidRequest, refusalOf, type EngineError } from './openai-errors.js';
import { parseCompletionRequest, type CompletionRequest } from '../domain/completion-request.js';
import { isObject } from '../domain/field-checker.js';
import type { Result } from '../domain/result.js';
import { answerStreamed, answerWhole, CHAT_FORMAT, SHUTDOWN, shuttingDown, TEXT_FORMAT, type AnswerFormat } from './answers.js';
import { unixSeconds } from './format.js';
import { BodyTooLargeError, MAX_BODY_BYTES, readBody, sendError, sendJson, serverError } from './http.js';
import type { EnginePlacement } from './load.js';
import { QueueAbortedError, type PreparedRequest, type Scheduler } from './scheduler.js';

export { SHUTDOWN } from './answers.js';

export type RouteConfig = {
  modelName: string;
  maxBatchSize: number;
  sequences: number;
  contextSize: number;
  maxInputLength: number;
  /** What the engine runs on; /health reports it (backend, gpuWanted, gpuLayers, totalLayers, gpuDevices). */
  placement?: EnginePlacement;
};

/** Requests past the draining check, each with the controller that cancels it. */
export class Inflight {
  private readonly controllers = new Set<AbortController>();
  private emptyListeners: Array<() => void> = [];

  get size(): number {
    return this.controllers.size;
  }

  add(controller: AbortController): void {
    this.controllers.add(controller);
  }

  delete(controller: AbortController): void {
    this.controllers.delete(controller);
    if (this.controllers.size === 0 && this.emptyListeners.length > 0) {
      const listeners = this.emptyListeners;
      this.emptyListeners = [];
      for (const listener of listeners) listener();
    }
  }

  /** Resolves once no request is in flight. */
  whenEmpty(): Promise<void> {
    if (this.controllers.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.emptyListeners.push(resolve));
  }

  abortAll(reason: unknown): void {
    for (const controller of this.controllers) controller.abort(reason);
  }
}

/**
 * `work`, or SHUTDOWN thrown as soon as `signal` is aborted with it. Another abort (the client
 * went away) is left to `work`, which sees the closed connection itself.
 */
function unlessShutDown<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.reason === SHUTDOWN) return Promise.reject(SHUTDOWN);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      if (signal.reason === SHUTDOWN) reject(SHUTDOWN);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    // Settling after the SHUTDOWN rejection is a no-op, and a later failure of `work` is handled here.
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

const methodNotAllowed = (use: string) => ({ ...invalidRequest(`Use ${use}`, null, 'method_not_allowed'), status: 405 });

/** Who may call: the gateway's per-engine token (when set), and a note of each accepted request. */
export type RouteAccess = { token?: string; onContact: () => void };

/** Whether `authorization` is `Bearer <token>`, compared in constant time. */
export function carriesToken(authorization: string | undefined, token: string): boolean {
  const expected = Buffer.from(`Bearer ${token}`);
  const given = Buffer.from(authorization ?? '');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export function createRoutes(config: RouteConfig, scheduler: Scheduler, log: (line: string) => void, access: RouteAccess) {
  const createdAt = unixSeconds();
  const inflight = new Inflight();
  let draining = false;
  let totalRequests = 0;
  let lastRequestAt: Date | null = null;

  function health(status: 'ok' | 'draining') {
    return {
      status,
      model: config.modelName,
      maxBatchSize: config.maxBatchSize,
      sequences: config.sequences,
      contextSize: config.contextSize,
      active: scheduler.active,
      queued: scheduler.queued,
      totalRequests,
      totalCompletionTokens: scheduler.totalCompletionTokens,
      lastRequestAt: lastRequestAt?.toISOString() ?? null,
      ...config.placement,
    };
  }

  /**
   * Reads a JSON body; answers the error itself and returns undefined when it is refused. A
   * shutdown (`signal` aborted with SHUTDOWN) stops the wait at once with a 503: close() waits for
   * the requests in flight, and a client still sending its body (slowly, or never finishing it)
   * would otherwise hold close() past its grace for as long as it likes.
   */
  async function readJson(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<{ body: unknown } | undefined> {
    let raw: string;
    try {
      raw = await unlessShutDown(readBody(req, res), signal);
    } catch (error) {
      if (error === SHUTDOWN) {
        // Connection: close: the rest of the body is never read, so the connection cannot serve another request.
        sendError(res, shuttingDown(), { Connection: 'close' });
        return undefined;
      }
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
    try {
      return { body: JSON.parse(raw) as unknown };
    } catch {
      sendError(res, invalidRequest('The request body is not valid JSON', null, 'invalid_json'));
      return undefined;
    }
  }

  /** The body read by `parse`, or undefined once its 400 is answered. */
  function parsedOrRefused<R>(parse: (body: unknown) => Result<R, RequestError>, body: unknown, res: ServerResponse): R | undefined {
    const parsed = parse(body);
    if (parsed.type === 'ok') return parsed.value;
    sendError(res, refusalOf(parsed.error));
    return undefined;
  }

  /** Runs a body-reading route as a request in flight (a stopping server waits for it). */
  async function tracked(work: (signal: AbortSignal) => Promise<void>): Promise<void> {
    const controller = new AbortController();
    inflight.add(controller);
    try {
      await work(controller.signal);
    } finally {
      inflight.delete(controller);
    }
  }

  /**
   * POST /tokenize, vLLM's two forms, without taking a sequence. The chat form (`messages`)
   * renders them with the chat template and counts the prompt's tokens, so that the gateway can
   * refuse a prompt over the limits before the request waits for a slot: `{ count, max_model_len,
   * max_input_length }`, or the 400 the completion would get. The prompt form (`prompt`, raw
   * text) also lists the tokens (`tokens`), unless `count_only` is true.
   */
  const handleTokenize = (req: IncomingMessage, res: ServerResponse) =>
    tracked(async (signal) => {
      const read = await readJson(req, res, signal);
      if (!read) return;
      const limits = { max_model_len: config.contextSize, max_input_length: config.maxInputLength };
      if (isObject(read.body) && !('messages' in read.body) && 'prompt' in read.body) {
        const tokens = scheduler.tokenizePrompt(read.body);
        if ('status' in tokens) return sendError(res, tokens);
        // `count_only` (the gateway's, to check a long prompt's count): the list is left out.
        if (read.body.count_only === true) return sendJson(res, 200, { count: tokens.length, ...limits });
        return sendJson(res, 200, { count: tokens.length, ...limits, tokens });
      }
      const request = parsedOrRefused(parseChatRequest, read.body, res);
      if (!request) return;
      const prompt = await scheduler.render(request);
      if ('status' in prompt) return sendError(res, prompt);
      sendJson(res, 200, { count: prompt.tokens.length, ...limits });
    });

  /** POST /detokenize (vLLM's): `{ tokens }` to `{ prompt }`, the text. */
  const handleDetokenize = (req: IncomingMessage, res: ServerResponse) =>
    tracked(async (signal) => {
      const read = await readJson(req, res, signal);
      if (!read) return;
      const text = scheduler.detokenize(read.body);
      if (typeof text !== 'string') return sendError(res, text);
      sendJson(res, 200, { prompt: text });
    });

  /**
   * A generation (chat or text completion): read and check the request, prepare it, wait for a
   * sequence, then answer in the route's format, whole or streamed.
   */
  async function handleGeneration<R extends GenerationRequest>(
    req: IncomingMessage,
    res: ServerResponse,
    kind: {
      parse(body: unknown): Result<R, RequestError>;
      prepare(request: R): Promise<PreparedRequest | EngineError>;
      format: AnswerFormat;
    },
  ): Promise<void> {
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
      const read = await readJson(req, res, controller.signal);
      if (!read) return;
      const request = parsedOrRefused(kind.parse, read.body, res);
      if (!request) return;
      // Every check runs here, before the request waits for a sequence: a bad request is refused at once, however busy.
      const prepared = await kind.prepare(request);
      if ('status' in prepared) return sendError(res, prepared);

      let lease;
      try {
        lease = await scheduler.acquire(controller.signal, prepared.params.promptTokens);
      } catch (error) {
        if (error instanceof QueueAbortedError) {
          if (controller.signal.reason === SHUTDOWN) sendError(res, shuttingDown(), { Connection: 'close' });
          return;
        }
        throw error;
      }
      const answering = {
        res,
        format: kind.format,
        modelName: config.modelName,
        request,
        params: prepared.params,
        lease,
        signal: controller.signal,
        promptTokens: prepared.promptTokens,
        log,
      };
      try {
        await (request.stream ? answerStreamed(answering) : answerWhole(answering));
      } finally {
        lease.release();
      }
    } finally {
      inflight.delete(controller);
    }
  }

  const chat = { parse: parseChatRequest, prepare: (r: ChatRequest) => scheduler.prepare(r), format: CHAT_FORMAT };
  const text = { parse: parseCompletionRequest, prepare: (r: CompletionRequest) => scheduler.prepareCompletion(r), format: TEXT_FORMAT };

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    if (path === '/health') {
      if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, methodNotAllowed('GET /health'));
      return sendJson(res, draining ? 503 : 200, health(draining ? 'draining' : 'ok'));
    }
    if (path === '/v1/models') {
      if (req.method !== 'GET') return sendError(res, methodNotAllowed('GET /v1/models'));
      return sendJson(res, 200, {
        object: 'list',
        data: [{ id: config.modelName, object: 'model', created: createdAt, owned_by: 'engine', max_model_len: config.contextSize }],
      });
    }
    if (path === '/v1/chat/completions' || path === '/v1/completions') {
      if (req.method !== 'POST') return sendError(res, methodNotAllowed(`POST ${path}`));
      if (draining) return sendError(res, shuttingDown(), { Connection: 'close' });
      return path === '/v1/completions' ? handleGeneration(req, res, text) : handleGeneration(req, res, chat);
    }
    if (path === '/tokenize' || path === '/detokenize') {
      if (req.method !== 'POST') return sendError(res, methodNotAllowed(`POST ${path}`));
      if (draining) return sendError(res, shuttingDown(), { Connection: 'close' });
      return path === '/tokenize' ? handleTokenize(req, res) : handleDetokenize(req, res);
    }
    return sendError(res, {
      status: 404,
      message: `No route for ${req.method} ${path}`,
      type: 'not_found_error',
      param: null,
      code: 'not_found',
    });
  }

  return {
    inflight,
    /** From now on, answer 503 to new completions and `draining` on /health. */
    drain(): void {
      draining = true;
    },
    handle(req: IncomingMessage, res: ServerResponse): void {
      // Readiness for a kubelet's probe, which carries no token: whether the engine takes requests, and nothing else.
      if (req.url === '/ready' && (req.method === 'GET' || req.method === 'HEAD')) {
        res.writeHead(draining ? 503 : 200, { 'content-type': 'text/plain' });
        res.end(draining ? 'draining' : 'ok');
        return;
      }
      if (access.token !== undefined && !carriesToken(req.headers.authorization, access.token)) {
        return sendError(res, {
          status: 401,
          message: 'This engine answers only the gateway that started it',
          type: 'authentication_error',
          param: null,
          code: 'invalid_api_key',
        });
      }
      access.onContact();
      route(req, res).catch((error: unknown) => {
        log(`[engine] request failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
        if (!res.headersSent) sendError(res, serverError(500, 'Internal engine error', 'internal_error'));
        else res.destroy();
      });
    },
  };
}
