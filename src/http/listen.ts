/**
 * Starts an HTTP server listening, and says where: the main server (./server.ts) and the probes' own listener
 * (./health-listener.ts) alike.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Listens on `port` (0: a free one) and `host`; resolves with the URL to reach it (a wildcard host is reached on the
 * loopback address), or rejects with the listen error (a port taken). Once it listens, a later 'error' event (an
 * accept that failed: the process out of file descriptors under a flood of connections) goes to `onError`, not the
 * process's end: Node throws an 'error' event nobody listens to, and the server goes on accepting after one.
 */
export async function listen(server: http.Server, port: number, host: string, onError: (error: Error) => void = () => {}): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      server.on('error', onError);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${bound}`;
}
