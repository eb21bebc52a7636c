/**
 * A listening server's later 'error' events (an accept that failed: the process out of file descriptors under a
 * flood of connections) do not end the process, however many come: Node throws an 'error' event nobody listens to.
 * The server goes on accepting. A real server on a real port.
 */
import http from 'node:http';
import { expect, test } from 'vitest';
import { listen } from '../../src/http/listen.js';

test('errors after the server listens are not thrown, and it still answers', async () => {
  const server = http.createServer((_req, res) => res.end('ok'));
  const url = await listen(server, 0, '127.0.0.1');
  try {
    for (let i = 0; i < 3; i++) expect(() => server.emit('error', new Error('accept EMFILE'))).not.toThrow();
    expect(await (await fetch(url)).text()).toBe('ok');
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a port already taken rejects the listen', async () => {
  const first = http.createServer();
  const url = await listen(first, 0, '127.0.0.1');
  try {
    await expect(listen(http.createServer(), Number(new URL(url).port), '127.0.0.1')).rejects.toMatchObject({ code: 'EADDRINUSE' });
  } finally {
    await new Promise((resolve) => first.close(resolve));
  }
});
