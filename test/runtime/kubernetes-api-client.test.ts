/**
 * The Kubernetes runtime's pooled API client (src/runtime/kubernetes/api-client.ts): calls share keep-alive
 * connections, and the pool closes an idle one before the server's keep-alive timeout would, so that no call goes
 * out on a connection the server is closing (an ECONNRESET, which the runtime reads as an API server outage).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, expect, test } from 'vitest';
import { pooledCoreApi } from '../../src/runtime/kubernetes/api-client.js';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** An API server that answers every call with an empty pod list, and records when each connection opened and closed. */
async function apiServer(keepAliveMs: number) {
  const connections: { opened: number; closed?: number }[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: '1' }, items: [] }));
  });
  server.keepAliveTimeout = keepAliveMs;
  server.on('connection', (socket) => {
    const entry: { opened: number; closed?: number } = { opened: Date.now() };
    connections.push(entry);
    socket.on('close', () => (entry.closed = Date.now()));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u', namespace: 'default' }],
    currentContext: 'x',
  });
  return { kc, connections };
}

test('calls share a connection; an idle one is closed by the pool before the server would close it', async () => {
  const { kc, connections } = await apiServer(10_000);
  const pooled = pooledCoreApi(kc, { idleMs: 300 });
  try {
    for (let i = 0; i < 3; i++) expect((await pooled.api.listNamespacedPod({ namespace: 'default' })).items).toEqual([]);
    expect(connections).toHaveLength(1);
    // Idle past the pool's 300 ms, far from the server's 10 s: the client closed it.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(connections[0]!.closed, 'the idle connection is closed').toBeDefined();
    expect(connections[0]!.closed! - connections[0]!.opened).toBeLessThan(5000);
    // The next call opens a new one.
    expect((await pooled.api.listNamespacedPod({ namespace: 'default' })).items).toEqual([]);
    expect(connections).toHaveLength(2);
  } finally {
    pooled.close();
  }
});
