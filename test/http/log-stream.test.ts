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

test('a client that does not read holds the log back; when it leaves, the follow ends', async () => {
  let pulled = 0;
  let ended = false;
  const stop = new AbortController();
  let streaming: Promise<void> | undefined;
  async function* log(): AsyncGenerator<string[]> {
    try {
      for (let i = 0; i < CHUNKS; i++) {
        pulled++;
        yield chunkLines();
      }
      // The log goes on, with nothing new: only the client's leaving ends the follow.
      await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
    } finally {
      ended = true;
    }
  }
  const server = http.createServer((req, res) => void (streaming = streamLog(req, res, 'rep_1', log(), stop)));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  // The request, then no read at all.
  socket.pause();
  socket.write('GET /logs?follow=true HTTP/1.1\r\nHost: x\r\n\r\n');
  await new Promise((resolve) => setTimeout(resolve, 1500));
  // What the kernel's buffers took (a few MiB on loopback), and one chunk waiting for them: not the whole log.
  expect(pulled).toBeGreaterThan(0);
  expect(pulled).toBeLessThan(CHUNKS / 2);
  const held = pulled;
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(pulled).toBe(held);
  // The client leaves: the follow's reading ends, and so does the response.
  socket.destroy();
  await streaming;
  expect(stop.signal.aborted).toBe(true);
  expect(ended).toBe(true);
});

test('a client that takes nothing for the stall bound is cut: the follow ends and its place goes back, though the client never left', async () => {
  let ended = false;
  const stop = new AbortController();
  let streaming: Promise<void> | undefined;
  async function* log(): AsyncGenerator<string[]> {
    try {
      for (let i = 0; i < CHUNKS; i++) yield chunkLines();
      await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
    } finally {
      ended = true;
    }
  }
  const server = http.createServer((req, res) => void (streaming = streamLog(req, res, 'rep_1', log(), stop, 300)));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.pause();
  socket.write('GET /logs?follow=true HTTP/1.1\r\nHost: x\r\n\r\n');
  // Never read, never closed by the client: the gateway cuts it once its buffers have stayed full for 300 ms.
  await streaming;
  await expect.poll(() => streaming !== undefined && stop.signal.aborted && ended).toBe(true);
  socket.destroy();
});
