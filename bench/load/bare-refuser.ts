/**
 * The refusal floor for the overload benchmark (a child process): the least
 * a Node.js server does to refuse a chat request, and nothing else. It reads
 * the body, parses it as JSON, and answers 429 with the gateway's headers
 * (`Retry-After`, a jittered `retry-after-ms`) and a body of the same shape
 * and size: no authentication, routing, admission or metering. Loaded by the
 * same clients as the gateway, what it takes is what this machine, this load
 * generator and node:http take for any server; what the gateway takes beyond
 * it is its own.
 */
import http from 'node:http';
import { childMain, serveUntilStopped } from '../lib/env.js';

export interface BareRefuserConfig {
  /** The body of each 429, as the gateway sends it. */
  body: string;
}

childMain<BareRefuserConfig, { refused: number }>(async (config, send, receive) => {
  let refused = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400).end();
        return;
      }
      refused++;
      res.writeHead(429, {
        'content-type': 'application/json',
        'retry-after': '1',
        'retry-after-ms': String(500 + Math.floor(Math.random() * 500)),
        'content-length': Buffer.byteLength(config.body),
      });
      res.end(config.body);
    });
  });
  await serveUntilStopped(server, send, receive);
  return { refused };
});
