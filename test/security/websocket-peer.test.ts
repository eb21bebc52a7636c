/**
 * A WebSocket peer that stops reading is cut, like an SSE client: it cannot keep its socket alive with pongs of its
 * own (only the pong that carries our ping's payload answers it), and once it takes nothing of what waits to be sent
 * for the stall timeout (STREAM_STALL_TIMEOUT_MS), its connection is destroyed. The adapter is served here on its
 * own server with short timeouts (the gateway's are 12 s and 30 s), over a test gateway's services and hub.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { getIntrospectionQuery } from 'graphql';
import WebSocket from 'ws';
import { beforeAll, describe, expect, test } from 'vitest';
import { createGraphQL, createWebSocket, GRAPHQL_PATH } from '../../src/http/graphql/yoga.js';
import { routeUpgrades } from '../../src/http/upgrade.js';
import { waitFor } from '../support/app.js';
import { onCleanup } from '../support/cleanup.js';
import { startTestGateway, type SeededUser, type TestGateway } from '../support/gateway.js';
import { openSocket } from '../support/live-clients.js';

let g: TestGateway;
let alice: SeededUser;

beforeAll(async () => {
  g = await startTestGateway();
  alice = await g.seed.user();
});

/**
 * The WebSocket adapter alone, with these timeouts (no chat here: the operations these tests run need none), and its
 * open connections (a paused client would not notice its own being cut).
 */
async function serve(options: { keepAliveMs: number; stallMs: number }) {
  const yoga = createGraphQL(g.services, {} as never, { hub: g.gateway.hub, bufferSize: 100, maxLagMs: 10_000 });
  const ws = createWebSocket(yoga, g.services, options);
  const server = http.createServer();
  routeUpgrades(server, GRAPHQL_PATH, ws.handleUpgrade);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    await ws.close(100);
    await new Promise((resolve) => server.close(resolve));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => new Promise<number>((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n)))),
  };
}

/** A socket past `connection_ack` that then reads nothing more (its TCP connection is paused). */
async function deafSocket(url: string) {
  const s = await openSocket(url, { authorization: `Bearer ${alice.key}` });
  // `ws` keeps the TCP socket private; pausing it is the only way to stop reading while keeping the connection.
  (s.socket as unknown as { _socket: { pause(): void } })._socket.pause();
  return s;
}

describe('a peer that reads nothing is cut', () => {
  test('(control) a peer that reads answers each ping, and keeps its socket', async () => {
    const { url, connections } = await serve({ keepAliveMs: 100, stallMs: 60_000 });
    const s = await openSocket(url, { authorization: `Bearer ${alice.key}` });
    let pings = 0;
    s.socket.on('ping', () => pings++);
    await waitFor('five pings', async () => pings >= 5, 10_000);
    expect(s.closed).toBeUndefined();
    expect(await connections()).toBe(1);
    s.socket.close();
  });

  test('pongs of its own do not answer the ping: the socket is dropped', async () => {
    const { url, connections } = await serve({ keepAliveMs: 100, stallMs: 60_000 });
    const s = await deafSocket(url);
    const pongs = setInterval(() => s.socket.readyState === WebSocket.OPEN && s.socket.pong(), 20);
    onCleanup(() => {
      clearInterval(pongs);
      s.socket.terminate();
    });
    expect(await connections()).toBe(1);
    await waitFor('the server to drop the socket', async () => (await connections()) === 0, 10_000);
  });

  test('a peer that takes nothing of what waits to be sent is cut after the stall timeout', async () => {
    const { url, connections } = await serve({ keepAliveMs: 0, stallMs: 300 });
    const s = await deafSocket(url);
    onCleanup(() => s.socket.terminate());
    // Introspection results (about 100 KB each): more than the socket's buffers, the peer's and ours, hold.
    const query = getIntrospectionQuery();
    for (let i = 0; i < 200; i++) s.subscribe(`q${i}`, query);
    expect(await connections()).toBe(1);
    await waitFor('the server to cut the socket', async () => (await connections()) === 0, 20_000);
  });
});
