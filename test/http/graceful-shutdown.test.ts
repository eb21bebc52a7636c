/**
 * A gateway process stopping as Kubernetes stops it (SIGTERM, in a rolling update or a node drain): it drains
 * (src/http/drain.ts). The real gateway (src/main.ts as `npm start` runs it), with an engine run through
 * ENGINE_COMMAND (below) whose stream of 5 tokens holds after the first until the test writes a `release` file.
 *
 * With a stream in flight, SIGTERM: new connections are refused; a kept-alive idle connection is closed; a request
 * that arrives on a busy connection is answered, `Connection: close`, and /readyz so is 503 `draining`; a WebSocket
 * is closed with 1001, an SSE subscription ends cleanly; the stream, released, completes with every token and
 * [DONE], and the process then exits, long before DRAIN_TIMEOUT_MS (10 min). A stream that outlasts
 * DRAIN_TIMEOUT_MS is cut at the bound, and the process exits.
 *
 * Before: SIGTERM cut every connection at once (the stream included), and /readyz answered 200 to the end.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, onTestFinished, test } from 'vitest';
import { liveReplicaRows, standardRepos, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';
import { openSocket, rawConnection } from '../support/live-clients.js';
import { startGatewayProcess, type GatewayProcess, gatewayExited as exited, killRecordedEngines } from '../support/processes.js';
import { ANSWER_WHOLE_JS, CHUNK_JS, STREAM_RELEASED_JS } from '../support/scripted-engine.js';

const ADMIN_KEY = 'test_graceful_shutdown_admin_key_0123';
const TOKENS = ['one', 'two', 'three', 'four', 'five'];

/** Streams TOKENS: the first at once, the rest once `release` exists in its directory. */
const ENGINE = `
import http from 'node:http';
import { existsSync } from 'node:fs';
const [port, dir] = [Number(process.argv[2]), process.argv[3]];
${CHUNK_JS}
${ANSWER_WHOLE_JS}
${STREAM_RELEASED_JS}
const tokens = ${JSON.stringify(TOKENS)};
http.createServer((req, res) => {
  if (req.method === 'GET') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', active: 0, queued: 0 }));
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    if (req.url === '/tokenize') {
      return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: 1, tokens: [1], max_model_len: 4096, max_input_length: 4096 }));
    }
    // A warm-up, or any request not streamed: answered whole.
    if (!JSON.parse(body).stream) return answerWhole(res);
    streamReleased(res, tokens);
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

let db: TestDatabase;
let hub: FakeHub;
let dir: string;
let env: Record<string, string>;
let endpointId: string;
let projectId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  hub = await startFakeHub({ repos: standardRepos() });
  dir = await mkdtemp(path.join(os.tmpdir(), 'graceful-shutdown-'));
  await chmod(dir, 0o755);
  const script = path.join(dir, 'engine.mjs');
  await writeFile(script, ENGINE);
  env = testEnv(dir, hub.url, {
    DATABASE_URL: db.dbUrl,
    ADMIN_API_KEY: ADMIN_KEY,
    ENGINE_COMMAND: `"${process.execPath}" "${script}" {port} "${dir}"`,
    // Each gateway stops its engine as it exits: the next test's gateway starts its own.
    STOP_ENGINES_ON_EXIT: '1',
  });
}, 120_000);

afterAll(async () => {
  if (!db) return;
  await killRecordedEngines(db.sql);
  await hub.close();
  await db.close();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

/** A gateway with a READY replica of the endpoint (created by the first one). */
async function servingGateway(extra: Record<string, string>): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({ ...env, ...extra });
  if (!endpointId) {
    const [project] = await db.sql<{ id: string }[]>`SELECT id FROM projects ORDER BY created_at LIMIT 1`;
    projectId = project!.id;
    const created = await restClient(gateway.url, ADMIN_KEY)(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(projectId, { hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    endpointId = created.body.endpointId as string;
  }
  await waitFor('a READY replica', async () => (await liveReplicaRows(db.sql, endpointId)).find((r) => r.state === 'READY'), 60_000);
  return gateway;
}

/** A streamed chat completion, read as it comes: its text so far, and how its body ended. */
async function openStream(url: string) {
  const response = await fetch(`${url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: endpointId, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
  expect(response.status).toBe(200);
  const stream = { text: '', ended: undefined as 'clean' | 'cut' | undefined, done: undefined as unknown as Promise<void> };
  stream.done = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>)
        stream.text += decoder.decode(chunk, { stream: true });
      stream.ended = 'clean';
    } catch {
      stream.ended = 'cut';
    }
  })();
  await waitFor('the first token', async () => stream.text.includes('"one"'), 30_000);
  return stream;
}

/** Whether a new connection is refused (or, accepted by a listener not yet closed, answered 503). */
function refusedOrUnavailable(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
    socket.once('connect', () => {
      socket.write('GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n');
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
      socket.once('close', () => resolve(received.startsWith('HTTP/1.1 503')));
    });
  });
}

test('SIGTERM drains: no new connections, readiness 503, subscriptions ended, the stream in flight completes, then the process exits', async () => {
  const gateway = await servingGateway({ DRAIN_TIMEOUT_MS: '600000' });
  const stream = await openStream(gateway.url);

  // A kept-alive connection, idle when the drain starts.
  const idle = await rawConnection(gateway.url);
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await waitFor('the health answer', async () => idle.received.includes('"ok"'), 10_000);
  expect(idle.received).toMatch(/connection: keep-alive/i);
  // A connection whose request has begun (its head not all sent) when the drain starts.
  const busy = await rawConnection(gateway.url);
  busy.socket.write('GET /readyz HTTP/1.1\r\nHost: x\r\n');
  // A WebSocket with a subscription, and an SSE subscription.
  const ws = await openSocket(gateway.url, { authorization: `Bearer ${ADMIN_KEY}` });
  ws.subscribe('events', 'subscription($p: ID!) { endpointEvents(projectId: $p) { id type } }', { p: projectId });
  const sse = await fetch(
    `${gateway.url}/graphql?query=${encodeURIComponent('subscription($p: ID!) { endpointEvents(projectId: $p) { id } }')}&variables=${encodeURIComponent(JSON.stringify({ p: projectId }))}`,
    { headers: { accept: 'text/event-stream', authorization: `Bearer ${ADMIN_KEY}` } },
  );
  expect(sse.status).toBe(200);
  const sseEnd = sse.text().then(
    () => 'clean',
    () => 'cut',
  );

  gateway.child.kill('SIGTERM');
  // Whatever fails below, the stream is let go, so that the gateway does not hold the file's clean-up for its drain.
  onTestFinished(() => writeFile(path.join(dir, 'release'), ''));
  await waitFor('new connections refused', () => refusedOrUnavailable(gateway.url), 10_000);
  await waitFor('the idle connection closed', async () => idle.closed, 10_000);
  expect((await ws.waitClosed(10_000)).code).toBe(1001);
  expect(await sseEnd).toBe('clean');
  busy.socket.write('\r\n');
  await waitFor('the readiness answer', async () => busy.closed, 10_000);
  expect(busy.received).toMatch(/^HTTP\/1\.1 503/);
  expect(busy.received).toMatch(/connection: close/i);
  expect(busy.received).toContain('"draining"');
  // The stream still runs: the process waits for it.
  expect(stream.ended).toBeUndefined();
  expect(gateway.child.exitCode).toBeNull();

  await writeFile(path.join(dir, 'release'), '');
  await stream.done;
  expect(stream.ended).toBe('clean');
  for (const token of TOKENS) expect(stream.text).toContain(`"${token}"`);
  expect(stream.text).toContain('data: [DONE]');
  // Idle now: it exits without waiting for DRAIN_TIMEOUT_MS (10 min, past this test's timeout).
  expect(await exited(gateway)).toBe(0);
}, 180_000);

test('a stream that outlasts DRAIN_TIMEOUT_MS is cut at the bound, and the process exits', async () => {
  await rm(path.join(dir, 'release'), { force: true });
  const gateway = await servingGateway({ DRAIN_TIMEOUT_MS: '1500' });
  const stream = await openStream(gateway.url);
  gateway.child.kill('SIGTERM');
  // The engine never releases the stream: only the bound ends it.
  expect(await exited(gateway)).toBe(0);
  await stream.done;
  expect(stream.text).not.toContain('[DONE]');
  expect(stream.ended).toBe('cut');
  expect(gateway.output()).toContain('still in flight after the drain');
}, 180_000);
