/**
 * A proxy in front of the stand-in's API server, for clients that must meet an API server in trouble: it passes
 * every request on (watches included, their headers flushed at once as the API server does: Node.js would hold them
 * until the first body bytes, and a quiet watch has none), except those `refuse` picks, which it answers as an
 * overloaded API server does (503 ServiceUnavailable), and those it answers 'lose' for: passed on (the API server
 * does what they ask) while the client gets a 504 Timeout, as when etcd commits after the request's deadline.
 * `cutPodWatches` ends the pod watches open through it.
 * Closed when the test file ends.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { onCleanup } from '../cleanup.js';

export interface ApiProxy {
  url: string;
  cutPodWatches(): void;
}

const isPodWatch = (req: http.IncomingMessage) =>
  req.method === 'GET' && /\/pods\?/.test(req.url ?? '') && /[?&]watch=(true|1)/.test(req.url ?? '');

export async function startApiProxy(upstreamUrl: string, refuse: (req: http.IncomingMessage) => boolean | 'lose'): Promise<ApiProxy> {
  const upstream = new URL(upstreamUrl);
  const podWatches = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const fault = refuse(req);
    if (fault === true) {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' });
      const status = { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'etcdserver: request timed out' };
      res.end(JSON.stringify({ ...status, reason: 'ServiceUnavailable', code: 503 }));
      return;
    }
    if (isPodWatch(req)) {
      podWatches.add(res);
      res.on('close', () => podWatches.delete(res));
    }
    const options = { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers };
    const forward = http.request(options, (answer) => {
      if (fault === 'lose') {
        answer.resume();
        res.writeHead(504, { 'content-type': 'application/json' });
        const message = 'Timeout: request did not complete within requested timeout - context deadline exceeded';
        res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message, reason: 'Timeout', code: 504 }));
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      res.flushHeaders();
      answer.pipe(res);
    });
    forward.on('error', () => res.destroy());
    res.on('close', () => forward.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    cutPodWatches() {
      for (const res of podWatches) res.destroy();
      podWatches.clear();
    },
  };
}

/** A read of pods: a list or a watch. */
export const isPodRead = (req: http.IncomingMessage) => req.method === 'GET' && /\/pods(\?|$)/.test(req.url ?? '');
/** The creation of a pod. */
export const isPodCreate = (req: http.IncomingMessage) => req.method === 'POST' && /\/pods$/.test(req.url ?? '');
