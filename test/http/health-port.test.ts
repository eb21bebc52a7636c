/**
 * HEALTH_PORT: /healthz and /readyz on a listener of their own (src/http/health-listener.ts), outside the main
 * server's HTTP_MAX_CONNECTIONS. The real gateway (src/main.ts as `npm start` runs it) with its main port filled with
 * idle connections: a probe there is closed unanswered, and one on HEALTH_PORT is answered; while the gateway drains,
 * the main port refuses connections and HEALTH_PORT's /readyz answers 503 `draining` (its /healthz 200) until the
 * drain is over. The listener has a cap of its own and short timeouts; a bad HEALTH_PORT stops the start.
 *
 * Before: the probes were served on the main port only, so a thousand idle sockets failed the liveness probe and had
 * the kubelet restart a gateway that was fine, cutting every stream it served.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startGateway } from '../../src/gateway.js';
import { HEALTH_MAX_CONNECTIONS } from '../../src/http/health-listener.js';
import { createServices } from '../../src/services/index.js';
import { waitFor } from '../support/app.js';
import { onCleanup } from '../support/cleanup.js';
import { askHealth, rawConnection } from '../support/live-clients.js';
import { gatewayProcessSetting, startGatewayProcess, type GatewayProcess } from '../support/processes.js';

const ADMIN_KEY = 'test_health_port_admin_key_0123456';

const setting = gatewayProcessSetting('health-port', ADMIN_KEY);

type Raw = Awaited<ReturnType<typeof rawConnection>>;

/** A probe as a kubelet makes it: a new connection, one request; what came back ('' when it was closed unanswered). */
async function probe(url: string, route: string): Promise<string> {
  const conn = await rawConnection(url);
  conn.socket.write(`GET ${route} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  await waitFor(`${route} to end`, async () => conn.closed, 30_000);
  return conn.received;
}

/** Whether a TCP connection to `url` is refused. */
function refused(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

describe('a gateway process with HEALTH_PORT and a full main port', () => {
  let gateway: GatewayProcess;
  /** The main port's places, all taken by idle connections. */
  let flood: Raw[];

  beforeAll(async () => {
    gateway = await startGatewayProcess({
      ...setting.env,
      HTTP_MAX_CONNECTIONS: '3',
      HEALTH_PORT: '0',
      // The drain lasts until the test ends the request it holds.
      DRAIN_TIMEOUT_MS: '600000',
      REQUEST_TIMEOUT_MS: '600000',
    });
    flood = [];
    for (let i = 0; i < 3; i++) flood.push(await rawConnection(gateway.url));
    // Each answered once: the gateway has accepted it, and counts it.
    for (const conn of flood) await askHealth(conn);
  }, 120_000);

  // A request a failed test left held would keep the gateway's drain, and the file's clean-up, waiting.
  afterAll(() => flood?.forEach((conn) => conn.socket.destroy()));

  /** Where the probes' listener is: the gateway logs it as it starts. */
  const healthUrlOf = () =>
    waitFor(
      "the health listener's URL in the log",
      async () => /Health checks \(\/healthz, \/readyz\) on (http:\/\/[\d.:]+)/.exec(gateway.output())?.[1],
      30_000,
    );

  test('the main port refuses the probe; HEALTH_PORT answers it, as the main port does, and only it', async () => {
    // The liveness probe on the main port fails: the connection is closed unanswered.
    expect(await probe(gateway.url, '/healthz')).toBe('');

    const healthUrl = await healthUrlOf();
    // An idle connection to the probes' listener: closed (408) after its short timeout.
    const idle = await rawConnection(healthUrl);

    const healthz = await probe(healthUrl, '/healthz');
    expect(healthz).toMatch(/^HTTP\/1\.1 200 /);
    expect(healthz).toMatch(/\r\nconnection: close\r\n/i);
    expect(healthz.endsWith('{"status":"ok"}')).toBe(true);
    const readyz = await probe(healthUrl, '/readyz');
    expect(readyz).toMatch(/^HTTP\/1\.1 200 /);
    expect(readyz.endsWith('{"status":"ready"}')).toBe(true);
    for (const route of ['/graphql', '/metrics', '/dedicated/beta/endpoint', '/', '/healthz/x']) {
      const answer = await probe(healthUrl, route);
      expect(answer, route).toMatch(/^HTTP\/1\.1 404 /);
      expect(answer, route).toContain('"code":"NOT_FOUND"');
    }

    // The flood is still served on the main port: nothing of it was dropped to make room.
    for (const conn of flood) {
      await askHealth(conn);
      expect(conn.closed).toBe(false);
    }

    await waitFor('the idle connection to the probes closed', async () => idle.closed, 60_000);
    expect(idle.received).toMatch(/^HTTP\/1\.1 408 /);
  }, 120_000);

  test("while the gateway drains, HEALTH_PORT's /readyz answers 503 and its /healthz 200, until the drain is over", async () => {
    // A request in flight on one of the flood's connections, its body held back: the drain waits for it. Its
    // `100 Continue` says the gateway is reading it.
    const held = flood[0]!;
    const before = held.received.length;
    held.socket.write(
      'POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n' +
        `Authorization: Bearer ${ADMIN_KEY}\r\nContent-Length: 100\r\n\r\n`,
    );
    await waitFor('100 Continue', async () => held.received.slice(before).includes('HTTP/1.1 100 Continue'), 30_000);
    const healthUrl = await healthUrlOf();

    const exited = new Promise<void>((resolve) => gateway.child.once('exit', () => resolve()));
    gateway.child.kill('SIGTERM');
    await expect.poll(async () => probe(healthUrl, '/readyz'), { timeout: 30_000, interval: 50 }).toMatch(/^HTTP\/1\.1 503 /);
    const readyz = await probe(healthUrl, '/readyz');
    expect(readyz.endsWith('{"status":"draining"}')).toBe(true);
    expect(await probe(healthUrl, '/healthz')).toMatch(/^HTTP\/1\.1 200 /);
    // The main port is closed from the drain's start: a probe there would fail.
    expect(await refused(gateway.url)).toBe(true);

    // The request's client goes: the drain is over, and the probes' listener closes with the process.
    held.socket.destroy();
    await exited;
    expect(gateway.output()).not.toMatch(/shutdown failed/);
    expect(await refused(healthUrl)).toBe(true);
  }, 120_000);
});

test("the probes' listener has a cap of its own: past it a connection is closed unanswered, the main port unaffected", async () => {
  const services = createServices(setting.db.sql);
  // A long timeout here: the connections held below must not be cut by it while the test runs on a loaded machine.
  const g = await startGateway(setting.db.sql, services, {
    port: 0,
    host: '127.0.0.1',
    healthPort: 0,
    healthListener: { timeoutMs: 600_000 },
    log: () => {},
  });
  onCleanup(() => g.close());
  const healthUrl = g.healthUrl!;
  expect(healthUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  // Connected in turn: Node accepts them in that order, so the last one is accepted after all the others.
  const held: Raw[] = [];
  for (let i = 0; i < HEALTH_MAX_CONNECTIONS; i++) held.push(await rawConnection(healthUrl));
  expect(await probe(healthUrl, '/healthz')).toBe('');
  expect(held.some((conn) => conn.closed)).toBe(false);
  // The main server's probes are served as ever.
  expect(await probe(g.url, '/healthz')).toMatch(/^HTTP\/1\.1 200 /);

  // One closed by its client: its place is taken by the next (once the listener has seen it close).
  held[0]!.socket.destroy();
  await waitFor('a probe answered again', async () => (await probe(healthUrl, '/healthz')).startsWith('HTTP/1.1 200'), 30_000);
  for (const conn of held) conn.socket.destroy();
}, 120_000);

test('a HEALTH_PORT already taken stops the start', async () => {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()));
  onCleanup(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const port = (taken.address() as net.AddressInfo).port;
  const failure = await startGatewayProcess({ ...setting.env, HEALTH_PORT: String(port) }).then(
    () => 'started',
    (error: Error) => error.message,
  );
  expect(failure).toContain(`EADDRINUSE: address already in use 127.0.0.1:${port}`);
}, 120_000);

test('HEALTH_PORT: unset, none; a port other than PORT; otherwise a configuration error naming the variable and the rule', async () => {
  expect(loadConfig({}).healthPort).toBeUndefined();
  expect(loadConfig({ HEALTH_PORT: '' }).healthPort).toBeUndefined();
  expect(loadConfig({ HEALTH_PORT: '8081' }).healthPort).toBe(8081);
  expect(loadConfig({ PORT: '0', HEALTH_PORT: '0' }).healthPort).toBe(0);
  expect(() => loadConfig({ HEALTH_PORT: 'eighty' })).toThrow('HEALTH_PORT must be an integer from 0 to 65535 (got "eighty")');
  expect(() => loadConfig({ HEALTH_PORT: '70000' })).toThrow('HEALTH_PORT must be an integer from 0 to 65535 (got "70000")');
  expect(() => loadConfig({ HEALTH_PORT: '8080' })).toThrow('HEALTH_PORT must differ from PORT (8080)');
  expect(() => loadConfig({ PORT: '9000', HEALTH_PORT: '9000' })).toThrow('HEALTH_PORT must differ from PORT (9000)');

  // As `npm start` says it.
  const failure = await startGatewayProcess({ ...setting.env, PORT: '9000', HEALTH_PORT: '9000' }).then(
    () => 'started',
    (error: Error) => error.message,
  );
  expect(failure).toContain(
    'Configuration error: HEALTH_PORT must differ from PORT (9000): the probes listen apart from the API (got "9000")',
  );
}, 120_000);
