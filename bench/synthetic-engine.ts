/**
 * A synthetic OpenAI-compatible engine for the streaming benchmark: no model,
 * just the wire protocol, so that what is measured is the gateway.
 *
 *   node --import tsx bench/synthetic-engine.ts --port 8000 [--interval-ms 10] [--host 127.0.0.1] [--max-batch-size N]
 *
 * GET /health answers `{"status":"ok","active":n,"queued":q}`. POST
 * /v1/chat/completions streams `max_tokens` (default 16) content chunks in the
 * exact chunk format of the built-in engine (role chunk, content chunks, a
 * finish chunk, a usage chunk when `stream_options.include_usage`, then
 * `data: [DONE]`). The first content token is written at once (a prefill that
 * costs nothing); the others at each "decode step": one timer every
 * `--interval-ms` writes the next token of every active stream, as a batching
 * engine does. With `--interval-ms 0` steps run back to back (as fast as
 * possible). Non-streamed requests (the controller's warm-up) get a
 * `chat.completion` at once.
 *
 * With `--max-batch-size N` (the overload benchmark), at most N streams decode
 * at once, as the built-in engine's sequence pool allows: the others wait in
 * FIFO order, without an answer yet, and start (head and first token) as soon
 * as a stream ends; a waiting request whose client leaves is dropped from the
 * queue. /health then also reports `maxBatchSize` and `sequences` (N). Without
 * the flag every stream decodes at once and `queued` stays 0.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';

function arg(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 && process.argv[index + 1] !== undefined ? process.argv[index + 1]! : fallback;
}

const port = Number(arg('port', '8000'));
const host = arg('host', '127.0.0.1');
const intervalMs = Number(arg('interval-ms', process.env.SYNTHETIC_INTERVAL_MS ?? '10'));
const modelName = arg('model-name', 'synthetic');
/** Streams decoding at once; the rest wait FIFO (unbounded without the flag). */
const maxBatchSize = process.argv.includes('--max-batch-size') ? Math.max(1, Math.floor(Number(arg('max-batch-size', '1')))) : Infinity;

const WORDS = [' the', ' quick', ' brown', ' fox', ' jumps', ' over', ' a', ' lazy', ' dog', ' and', ' runs', ' far'];

interface Stream {
  res: http.ServerResponse;
  prefix: string;
  suffix: string;
  remaining: number;
  sent: number;
  includeUsage: boolean;
  base: Record<string, unknown>;
  promptTokens: number;
}

const active = new Set<Stream>();
/** Streams waiting for a free place in the batch (only with --max-batch-size), oldest first. */
const waiting: Stream[] = [];
/** While a decode step runs, streams admitted into the batch wait for its end (they get no second token in the step that started them). */
let stepping = false;
let totalRequests = 0;
let draining = false;

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) });
  res.end(payload);
}

/** Starts waiting streams while the batch has room: head, role chunk and first token, as at a request's own arrival. */
function admit(): void {
  if (stepping) return;
  while (active.size < maxBatchSize && waiting.length > 0) {
    const stream = waiting.shift()!;
    if (stream.res.destroyed) continue;
    start(stream);
  }
}

function leave(stream: Stream): void {
  if (active.delete(stream)) admit();
}

function finish(stream: Stream): void {
  leave(stream);
  const { res } = stream;
  if (res.destroyed) return;
  res.write(
    `data: ${JSON.stringify({ ...stream.base, choices: [{ index: 0, delta: {}, finish_reason: 'length' }], ...(stream.includeUsage ? { usage: null } : {}) })}\n\n`,
  );
  if (stream.includeUsage) {
    const { usage: _usage, ...base } = stream.base;
    res.write(
      `data: ${JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: stream.promptTokens, completion_tokens: stream.sent, total_tokens: stream.promptTokens + stream.sent } })}\n\n`,
    );
  }
  res.end('data: [DONE]\n\n');
  if (draining && active.size === 0) process.exit(0);
}

function writeToken(stream: Stream): void {
  const word = WORDS[stream.sent % WORDS.length]!;
  stream.res.write(`${stream.prefix}${word}${stream.suffix}`);
  stream.sent++;
  stream.remaining--;
}

/** One decode step: the next token of every active stream. */
function step(): void {
  stepping = true;
  for (const stream of active) {
    if (stream.res.destroyed) {
      active.delete(stream);
      continue;
    }
    if (stream.remaining <= 0) finish(stream);
    else writeToken(stream);
  }
  stepping = false;
  if (waiting.length > 0) admit();
}

if (intervalMs > 0) {
  setInterval(step, intervalMs);
} else {
  const loop = () => {
    if (active.size > 0) step();
    setImmediate(loop);
  };
  setImmediate(loop);
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function chat(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  let body: {
    stream?: boolean;
    max_tokens?: number;
    max_completion_tokens?: number;
    stream_options?: { include_usage?: boolean };
    messages?: unknown[];
  };
  try {
    body = JSON.parse(await readBody(req)) as typeof body;
  } catch {
    return sendJson(res, 400, { error: { message: 'invalid JSON', type: 'invalid_request_error', param: null, code: 'invalid_json' } });
  }
  totalRequests++;
  const maxTokens = Math.max(1, Math.min(100_000, Number(body.max_tokens ?? body.max_completion_tokens ?? 16)));
  const promptTokens = 8;
  const id = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
  const created = Math.floor(Date.now() / 1000);
  if (!body.stream) {
    return sendJson(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model: modelName,
      choices: [{ index: 0, message: { role: 'assistant', content: WORDS.slice(0, maxTokens).join('') }, finish_reason: 'length' }],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: Math.min(maxTokens, WORDS.length),
        total_tokens: promptTokens + Math.min(maxTokens, WORDS.length),
      },
    });
  }
  const includeUsage = body.stream_options?.include_usage === true;
  const base: Record<string, unknown> = { id, object: 'chat.completion.chunk', created, model: modelName };
  if (includeUsage) base.usage = null;
  // The chunk around a token's text, serialized once: {"id":…,"choices":[{"index":0,"delta":{"content":"<text>"},"finish_reason":null}],"usage":null}
  const head = JSON.stringify({
    id,
    object: 'chat.completion.chunk',
    created,
    model: modelName,
    choices: [{ index: 0, delta: { content: '\u0000' }, finish_reason: null }],
    ...(includeUsage ? { usage: null } : {}),
  });
  const [before, after] = head.split('\\u0000') as [string, string];
  const stream: Stream = {
    res,
    prefix: `data: ${before}`,
    suffix: `${after}\n\n`,
    remaining: maxTokens,
    sent: 0,
    includeUsage,
    base,
    promptTokens,
  };
  if (active.size >= maxBatchSize || waiting.length > 0) {
    // The batch is full: wait, FIFO, for a stream to end (a client that leaves meanwhile leaves the queue).
    waiting.push(stream);
    res.once('close', () => {
      const index = waiting.indexOf(stream);
      if (index >= 0) waiting.splice(index, 1);
    });
    return;
  }
  start(stream);
}

function start(stream: Stream): void {
  const { res, base } = stream;
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.socket?.setNoDelay(true);
  res.write(
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`,
  );
  // Prefill is free: the first token goes out with the head; the rest at each decode step.
  writeToken(stream);
  active.add(stream);
  res.once('close', () => leave(stream));
}

const server = http.createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/health') {
    const batch = Number.isFinite(maxBatchSize) ? { maxBatchSize, sequences: maxBatchSize } : {};
    return sendJson(res, draining ? 503 : 200, {
      status: draining ? 'draining' : 'ok',
      active: active.size,
      queued: waiting.length,
      totalRequests,
      ...batch,
    });
  }
  if (path === '/v1/chat/completions' && req.method === 'POST') {
    if (draining)
      return sendJson(res, 503, { error: { message: 'shutting down', type: 'server_error', param: null, code: 'engine_shutting_down' } });
    chat(req, res).catch(() => res.destroy());
    return;
  }
  sendJson(res, 404, { error: { message: `No route for ${req.method} ${path}`, type: 'not_found_error', param: null, code: 'not_found' } });
});
// As long as the gateway's own keep-alive: the benchmark measures relaying, not reconnects.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.listen(port, host, () =>
  process.stderr.write(
    `synthetic engine on http://${host}:${port} (decode step ${intervalMs} ms${Number.isFinite(maxBatchSize) ? `, at most ${maxBatchSize} streams at once` : ''})\n`,
  ),
);

process.on('SIGTERM', () => {
  draining = true;
  server.close();
  if (active.size === 0 && waiting.length === 0) process.exit(0);
  setTimeout(() => process.exit(0), 5000).unref();
});
