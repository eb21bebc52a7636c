/**
 * Whether a WebSocket's peer is still there and still reading (`websocket.ts`): a peer that answers no ping for
 * `keepAliveMs`, or that takes nothing of what waits to be sent for `stallMs`, is cut. And what is written to it
 * outside graphql-ws: shared results' `next` messages, close reasons.
 */
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import type { ExecutionResult } from 'graphql';
import { stallGuard } from '../../util/stall-guard.js';
import { resultJson, type ResultSink } from './shared-execution.js';

export interface PeerWatch {
  /** After each message sent: arms the stall guard when the socket's buffers are full. */
  sent(): void;
  /** The socket closed. */
  stop(): void;
}

/** Watches `socket`; `transport` is the connection it was upgraded from, whose pending writes the stall guard reads. */
export function watchPeer(socket: WebSocket, transport: Duplex | undefined, keepAliveMs: number, stallMs: number): PeerWatch {
  // Only the pong that carries our ping's payload answers it: a peer that reads nothing (and so never sees the ping)
  // could otherwise keep its socket by sending pongs of its own.
  let awaited: Buffer | null = null;
  let pongWait: NodeJS.Timeout | undefined;
  socket.on('pong', (data: Buffer) => {
    if (!awaited?.equals(data)) return;
    awaited = null;
    clearTimeout(pongWait);
  });
  const ping =
    keepAliveMs > 0
      ? setInterval(() => {
          if (socket.readyState !== WebSocket.OPEN || awaited) return;
          awaited = randomBytes(8);
          pongWait = setTimeout(() => socket.terminate(), keepAliveMs);
          socket.ping(awaited);
        }, keepAliveMs)
      : undefined;
  // A peer that takes nothing of what waits to be sent for stallMs is cut, as an SSE stream is (the guard destroys the
  // connection, and the socket's close follows): graphql-ws's sends wait for their writes, so a peer that reads
  // nothing would hold its operations, and their places, for as long as it stays connected.
  const stall = transport ? stallGuard(transport, stallMs) : undefined;
  return {
    sent: () => stall?.wrote(!transport!.writableNeedDrain),
    stop: () => {
      clearTimeout(pongWait);
      clearInterval(ping);
      stall?.stop();
    },
  };
}

/** Past this much unsent data on a socket, shared results wait for the socket like any other message. */
const SOCKET_HIGH_WATER = 256 * 1024;

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
