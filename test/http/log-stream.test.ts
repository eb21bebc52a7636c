/**
 * A followed log written to a client that does not read (src/http/rest/replica-routes.ts, streamLog): the log is read
 * no faster than the socket takes it, so a client that stops reading holds nothing but the socket's own buffers in
 * the gateway; and a client that leaves ends the follow.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { streamLog } from '../../src/http/rest/replica-routes.js';

const CHUNKS = 64;
/** One chunk: 1,024 lines of 1 KiB (a MiB). */
const chunkLines = () => Array.from({ length: 1024 }, (_, i) => `${String(i).padStart(4, '0')} ${'x'.repeat(1018)}`);

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/**
 * A followed log of CHUNKS chunks, then nothing new (only the follow's end stops it), served by streamLog to a client
 * that sends its request and then reads nothing. `pulled`: the chunks read from the log so far; `ended`: the log's
 * reading has ended; `streaming`: the response's handling, once the request has come.
 */
async function followUnread(stallMs?: number) {
  const state = { pulled: 0, ended: false, streaming: undefined as Promise<void> | undefined };
  const stop = new AbortController();
  async function* log(): AsyncGenerator<string[]> {
    try {
      for (let i = 0; i < CHUNKS; i++) {
        state.pulled++;
        yield chunkLines();
      }
      // The log goes on, with nothing new: only the client's leaving (or its cut) ends the follow.
      await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
    } finally {
      state.ended = true;
    }
  }
  const server = http.createServer((req, res) => void (state.streaming = streamLog(req, res, 'rep_1', log(), stop, stallMs)));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  // The request, then no read at all.
  socket.pause();
  socket.write('GET /logs?follow=true HTTP/1.1\r\nHost: x\r\n\r\n');
  return { state, stop, socket };
}

test('a client that does not read holds the log back; when it leaves, the follow ends', async () => {
  const { state, stop, socket } = await followUnread();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  // What the kernel's buffers took (a few MiB on loopback), and one chunk waiting for them: not the whole log.
  expect(state.pulled).toBeGreaterThan(0);
  expect(state.pulled).toBeLessThan(CHUNKS / 2);
  const held = state.pulled;
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(state.pulled).toBe(held);
  // The client leaves: the follow's reading ends, and so does the response.
  socket.destroy();
  await state.streaming;
  expect(stop.signal.aborted).toBe(true);
  expect(state.ended).toBe(true);
});

test('a client that takes nothing for the stall bound is cut: the follow ends and its place goes back, though the client never left', async () => {
  const { state, stop, socket } = await followUnread(300);
  // Never read, never closed by the client: the gateway cuts it once its buffers have stayed full for 300 ms.
  await expect.poll(() => state.streaming !== undefined && stop.signal.aborted && state.ended).toBe(true);
  await state.streaming;
  socket.destroy();
});
