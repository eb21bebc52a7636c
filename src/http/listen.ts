/**
 * Starts an HTTP server listening, and says where: the main server (./server.ts) and the probes' own listener
 * (./health-listener.ts) alike.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Listens on `port` (0: a free one) and `host`; resolves with the URL to reach it (a wildcard host is reached on the
 * loopback address), or rejects with the listen error (a port taken). The error listener stays: a later 'error'
 * event of the server settles nothing and throws nothing.
 */
export async function listen(server: http.Server, port: number, host: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${bound}`;
}
