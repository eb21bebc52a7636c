/**
 * The proxy floor for the streaming benchmark (a child process): the least a
 * Node.js reverse proxy does, and nothing else. Every request is forwarded to
 * `upstream` over keep-alive connections and the answer is piped back as it
 * comes: no authentication, routing, admission, metering or request log. What
 * the gateway costs beyond this is its own; what this costs is any proxy's.
 */
import http from 'node:http';
import { childMain, serveUntilStopped } from '../lib/env.js';

export interface BareProxyConfig {
  /** e.g. `http://127.0.0.1:41234` */
  upstream: string;
}

childMain<BareProxyConfig, { closed: true }>(async (config, send, receive) => {
  const upstream = new URL(config.upstream);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, scheduling: 'lifo' });
  const server = http.createServer((req, res) => {
    const forward = http.request(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    // A client that goes away mid-stream ends the upstream request too.
    res.on('close', () => {
      if (!res.writableFinished) forward.destroy();
    });
    req.pipe(forward);
  });
  await serveUntilStopped(server, send, receive);
  agent.destroy();
  return { closed: true };
});
