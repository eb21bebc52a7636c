/**
 * HTTP_MAX_CONNECTIONS: the gateway process (src/main.ts as `npm start` runs it) holds at most that many connections
 * at once, of every kind; one more is closed as it is accepted, unanswered, and those open go on being served. A
 * value out of its range stops the start with an error naming the variable and the rule.
 *
 * Before: no cap (server.maxConnections unset): connections were bounded only by their timeouts and the open-file
 * limit, which the engines and the database share.
 */
import { expect, test } from 'vitest';
import { waitFor } from '../support/app.js';
import { askHealth, rawConnection } from '../support/live-clients.js';
import { gatewayProcessSetting, startGatewayProcess } from '../support/processes.js';

const setting = gatewayProcessSetting('connection-cap', 'test_connection_cap_admin_key_0123');

test('past HTTP_MAX_CONNECTIONS a new connection is closed unanswered; those open are still served, and a freed place is taken again', async () => {
  const gateway = await startGatewayProcess({ ...setting.env, HTTP_MAX_CONNECTIONS: '3' });
  const open = [await rawConnection(gateway.url), await rawConnection(gateway.url), await rawConnection(gateway.url)];
  for (const conn of open) await askHealth(conn);

  const refused = await rawConnection(gateway.url);
  refused.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await waitFor('the connection past the cap closed', async () => refused.closed, 10_000);
  expect(refused.received).toBe('');

  for (const conn of open) {
    await askHealth(conn);
    expect(conn.closed).toBe(false);
  }

  // One closed by its client: its place is free again (once the gateway has seen it close).
  open[0]!.socket.end();
  await waitFor(
    'a new connection served',
    async () => {
      const conn = await rawConnection(gateway.url);
      conn.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      await waitFor('the connection to end', async () => conn.closed, 10_000);
      return conn.received.startsWith('HTTP/1.1 200');
    },
    10_000,
  );
  for (const conn of open) conn.socket.destroy();
}, 120_000);

test('a bad HTTP_MAX_CONNECTIONS stops the start, naming the variable and the rule', async () => {
  // Side by side: each is a process that loads the sources before it reads its configuration.
  const values = ['0', 'many', '100000000'];
  const failures = await Promise.all(
    values.map((value) =>
      startGatewayProcess({ ...setting.env, HTTP_MAX_CONNECTIONS: value }).then(
        () => 'started',
        (error: Error) => error.message,
      ),
    ),
  );
  values.forEach((value, i) => {
    expect(failures[i]).toContain('Configuration error: HTTP_MAX_CONNECTIONS must be an integer from 1 to');
    expect(failures[i]).toContain(JSON.stringify(value));
  });
}, 120_000);
