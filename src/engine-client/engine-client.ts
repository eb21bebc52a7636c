/**
 * The one client of replicas' engines: chat and text completions (streamed or
 * whole), tokenize and detokenize, health checks and the warm-up generation
 * all go through it. It keeps one keep-alive connection pool per engine
 * (undici's Agent: a Pool per origin, HTTP/1.1, no pipelining, as many
 * connections as requests in flight), and holds in one place what every call
 * shares: the engine's token, the timeouts, and the bound on a JSON answer.
 *
 * Every call takes the caller's AbortSignal: aborting it ends the request
 * upstream (its connection is closed), and the engine frees the sequence.
 */
import type { Readable } from 'node:stream';
import { Agent } from 'undici';
import { DEFAULTS } from '../defaults.js';

/** Where an engine listens, and the token it wants (null: none). */
export interface EngineTarget {
  /** e.g. `http://127.0.0.1:41234` */
  address: string | null;
  token?: string | null | undefined;
}

/** The Authorization header of every call to an engine (its token, passed at start as ENGINE_TOKEN). */
export function engineAuthHeaders(token: string | null | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** An answer whose head has arrived; its body streams on (destroy it to end the request). */
export interface EngineResponse {
  status: number;
  contentType: string | undefined;
  body: Readable;
}

/** A JSON answer read whole. */
export interface EngineAnswer {
  status: number;
  /** The parsed JSON, or undefined when the answer was not JSON. */
  body: unknown;
}

export class EngineAnswerTooLargeError extends Error {}

/** The engine answered, with a status other than 200. */
export class EngineStatusError extends Error {
  constructor(readonly status: number) {
    super(`the engine answered HTTP ${status}`);
  }
}

/**
 * Errors of a connection that was never made: a request that met one never reached the engine (another replica may
 * take it). Any other failure (the connection broken, or closed, after the request went out) may have come from the
 * request itself: a prompt that made the engine crash.
 */
const NOT_CONNECTED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

function neverConnected(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; cause = cause.cause, depth++) {
    if (NOT_CONNECTED.has((cause as { code?: string }).code ?? '')) return true;
  }
  return false;
}

/** The engine could not be reached, or broke the connection, or did not answer in time. */
export class EngineUnreachableError extends Error {
  /** Whether the request may have reached the engine (false: the connection was never made). */
  readonly mayHaveArrived: boolean;

  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.mayHaveArrived = options.cause !== undefined && !neverConnected(options.cause);
  }
}

export interface EngineClientOptions {
  /** How long opening a connection may take. @default 10000 */
  connectTimeoutMs?: number;
  /**
   * How long an idle connection is kept when the engine gives no Keep-Alive hint. @default 4000 (Node.js servers,
   * vLLM's uvicorn and llama.cpp's server keep one 5 s)
   */
  keepAliveMs?: number;
  /** The longest an engine's Keep-Alive hint is followed (less undici's 2 s margin). @default DEFAULTS.engineClientKeepAliveMaxMs */
  keepAliveMaxMs?: number;
  /** The default deadline of a health check. @default 2000 */
  healthTimeoutMs?: number;
  /** The deadline of the warm-up generation. @default 120000 */
  warmUpTimeoutMs?: number;
  /**
   * How long a generation's answer may go without a byte once its first token came (ENGINE_IDLE_TIMEOUT_MS; 0: no
   * bound); the relay enforces it (src/router/answer-bounds.ts). @default DEFAULTS.engineIdleTimeoutMs
   */
  idleTimeoutMs?: number;
}

/** The warm-up: one token of a short chat, which proves that the engine can generate. */
const WARM_UP_BODY = JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1, temperature: 0 });

/** The bound on the answers read here whole that are a few hundred bytes: a health check's, the warm-up's. */
const SMALL_ANSWER_MAX_BYTES = 64 * 1024;

export class EngineClient {
  private readonly agent: Agent;
  private readonly healthTimeoutMs: number;
  private readonly warmUpTimeoutMs: number;
  /** See EngineClientOptions.idleTimeoutMs. */
  readonly idleTimeoutMs: number;

  constructor(options: EngineClientOptions = {}) {
    this.healthTimeoutMs = options.healthTimeoutMs ?? 2000;
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULTS.engineIdleTimeoutMs;
    this.warmUpTimeoutMs = options.warmUpTimeoutMs ?? 120_000;
    this.agent = new Agent({
      connections: null,
      pipelining: 1,
      keepAliveTimeout: options.keepAliveMs ?? 4000,
      // An engine that says how long it keeps a connection (`Keep-Alive: timeout=N`; ours: 65 s) is taken at its word,
      // less 2 s, up to this: an endpoint at rest is checked every 5 s, on the same connection.
      keepAliveMaxTimeout: options.keepAliveMaxMs ?? DEFAULTS.engineClientKeepAliveMaxMs,
      keepAliveTimeoutThreshold: 2000,
      connect: { timeout: options.connectTimeoutMs ?? 10_000, noDelay: true },
      // A generation's head comes after its prefill (a whole answer's, after all of it), and a long prompt's prefill
      // on a CPU takes minutes: no transport timer here. The callers' signals bound them, and the relay bounds a
      // generation's silence once its first token came (idleTimeoutMs), which a timer here could not tell apart.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  /**
   * POSTs `payload` (JSON text) to `path` and resolves once the answer's head
   * has arrived. Rejects with EngineUnreachableError when the engine cannot be
   * reached, and with the signal's reason when it aborts first.
   */
  async post(target: EngineTarget, path: string, payload: string, signal: AbortSignal): Promise<EngineResponse> {
    const origin = originOf(target);
    try {
      const answer = await this.agent.request({
        origin,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...engineAuthHeaders(target.token) },
        body: payload,
        signal,
      });
      const type = answer.headers['content-type'];
      return { status: answer.statusCode, contentType: Array.isArray(type) ? type[0] : type, body: quiet(answer.body) };
    } catch (error) {
      if (signal.aborted) throw signal.reason ?? error;
      throw new EngineUnreachableError(`the engine at ${origin} did not answer ${path}`, { cause: error });
    }
  }

  /** POSTs `payload` (serialized here) and reads the JSON answer whole, up to `maxBytes`. */
  async postJson(target: EngineTarget, path: string, payload: unknown, signal: AbortSignal, maxBytes: number): Promise<EngineAnswer> {
    const answer = await this.post(target, path, JSON.stringify(payload), signal);
    return { status: answer.status, body: parseJson(await readBounded(answer.body, maxBytes, path)) };
  }

  /** The engine's health (GET /health), or undefined when it does not answer 200 with JSON within `timeoutMs` (never a rejection). */
  async health<T>(target: EngineTarget, timeoutMs = this.healthTimeoutMs): Promise<T | undefined> {
    if (!target.address) return undefined;
    try {
      const answer = await this.agent.request({
        origin: originOf(target),
        path: '/health',
        method: 'GET',
        headers: engineAuthHeaders(target.token),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = quiet(answer.body);
      if (answer.statusCode !== 200) {
        body.destroy();
        return undefined;
      }
      return parseJson(await readBounded(body, SMALL_ANSWER_MAX_BYTES, '/health')) as T | undefined;
    } catch {
      return undefined; // unreachable, too slow, a malformed address
    }
  }

  /** One short generation; resolves when it completed with 200, and rejects with what went wrong otherwise (EngineStatusError: the status). */
  async warmUp(target: EngineTarget): Promise<void> {
    const answer = await this.post(target, '/v1/chat/completions', WARM_UP_BODY, AbortSignal.timeout(this.warmUpTimeoutMs));
    await readBounded(answer.body, SMALL_ANSWER_MAX_BYTES, '/v1/chat/completions');
    if (answer.status !== 200) throw new EngineStatusError(answer.status);
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }
}

/**
 * undici's body emits an error when it is destroyed before its end (an abandoned answer, a client gone): the
 * readers that care listen for it themselves; this listener keeps one nobody reads from crashing the process.
 */
function quiet(body: Readable): Readable {
  body.on('error', () => {});
  return body;
}

function originOf(target: EngineTarget): string {
  if (!target.address) throw new EngineUnreachableError('the replica has no address yet');
  return target.address;
}

/** The whole body, or EngineAnswerTooLargeError past `maxBytes` (the request is ended then). */
async function readBounded(body: Readable, maxBytes: number, path: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) {
        body.destroy();
        throw new EngineAnswerTooLargeError(`the answer of ${path} is over ${maxBytes} bytes`);
      }
      chunks.push(chunk);
    }
  } catch (error) {
    // Too large, or the caller's abort or deadline (undici's RequestAbortedError is an AbortError too): as it is.
    const { name } = error as { name?: string };
    if (error instanceof EngineAnswerTooLargeError || name === 'AbortError' || name === 'TimeoutError') throw error;
    throw new EngineUnreachableError(`the engine broke off its answer of ${path}`, { cause: error });
  }
  return Buffer.concat(chunks);
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}

let shared: EngineClient | undefined;

/**
 * The process's engine client, for a component built on its own (a test, a
 * tool) without one handed in; the app hands its own to every component.
 */
export function sharedEngineClient(): EngineClient {
  shared ??= new EngineClient();
  return shared;
}
