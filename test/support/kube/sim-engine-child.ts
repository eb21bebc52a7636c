/**
 * The simulated pods' engine (sim-engine.ts starts it with `node --import tsx`): one server on 0.0.0.0 answering every
 * pod IP of 127/8. It tells its port, then answers the parent's requests for its counts and CPU time, and exits when
 * the parent disconnects (or is gone).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULTS } from '../../../src/defaults.js';
import type { SimEngineAnswer, SimEngineCounts, SimEngineRequest } from './sim-engine.js';

const counts: SimEngineCounts = { health: {}, warmUps: {}, unauthenticated: 0, other: 0 };

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The warm-up: a chat completion of one token, in the OpenAI shape; a body without messages is refused as the engine does. */
function complete(req: IncomingMessage, res: ServerResponse, ip: string): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    let body: { messages?: unknown } | undefined;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
    } catch {
      body = undefined;
    }
    if (!Array.isArray(body?.messages)) return json(res, 400, { error: { message: 'messages: required', type: 'invalid_request_error' } });
    const n = (counts.warmUps[ip] = (counts.warmUps[ip] ?? 0) + 1);
    json(res, 200, {
      id: `chatcmpl-sim-${n}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: 'sim',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'length' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
  });
}

const server = createServer((req, res) => {
  const ip = req.socket.localAddress ?? '?';
  if (!/^Bearer \S+$/.test(req.headers.authorization ?? '')) counts.unauthenticated++;
  if (req.method === 'GET' && req.url === '/health') {
    const total = (counts.health[ip] = (counts.health[ip] ?? 0) + 1);
    return json(res, 200, { status: 'ok', active: 0, queued: 0, maxBatchSize: 8, totalRequests: total, lastRequestAt: null });
  }
  if (req.method === 'POST' && req.url === '/v1/chat/completions') return complete(req, res, ip);
  counts.other++;
  json(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: 'not_found' } });
});

// As the built-in engine keeps its idle connections (src/engine/server.ts).
server.keepAliveTimeout = DEFAULTS.engineKeepAliveMs;
server.headersTimeout = DEFAULTS.engineKeepAliveMs + 1000;
server.listen(0, '0.0.0.0', () => process.send!({ ready: (server.address() as AddressInfo).port } satisfies SimEngineAnswer));
process.on('message', (message: SimEngineRequest) => {
  process.send!({ id: message.id, result: message.method === 'counts' ? counts : process.cpuUsage() } satisfies SimEngineAnswer);
});
// Ends with its parent (or its close): the open keep-alive connections do not hold it.
process.once('disconnect', () => process.exit(0));
