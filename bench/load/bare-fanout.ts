/**
 * The fan-out floor (a child process): a bare server that speaks just enough
 * `graphql-transport-ws` and SSE for bench/load/subscribers.ts — ack, one
 * initial `next`, then, on an IPC `broadcast`, one pre-serialized `next` to
 * every subscriber. No GraphQL execution, no database. Run with
 * `--expose-gc` so it reports its heap like bench/gateway-child.ts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { childMain } from '../lib/env.js';

declare const gc: (() => void) | undefined;

const status = { status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE', currReplicaCnt: 0 };

childMain<Record<string, never>, { closed: true }>(async (_config, send, receive) => {
  const sockets = new Set<WebSocket>();
  const streams = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      res.write(`event: next\ndata: ${JSON.stringify({ data: { endpointStatus: { event: null, status } } })}\n\n`);
      streams.add(res);
      res.on('close', () => streams.delete(res));
    });
  });
  const wss = new WebSocketServer({ server, path: '/graphql' });
  wss.on('connection', (socket) => {
    socket.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8')) as { type: string; id?: string };
      if (message.type === 'connection_init') socket.send('{"type":"connection_ack"}');
      else if (message.type === 'subscribe') {
        socket.send(JSON.stringify({ id: message.id, type: 'next', payload: { data: { endpointStatus: { event: null, status } } } }));
        sockets.add(socket);
      } else if (message.type === 'ping') socket.send('{"type":"pong"}');
    });
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  send({ type: 'ready', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  await new Promise<void>((resolve) => {
    receive((message) => {
      if (message.type === 'broadcast') {
        const data = {
          endpointStatus: {
            event: { id: String(message.versionIndex), type: 'VERSION_ADDED', versionIndex: message.versionIndex },
            status,
          },
        };
        const ws = JSON.stringify({ id: '1', type: 'next', payload: { data } });
        const sse = `event: next\ndata: ${JSON.stringify({ data })}\n\n`;
        for (const socket of sockets) socket.send(ws);
        for (const res of streams) res.write(sse);
      } else if (message.type === 'heap') {
        if (message.gc !== false && typeof gc === 'function') {
          gc();
          gc();
        }
        const usage = process.memoryUsage();
        send({ type: 'heap', heapUsed: usage.heapUsed, rss: usage.rss, subscribers: sockets.size + streams.size });
      } else if (message.type === 'stop') {
        resolve();
      }
    });
  });
  for (const socket of sockets) socket.terminate();
  for (const res of streams) res.destroy();
  wss.close();
  server.closeAllConnections();
  server.close();
  return { closed: true };
});
