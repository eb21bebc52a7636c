/**
 * Backpressure on a graphql-ws socket (src/http/graphql/websocket-peer.ts), against a gateway process (src/main.ts as
 * `npm start` runs it) and raw TCP clients that write WebSocket frames themselves: messages the gateway answers at once
 * (graphql-ws `ping`s, which it answers with a `pong` carrying the same payload; `subscribe`s of `{ __typename }`, or
 * refused past the socket's cap), written as fast as the client's socket takes them, while the client reads nothing
 * (its socket paused), or reads only later.
 *
 * While a socket has more than its high-water mark (256 KB) waiting to be sent, the gateway reads none of its
 * messages, until it has caught up: a client that reads nothing has the gateway hold about that much of its answers
 * (its own writes wait, in its and the kernel's buffers), and the stall guard still cuts it after
 * STREAM_STALL_TIMEOUT_MS. A client that reads gets every answer. Before: the gateway read every message and held every
 * answer in memory until the client was cut (by the keep-alive, 12 to 24 s later): with `subscribe`s its RSS grew by
 * about 24 MB/s (204 MB to 798 MB in 25 s, 171,500 messages read, on a loaded 2-core machine).
 *
 * USER_MAX_WEBSOCKETS is 1: each test's socket opens only once the gateway has let the one before it go.
 */
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { beforeAll, expect, test } from 'vitest';
import { waitFor } from '../support/app.js';
import { gatewayProcessSetting, startGatewayProcess, type GatewayProcess } from '../support/processes.js';

const ADMIN_KEY = 'test_ws_backpressure_admin_key_0123456';
const setting = gatewayProcessSetting('ws-backpressure', ADMIN_KEY);
const MB = 2 ** 20;
/**
 * How much the gateway's memory may grow while a client floods it with pings without reading: generous (the answers it
 * holds are about 256 KB, those the kernel holds are not its memory, and the messages it handled before it stopped
 * reading leave some garbage behind), yet a small part of what the flood made it hold before (hundreds of MB by the
 * time the client was cut).
 */
const GROWTH_LIMIT = 128 * MB;
/** The stall guard's wait: well past any wait of these tests for something the gateway does at once. */
const STALL_MS = 8_000;

let gateway: GatewayProcess;

beforeAll(async () => {
  gateway = await startGatewayProcess({ ...setting.env, USER_MAX_WEBSOCKETS: '1', STREAM_STALL_TIMEOUT_MS: String(STALL_MS) });
}, 120_000);

/** A client's frame (masked, with a zero key: the payload goes as it is). */
function frame(payload: Buffer, opcode = 0x1): Buffer {
  const head =
    payload.length < 126
      ? Buffer.from([0x80 | opcode, 0x80 | payload.length])
      : Buffer.from([0x80 | opcode, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  return Buffer.concat([head, Buffer.alloc(4), payload]);
}

const subscribe = (n: number) => frame(Buffer.from(`{"id":"q${n}","type":"subscribe","payload":{"query":"{ __typename }"}}`));
/** A graphql-ws `ping` of about 1 KB, answered with a `pong` of the same payload. */
const ping = () => frame(Buffer.from(JSON.stringify({ type: 'ping', payload: { pad: 'x'.repeat(1000) } })));

/** The gateway's resident memory, from /proc. */
async function rss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

interface Client {
  socket: net.Socket;
  /** Subscribe messages handed to the socket so far. */
  sent: number;
  /** The ids of the operations ended, with `complete` or an `error`. */
  ended: string[];
  /** The `error` messages' payloads. */
  errors: unknown[];
  /** The other messages but `next` (pongs, the ack). */
  others: { type: string }[];
  closed: boolean;
  /** Starts reading (and answering the gateway's pings), for a client opened with `read: false`. */
  read(): void;
}

/**
 * A socket past `connection_ack`, reading what comes (`read`) or nothing from then on; tried again while the gateway
 * refuses it (4429: the socket before it is not let go yet), for up to `withinMs`.
 */
function openClient(read: boolean, withinMs = 10_000): Promise<Client> {
  return waitFor('a socket the gateway acknowledges', () => tryClient(read), withinMs);
}

async function tryClient(read: boolean): Promise<Client | undefined> {
  const socket = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  let pending = Buffer.alloc(0);
  let upgraded = false;
  const client: Client = {
    socket,
    sent: 0,
    ended: [],
    errors: [],
    others: [],
    closed: false,
    read: () => {
      socket.on('data', onData);
      socket.resume();
    },
  };
  socket.once('close', () => (client.closed = true));
  const onData = (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    if (!upgraded) {
      const end = pending.indexOf('\r\n\r\n');
      if (end < 0) return;
      upgraded = true;
      pending = pending.subarray(end + 4);
    }
    // The gateway's frames are unmasked; none is near 64 KB.
    for (;;) {
      if (pending.length < 2) return;
      let length = pending[1]! & 0x7f;
      let at = 2;
      if (length === 126) {
        if (pending.length < 4) return;
        length = pending.readUInt16BE(2);
        at = 4;
      }
      if (pending.length < at + length) return;
      const opcode = pending[0]! & 0x0f;
      const payload = pending.subarray(at, at + length);
      pending = pending.subarray(at + length);
      if (opcode === 0x9) socket.write(frame(payload, 0xa));
      if (opcode !== 0x1) continue;
      const message = JSON.parse(payload.toString()) as { id?: string; type: string; payload?: unknown };
      if (message.type === 'complete' || message.type === 'error') client.ended.push(message.id!);
      if (message.type === 'error') client.errors.push(message.payload);
      else if (message.type !== 'next' && message.type !== 'complete') client.others.push(message);
    }
  };
  socket.on('data', onData);
  socket.write(
    'GET /graphql HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
      'Sec-WebSocket-Protocol: graphql-transport-ws\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  );
  socket.write(frame(Buffer.from(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${ADMIN_KEY}` } }))));
  const acknowledged = () => client.others.some((m) => m.type === 'connection_ack');
  await waitFor('connection_ack or the close', async () => acknowledged() || client.closed, 10_000);
  if (!acknowledged()) return undefined;
  client.others = [];
  if (!read) {
    socket.off('data', onData);
    socket.pause();
  }
  return client;
}

/** Writes `count` messages (`subscribe`s numbered from 0, or pings) as fast as the socket takes them, until it closes. */
async function flood(client: Client, count: number, message: (n: number) => Buffer = subscribe): Promise<void> {
  const batch = 100;
  while (client.sent < count && !client.closed) {
    const frames: Buffer[] = [];
    for (let i = 0; i < batch && client.sent < count; i++) frames.push(message(client.sent++));
    if (client.socket.write(Buffer.concat(frames))) continue;
    await new Promise<void>((resolve) => {
      const done = () => {
        client.socket.off('drain', done);
        client.socket.off('close', done);
        resolve();
      };
      client.socket.once('drain', done);
      client.socket.once('close', done);
    });
  }
}

/** This connection's queues in the kernel, on the gateway's side (bytes it has not sent, and not read), from /proc. */
async function gatewaySide(client: Client): Promise<{ unsent: number; unread: number } | undefined> {
  const hex = (port: number) => port.toString(16).toUpperCase().padStart(4, '0');
  const local = `:${hex(Number(new URL(gateway.url).port))}`;
  const remote = `:${hex(client.socket.localPort!)}`;
  for (const line of (await readFile('/proc/net/tcp', 'utf8')).split('\n').slice(1)) {
    const [, from, to, , queues] = line.trim().split(/\s+/);
    if (!from?.endsWith(local) || !to?.endsWith(remote)) continue;
    const [unsent, unread] = queues!.split(':').map((q) => parseInt(q, 16));
    return { unsent: unsent!, unread: unread! };
  }
  return undefined;
}

/** Every operation `q0`...`q{count - 1}` ended once: completed, or refused past the socket's cap. */
function expectEveryOperationEnded(client: Client, count: number): void {
  expect([...client.ended].sort()).toEqual(Array.from({ length: count }, (_, n) => `q${n}`).sort());
  for (const error of client.errors) expect(error).toEqual([expect.objectContaining({ extensions: { code: 'RESOURCE_EXHAUSTED' } })]);
}

/**
 * Until the gateway has answers it cannot send and messages it has not read: the client is behind. (Not whether the
 * client's own socket buffers its writes: the kernel's buffers, as large as autotuning makes them, took a whole flood
 * in a fresh clone's run, and the client had nothing left to buffer.)
 */
async function heldBack(client: Client): Promise<void> {
  await waitFor(
    'the gateway to hold the messages back',
    async () => {
      const side = await gatewaySide(client);
      return side !== undefined && side.unsent > 0 && side.unread > 0;
    },
    30_000,
  );
}

test('a client that floods the socket with pings and reads nothing has the gateway hold about the high-water mark, not every answer; the stall guard still cuts it', async () => {
  const pid = gateway.child.pid!;
  const before = await rss(pid);
  const client = await openClient(false);
  // More than the gateway answers before the client is cut, with or without backpressure.
  void flood(client, 100_000_000, ping);
  let peak = before;
  await waitFor(
    'the client to be cut',
    async () => {
      peak = Math.max(peak, await rss(pid));
      return client.closed;
    },
    STALL_MS + 45_000,
  );
  const growth = Math.round((peak - before) / MB);
  expect(growth, `RSS ${Math.round(before / MB)} MB before, ${Math.round(peak / MB)} MB at most`).toBeLessThan(GROWTH_LIMIT / MB);
}, 120_000);

test('a client that floods the socket with operations and reads only once the gateway holds them back gets every answer', async () => {
  const count = 60_000;
  const client = await openClient(false);
  const flooded = flood(client, count);
  await heldBack(client);
  client.read();
  await flooded;
  await waitFor('every answer', async () => client.ended.length === count || client.closed, 60_000);
  expect(client.closed).toBe(false);
  expectEveryOperationEnded(client, count);
  client.socket.destroy();
}, 120_000);

test('a client that reads as it floods the socket gets every answer', async () => {
  const count = 10_000;
  const client = await openClient(true);
  await flood(client, count);
  await waitFor('every answer', async () => client.ended.length === count || client.closed, 60_000);
  expect(client.closed).toBe(false);
  expectEveryOperationEnded(client, count);
  client.socket.destroy();
}, 120_000);

test('a client that goes away while the gateway holds its messages back is let go at once, not by the stall guard', async () => {
  const client = await openClient(false);
  void flood(client, 100_000_000);
  await heldBack(client);
  client.socket.destroy();
  // The user's one socket place (USER_MAX_WEBSOCKETS) is free again well before the stall guard would have cut it.
  const next = await openClient(true, 5_000);
  expect(next.closed).toBe(false);
  next.socket.destroy();
}, 120_000);
