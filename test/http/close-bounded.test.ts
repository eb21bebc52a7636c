/**
 * Closing the gateway finishes in bounded time whatever its clients hold open: SSE streams, WebSockets (a peer
 * that never answers the close frame, one stopped mid-frame), bodies and heads half sent, a chat request waiting
 * for a waking endpoint, and sockets Node's HTTP server no longer tracks once they were handed to the upgrade
 * listener (an `Upgrade: h2c` request served as plain HTTP/1.1). Each client sees its connection end.
 *
 * Before: a silent WebSocket peer held close for `ws`'s 30 s close timeout, and an SSE stream or a held chat
 * request over an h2c upgrade held it forever (`server.close` waits for every socket; `closeAllConnections`
 * does not know them).
 */
import net from 'node:net';
import { beforeAll, describe, expect, test } from 'vitest';
import type { Sql } from '../../src/storage/database.js';
import { startGateway, type Gateway } from '../../src/gateway.js';
import { createServices, type Services } from '../../src/services/index.js';
import { onCleanup } from '../support/cleanup.js';
import { createTestDatabase } from '../support/database.js';
import { createSeed, type SeededUser } from '../support/gateway.js';
import { openSocket, openSse } from '../support/live-clients.js';

const EVENTS = 'subscription($p: ID!) { endpointEvents(projectId: $p) { id type } }';
const H2C = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n';
const WS_HANDSHAKE =
  'GET /graphql HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
  'Sec-WebSocket-Protocol: graphql-transport-ws\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n';
/** How long a close may take: the WebSocket close grace (1 s) and some slack for a loaded machine. */
const CLOSE_BOUND_MS = 5000;

let services: Services;
let sql: Sql;

beforeAll(async () => {
  const db = await createTestDatabase();
  onCleanup(() => db.close());
  sql = db.sql;
  services = createServices(sql);
});

interface Opened {
  g: Gateway;
  alice: SeededUser;
  projectId: string;
  /** An endpoint with no replica and no controller to start one: a chat request to it waits for it to serve. */
  endpointId: string;
}

async function openGateway(): Promise<Opened> {
  const g = await startGateway(sql, services, { port: 0, host: '127.0.0.1', log: () => {} });
  const alice = await createSeed(services, g.url).user();
  const project = await alice.project();
  return { g, alice, projectId: project.id, endpointId: await project.endpoint() };
}

interface RawClient {
  received: () => string;
  /** Resolves when the server ended the connection. */
  ended: Promise<void>;
}

/** A raw connection that writes `text` and then neither reads on (beyond buffering) nor closes its side. */
async function rawClient(g: Gateway, text: string | Buffer): Promise<RawClient> {
  const socket = net.connect(Number(new URL(g.url).port), '127.0.0.1');
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  socket.on('error', () => {});
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(text);
  return { received: () => received, ended };
}

function chatBody(endpointId: string): string {
  return JSON.stringify({ model: endpointId, messages: [{ role: 'user', content: 'hi' }] });
}

/** Closes the gateway; fails the test if that takes more than the bound (rather than hanging it). */
async function closeWithinBound(g: Gateway): Promise<number> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), CLOSE_BOUND_MS)));
  const outcome = await Promise.race([g.close().then(() => 'closed' as const), late]);
  clearTimeout(timer);
  expect(outcome, `the gateway's close did not return within ${CLOSE_BOUND_MS} ms`).toBe('closed');
  return performance.now() - started;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

describe('closing the gateway', () => {
  test('a WebSocket peer that never answers the close frame, or stopped mid-frame, is cut', async () => {
    const { g, alice } = await openGateway();
    const silent = await rawClient(g, WS_HANDSHAKE);
    // A masked text frame announcing 100 bytes, of which 10 came.
    const midFrame = await rawClient(
      g,
      Buffer.concat([Buffer.from(WS_HANDSHAKE), Buffer.from([0x81, 0x80 | 100, 1, 2, 3, 4]), Buffer.alloc(10)]),
    );
    const polite = await openSocket(g.url, { authorization: `Bearer ${alice.key}` });
    await settle();
    expect(silent.received()).toMatch(/^HTTP\/1\.1 101/);
    expect(midFrame.received()).toMatch(/^HTTP\/1\.1 101/);
    await closeWithinBound(g);
    await Promise.all([silent.ended, midFrame.ended]);
    // A client that answers gets the close code, as before.
    expect((await polite.waitClosed()).code).toBe(1001);
  });

  test('an SSE stream and a held chat request over an h2c upgrade are ended', async () => {
    const { g, alice, projectId, endpointId } = await openGateway();
    const target = `/graphql?query=${encodeURIComponent(EVENTS)}&variables=${encodeURIComponent(JSON.stringify({ p: projectId }))}`;
    const stream = await rawClient(
      g,
      `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.key}\r\nAccept: text/event-stream\r\n${H2C}\r\n`,
    );
    const body = chatBody(endpointId);
    const chat = await rawClient(
      g,
      `POST /dedicated/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n${body}`,
    );
    await settle();
    expect(stream.received()).toMatch(/^HTTP\/1\.1 200/);
    await closeWithinBound(g);
    await Promise.all([stream.ended, chat.ended]);
  });

  test('streams, sockets, half-sent requests and held requests all at once', async () => {
    const { g, alice, projectId, endpointId } = await openGateway();
    const sse = await openSse(g.url, alice.key, EVENTS, { p: projectId });
    const socket = await openSocket(g.url, { authorization: `Bearer ${alice.key}` });
    socket.subscribe('1', EVENTS, { p: projectId });
    const body = chatBody(endpointId);
    const auth = `Host: x\r\nAuthorization: Bearer ${alice.key}\r\nContent-Type: application/json\r\n`;
    const raw = await Promise.all([
      rawClient(g, WS_HANDSHAKE),
      rawClient(g, `POST /dedicated/v1/chat/completions HTTP/1.1\r\n${auth}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`),
      rawClient(g, `POST /graphql HTTP/1.1\r\n${auth}Content-Length: 1000\r\n\r\n{"query":`),
      rawClient(g, 'POST /graphql HTTP/1.1\r\nHost: x\r\n'),
      rawClient(g, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'),
      rawClient(g, `GET /healthz HTTP/1.1\r\nHost: x\r\n${H2C}\r\n`),
    ]);
    await settle();
    // The chat request is held (no answer yet): the endpoint has no replica.
    expect(raw[1]!.received()).toBe('');
    await closeWithinBound(g);
    await Promise.all(raw.map((client) => client.ended));
    expect((await socket.waitClosed()).code).toBe(1001);
    await expect.poll(() => sse.ended, { timeout: 2000 }).toBeDefined();
  });
});
