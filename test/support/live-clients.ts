/**
 * Raw live clients for tests that watch the wire: a `graphql-transport-ws`
 * socket on plain `ws` (every message and the close code and reason), and an
 * SSE stream read from a real HTTP response.
 */
import { once } from 'node:events';
import net from 'node:net';
import WebSocket from 'ws';
import { waitFor } from './app.js';

export interface RawSocket {
  socket: WebSocket;
  /** Every message received, parsed. */
  messages: { id?: string; type: string; payload?: any }[];
  closed: { code: number; reason: string; at: number } | undefined;
  send(message: unknown): void;
  subscribe(id: string, query: string, variables?: Record<string, unknown>): void;
  /** The messages for one subscription id. */
  of(id: string): { type: string; payload?: any }[];
  waitClosed(timeoutMs?: number): Promise<{ code: number; reason: string; at: number }>;
}

/** A socket past `connection_ack` (or closed, when `ack` is false and the server refuses it). */
export async function openSocket(baseUrl: string, connectionParams: Record<string, unknown>, { ack = true } = {}): Promise<RawSocket> {
  const socket = new WebSocket(`${baseUrl.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
  const raw: RawSocket = {
    socket,
    messages: [],
    closed: undefined,
    send: (message) => socket.send(typeof message === 'string' || Buffer.isBuffer(message) ? message : JSON.stringify(message)),
    subscribe: (id, query, variables) => raw.send({ id, type: 'subscribe', payload: { query, ...(variables ? { variables } : {}) } }),
    of: (id) => raw.messages.filter((m) => m.id === id),
    waitClosed: (timeoutMs = 5000) => waitFor('the socket to close', async () => raw.closed, timeoutMs),
  };
  socket.on('message', (data) => {
    const message = JSON.parse(String(data));
    if (message.type === 'ping') socket.send(JSON.stringify({ type: 'pong' }));
    raw.messages.push(message);
  });
  socket.on('close', (code, reason) => (raw.closed = { code, reason: reason.toString(), at: performance.now() }));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  socket.send(JSON.stringify({ type: 'connection_init', payload: connectionParams }));
  if (ack) await waitFor('connection_ack', async () => raw.messages.some((m) => m.type === 'connection_ack') || raw.closed, 5000);
  return raw;
}

export interface SseStream {
  status: number;
  /** Every event received: `event` and parsed `data` (null for an empty data line). */
  events: { event: string; data: any; at: number }[];
  ended: { at: number } | undefined;
  close(): void;
}

/** A GraphQL subscription over SSE (GET with the query in the URL), read as it arrives. */
export async function openSse(
  baseUrl: string,
  key: string,
  query: string,
  variables: Record<string, unknown> = {},
  headers: Record<string, string> = {},
  /** POST: the operation as a JSON body (as curl sends it), instead of GET's query string. */
  method: 'GET' | 'POST' = 'GET',
): Promise<SseStream> {
  const url = new URL('/graphql', baseUrl);
  if (method === 'GET') {
    url.searchParams.set('query', query);
    url.searchParams.set('variables', JSON.stringify(variables));
  }
  const abort = new AbortController();
  const response = await fetch(url, {
    method,
    headers: {
      accept: 'text/event-stream',
      authorization: `Bearer ${key}`,
      ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(method === 'POST' ? { body: JSON.stringify({ query, variables }) } : {}),
    signal: abort.signal,
  });
  const stream: SseStream = { status: response.status, events: [], ended: undefined, close: () => abort.abort() };
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n').filter((l) => !l.startsWith(':'));
          if (lines.length === 0) continue;
          const event =
            lines
              .find((l) => l.startsWith('event:'))
              ?.slice(6)
              .trim() ?? 'message';
          const data = lines
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trim())
            .join('\n');
          stream.events.push({ event, data: data ? JSON.parse(data) : null, at: performance.now() });
        }
      }
    } catch {
      // aborted
    }
    stream.ended = { at: performance.now() };
  })();
  return stream;
}

/** A raw TCP connection to the gateway at `url`: what it received, and whether the gateway closed it. */
export async function rawConnection(url: string) {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  const conn = { socket, received: '', closed: false };
  socket.on('data', (chunk: Buffer) => (conn.received += chunk.toString('latin1')));
  socket.on('error', () => {});
  socket.once('close', () => (conn.closed = true));
  await once(socket, 'connect');
  return conn;
}

/** Asks /healthz on a kept-alive raw connection: resolves once its (next) 200 answer came. */
export async function askHealth(conn: Awaited<ReturnType<typeof rawConnection>>, timeoutMs = 30_000): Promise<void> {
  const answers = conn.received.split('HTTP/1.1 200').length;
  conn.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await waitFor(
    'the health answer',
    async () => conn.received.split('HTTP/1.1 200').length > answers && conn.received.endsWith('}'),
    timeoutMs,
  );
}
