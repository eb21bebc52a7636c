/**
 * The stall guard (src/util/stall-guard.ts) on a real HTTP response and a raw client socket: a client that takes
 * nothing of a stream for stallMs is cut; one that reads, however slowly, is not.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, expect, test } from 'vitest';
import { stallGuard } from '../../src/util/stall-guard.js';

const STALL_MS = 800;
const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A server that writes 64 KiB pieces as long as its response takes them, for `ms`; how it ended. */
async function streaming(ms: number) {
  const outcome: { destroyed?: boolean; written: number } = { written: 0 };
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const guard = stallGuard(res, STALL_MS);
    const piece = Buffer.alloc(64 * 1024, 'x');
    const started = Date.now();
    const more = () => {
      while (!res.destroyed && Date.now() - started < ms) {
        const accepted = res.write(piece);
        outcome.written += piece.length;
        guard.wrote(accepted);
        if (!accepted) return void res.once('drain', more);
      }
      guard.stop();
      outcome.destroyed = res.destroyed;
      if (!res.destroyed) res.end();
    };
    res.once('close', () => (outcome.destroyed ??= !res.writableFinished));
    more();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  return { socket, outcome };
}

test('a client that takes nothing for stallMs is cut', async () => {
  const { socket, outcome } = await streaming(10_000);
  socket.pause();
  await new Promise((resolve) => setTimeout(resolve, STALL_MS * 3));
  expect(outcome.destroyed).toBe(true);
  socket.destroy();
});

/** A consumer that takes one written piece when told to (a client reading slowly), and none otherwise. */
class SlowConsumer extends Writable {
  private readonly waiting: (() => void)[] = [];
  constructor() {
    super({ highWaterMark: 16 * 1024 });
  }
  override _write(_chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.waiting.push(done);
  }
  take(): void {
    this.waiting.shift()?.();
  }
}

test('a client that takes some of what is pending within each stallMs (however little) is not cut; one that stops is', async () => {
  const out = new SlowConsumer();
  let destroyed = false;
  out.on('close', () => (destroyed = true));
  const guard = stallGuard(out, STALL_MS);
  // Written until the buffer refuses, then nothing more until it drains (as the streams' writers do): the wait begins.
  for (let accepted = true; accepted;) guard.wrote((accepted = out.write(Buffer.alloc(1024, 'x'))));
  // One kilobyte of sixteen every half stallMs: slow, but it reads.
  const trickle = setInterval(() => out.take(), STALL_MS / 2);
  await new Promise((resolve) => setTimeout(resolve, STALL_MS * 4));
  expect(destroyed).toBe(false);
  // It stops reading: cut once a stallMs passes with nothing taken.
  clearInterval(trickle);
  await new Promise((resolve) => setTimeout(resolve, STALL_MS * 2.5));
  expect(destroyed).toBe(true);
  guard.stop();
});
