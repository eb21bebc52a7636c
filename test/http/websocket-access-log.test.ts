/**
 * The access log covers WebSocket connections (issue 19): an upgrade on
 * /graphql never reaches the HTTP request handler, so each connection writes
 * its own line when it closes: route, `ws: true`, status 101, the close code,
 * how long it was open, the request id, and the key's id once
 * `connection_init` authenticated it. Never the key.
 */
import { Writable } from 'node:stream';
import { beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { startGateway, type Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/log.js';
import { createServices } from '../../src/services/index.js';
import { waitFor } from '../support/app.js';
import { onCleanup } from '../support/cleanup.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createSeed, type SeededUser } from '../support/gateway.js';

type Line = Record<string, unknown> & { level: string; msg: string };

let db: TestDatabase;
let gateway: Gateway;
let alice: SeededUser;
const lines: Line[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  const services = createServices(db.sql);
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(text) as Line);
      done();
    },
  });
  const logger = createLogger({ level: 'info', format: 'json' }, stream);
  gateway = await startGateway(db.sql, services, { port: 0, host: '127.0.0.1', log: () => {}, logger });
  onCleanup(async () => {
    await gateway.close();
    await db.close();
  });
  alice = await createSeed(services, gateway.url).user();
});

/** A `graphql-transport-ws` socket whose upgrade carries `requestId`; resolves once acknowledged or closed. */
async function openSocket(requestId: string, connectionParams: Record<string, unknown>) {
  const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/graphql?token=in-the-query`, 'graphql-transport-ws', {
    headers: { 'x-request-id': requestId },
  });
  let acked = false;
  let closed: number | undefined;
  socket.on('message', (data) => {
    if ((JSON.parse(String(data)) as { type: string }).type === 'connection_ack') acked = true;
  });
  socket.on('close', (code) => (closed = code));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  socket.send(JSON.stringify({ type: 'connection_init', payload: connectionParams }));
  await waitFor('connection_ack or close', async () => acked || closed !== undefined, 5000);
  return { socket, acked, closedCode: () => closed };
}

function accessLines(requestId: string) {
  return lines.filter((l) => l.reqId === requestId && l.msg === 'request');
}

async function accessLine(requestId: string) {
  return waitFor(`the access line of ${requestId}`, async () => accessLines(requestId)[0], 5000);
}

describe('the access line of a WebSocket connection', () => {
  test('written once when it closes: route, ws, 101, close code, duration, request id, key id; never the key', async () => {
    const { socket, acked } = await openSocket('ws-access-1', { authorization: `Bearer ${alice.key}` });
    expect(acked).toBe(true);
    // Nothing is written while the connection is open.
    await new Promise((r) => setTimeout(r, 60));
    expect(accessLines('ws-access-1')).toEqual([]);
    socket.close(1000, 'done');

    const line = await accessLine('ws-access-1');
    const [key] = await db.sql<{ id: string }[]>`SELECT id FROM api_keys WHERE user_id = ${alice.user.id}`;
    expect(line).toMatchObject({
      level: 'info',
      msg: 'request',
      reqId: 'ws-access-1',
      method: 'GET',
      route: '/graphql',
      ws: true,
      status: 101,
      closeCode: 1000,
      keyId: key!.id,
      service: 'dedicated-gateway',
    });
    expect(line.durationMs).toBeGreaterThanOrEqual(50);
    // One line for the connection, and no HTTP line for its upgrade.
    await new Promise((r) => setTimeout(r, 50));
    expect(accessLines('ws-access-1')).toHaveLength(1);
    const all = JSON.stringify(lines);
    expect(all).not.toContain(alice.key);
    expect(all).not.toContain('in-the-query');
  });

  test('a socket refused in connection_init is logged with its 4401 and no key id', async () => {
    const { acked, closedCode } = await openSocket('ws-access-2', { authorization: 'Bearer dek_wrong_key_0000000000000' });
    expect(acked).toBe(false);
    expect(closedCode()).toBe(4401);
    const line = await accessLine('ws-access-2');
    expect(line).toMatchObject({ route: '/graphql', ws: true, status: 101, closeCode: 4401 });
    expect('keyId' in line).toBe(false);
    expect(JSON.stringify(lines)).not.toContain('dek_wrong_key');
  });

  test('a socket the server closes (a malformed message: 4400) is logged with that code and its key id', async () => {
    const { socket, acked } = await openSocket('ws-access-3', { authorization: `Bearer ${alice.key}` });
    expect(acked).toBe(true);
    socket.send('not json');
    const line = await accessLine('ws-access-3');
    expect(line).toMatchObject({ ws: true, closeCode: 4400, keyId: expect.any(String) });
  });

  test('a connection that drops without a close frame is logged with 1006', async () => {
    const { socket, acked } = await openSocket('ws-access-4', { authorization: `Bearer ${alice.key}` });
    expect(acked).toBe(true);
    socket.terminate();
    const line = await accessLine('ws-access-4');
    expect(line).toMatchObject({ ws: true, closeCode: 1006, keyId: expect.any(String) });
  });
});
