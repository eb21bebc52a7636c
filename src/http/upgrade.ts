/**
 * The server's `upgrade` listener. Node hands it every request that carries
 * an Upgrade header, whatever the protocol asked for:
 *
 * - `Upgrade: websocket` at the GraphQL path opens graphql-ws; at any other
 *   target it is a JSON 404.
 * - Any other protocol (`h2c`, which `curl --http2` asks for) is declined as
 *   HTTP allows: a request without a body is served as the plain HTTP/1.1
 *   request it also is (then the connection closes). One with a body is a
 *   JSON 400 naming the header, since its body is no longer framed for us.
 */
import { ServerResponse, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { endWithJson } from './request-target.js';

export type WebSocketUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export function routeUpgrades(server: Server, websocketPath: string, websocket: WebSocketUpgrade): void {
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const path = (req.url ?? '').split('?')[0];
    if (req.headers.upgrade?.trim().toLowerCase() === 'websocket') {
      if (path === websocketPath) return websocket(req, socket, head);
      return endWithJson(socket, 404, 'Not Found', 'NOT_FOUND', `no WebSocket here: GraphQL's is at ${websocketPath}`, 'websocket-path');
    }
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) {
      return endWithJson(
        socket,
        400,
        'Bad Request',
        'INVALID_ARGUMENT',
        'Upgrade is supported only to websocket, at /graphql: send this request without the Upgrade header',
        'upgrade',
      );
    }
    serveAsPlainRequest(server, req, socket);
  });
}

/** Answers an upgrade request without a body through the server's request handler, on a connection that then closes. */
function serveAsPlainRequest(server: Server, req: IncomingMessage, socket: Duplex): void {
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as never);
  // The socket stays the response's until it closes, so that the response emits `close` (access lines and cleanups wait for it).
  res.once('finish', () => socket.end());
  // Node parsed no body for it (there is none): end the stream so that handlers reading one see it empty.
  if (!req.readableEnded) req.push(null);
  server.emit('request', req, res);
}
