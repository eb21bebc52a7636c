/**
 * Whether a WebSocket's peer is still there and still reading (`websocket.ts`): a peer that answers no ping for
 * `keepAliveMs`, or that takes nothing of what waits to be sent for `stallMs`, is cut; one that is behind is not read
 * from until it has caught up. And what is written to it outside graphql-ws: shared results' `next` messages, close
 * reasons.
 */
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import type { ExecutionResult } from 'graphql';
import { stallGuard } from '../../util/stall-guard.js';
import { resultJson, type ResultSink } from './shared-execution.js';

/**
 * Past this much unsent data on a socket, shared results wait for the socket like any other message, and the socket's
 * own messages are not read until it has all been sent.
 */
const SOCKET_HIGH_WATER = 256 * 1024;

export interface PeerWatch {
  /** After each message sent: arms the stall guard when the socket's buffers are full, and stops reading past `SOCKET_HIGH_WATER`. */
  sent(): void;
  /** The socket closed. */
  stop(): void;
}

/** Watches `socket`; `transport` is the connection it was upgraded from, whose pending writes the stall guard reads. */
export function watchPeer(socket: WebSocket, transport: Duplex | undefined, keepAliveMs: number, stallMs: number): PeerWatch {
  // A peer that takes nothing of what waits to be sent for stallMs is cut, as an SSE stream is (the guard destroys the
  // connection, and the socket's close follows): graphql-ws's sends wait for their writes, so a peer that reads
  // nothing would hold its operations, and their places, for as long as it stays connected.
  const stall = transport ? stallGuard(transport, stallMs) : undefined;
  // Backpressure on the peer's messages: most are answered at once (a query, a subscribe refused past the socket's cap,
  // a ping), so a peer that writes them without reading the answers would have the gateway hold every answer, as fast
  // as it can make them, until the stall guard or the keep-alive cuts it. Past SOCKET_HIGH_WATER unsent, the socket is
  // not read (`ws` pauses its transport: the kernel's buffers fill, then the peer's writes wait) until it is back under
  // it; what the gateway writes (a chat's tokens) is never held back by it. The messages of a chunk already read are
  // still handled, so what one socket holds is about the high-water mark and one chunk's answers.
  let paused = false;
  const resume = () => {
    if (!paused) return;
    paused = false;
    socket.resume();
  };
  // 'drain' follows a write the transport refused (writableNeedDrain) once all it holds has been sent; a send that
  // finds it back under the mark resumes it sooner (a peer reading slowly, while other operations keep writing).
  transport?.on('drain', resume);
  const sent = () => {
    if (!transport) return;
    stall!.wrote(!transport.writableNeedDrain);
    if (!transport.writableNeedDrain || socket.bufferedAmount <= SOCKET_HIGH_WATER) return resume();
    if (paused) return;
    paused = true;
    socket.pause();
  };
  // `ws` answers the peer's pings itself (a pong with the ping's payload): a flood of them is held back the same way.
  socket.on('ping', sent);

  // Only the pong that carries our ping's payload answers it: a peer that reads nothing (and so never sees the ping)
  // could otherwise keep its socket by sending pongs of its own. A socket not read (above) cannot see the pong: while
  // it stays so the wait goes on, and the stall guard (armed: the transport refused a write) cuts a peer that takes
  // nothing of what waits for it.
  let awaited: Buffer | null = null;
  let pongWait: NodeJS.Timeout | undefined;
  socket.on('pong', (data: Buffer) => {
    if (!awaited?.equals(data)) return;
    awaited = null;
    clearTimeout(pongWait);
  });
  const unanswered = () => {
    if (paused) pongWait = setTimeout(unanswered, keepAliveMs);
    else socket.terminate();
  };
  const ping =
    keepAliveMs > 0
      ? setInterval(() => {
          if (socket.readyState !== WebSocket.OPEN || awaited) return;
          awaited = randomBytes(8);
          pongWait = setTimeout(unanswered, keepAliveMs);
          socket.ping(awaited);
        }, keepAliveMs)
      : undefined;
  return {
    sent,
    stop: () => {
      clearTimeout(pongWait);
      clearInterval(ping);
      stall?.stop();
      transport?.off('drain', resume);
    },
  };
}

/** A close reason fits in a control frame: 123 bytes. */
export function closeReason(reason: string): string {
  return Buffer.byteLength(reason) <= 123
    ? reason
    : `${Buffer.from(reason)
        .subarray(0, 120)
        .toString()
        .replace(/\uFFFD$/, '')}...`;
}

/**
 * One graphql-ws subscription's `next` messages, written straight to its
 * socket: the shared result's JSON (made once for all its subscribers) inside
 * the message graphql-ws itself would send. A socket that is behind refuses,
 * so that graphql-ws's own send, which waits for the write, paces it.
 */
export class WebSocketNextMessages implements ResultSink {
  constructor(
    private readonly socket: WebSocket,
    private readonly id: string,
    private readonly sent: () => void,
  ) {}

  write(result: ExecutionResult): boolean {
    const { socket } = this;
    if (socket.readyState !== WebSocket.OPEN || socket.bufferedAmount > SOCKET_HIGH_WATER) return false;
    socket.send(`{"id":${JSON.stringify(this.id)},"type":"next","payload":${resultJson(result)}}`);
    this.sent();
    return true;
  }
}
