/**
 * The request recorder across a real PostgreSQL outage: this file runs its own embedded PostgreSQL (not the one the
 * other test files share), stops it while outcomes are buffered, and starts it again on the same data and port. What
 * was recorded meanwhile (request-log rows, content, roll-ups, last-request times) is written once it is back; the
 * recorder meanwhile tries at a growing interval, counted on a real TCP relay in front of the database.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ContentCapture } from '../../src/router/content-capture.js';
import { RequestRecorder, type RecordedRequest } from '../../src/router/request-recorder.js';
import { createServices } from '../../src/services/index.js';
import { connectDatabase, migrate, type Sql } from '../../src/storage/database.js';
import { ensureDatabase, freePort, startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/storage/embedded-postgres.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let dir: string;
let port: number;
let pg: EmbeddedDatabase | undefined;
/** Setup and checks, straight to the database. */
let sql: Sql;
/** The recorders', through the relay. */
let relayed: Sql;
let relay: net.Server;
/** Connections the relay accepted (each a connection attempt of the recorder's pool). */
let connections = 0;
let endpointId: string;
let teamId: string;
let userId: string;

const start = () => startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), port });

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-recorder-outage-'));
  // The server runs as the `postgres` user, which must be able to reach its data directory.
  await chmod(dir, 0o755);
  port = await freePort();
  pg = await start();
  await ensureDatabase(pg.adminUrl, 'recorder');
  const url = pg.urlFor('recorder');
  sql = connectDatabase(url, { connectTimeoutSeconds: 1 });
  await migrate(sql);
  relay = net.createServer((client) => {
    connections++;
    const upstream = net.connect(port, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    // The database is down: the client's connection is reset, as a server going away resets it (a connection closed
    // quietly before the server's greeting would make postgres.js connect again at once, over and over).
    upstream.on('error', () => client.resetAndDestroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const relayUrl = new URL(url);
  relayUrl.port = String((relay.address() as net.AddressInfo).port);
  relayed = connectDatabase(relayUrl.toString(), { connectTimeoutSeconds: 1 });
  // postgres.js learns the array types on its first connection; the recorder's statements pass arrays (a gateway's
  // pool has run its migrations first).
  await relayed`SELECT 1`;
  const services = createServices(sql);
  const { principal, projectId } = await seedPrincipal(sql, services, 'recorder-outage');
  endpointId = await createEndpointThrough(services, principal, projectId);
  const [row] = await sql<{ team_id: string }[]>`SELECT team_id FROM endpoints WHERE id = ${endpointId}`;
  teamId = row!.team_id;
  userId = principal.user.id;
  await sql`UPDATE endpoint_versions SET enable_content_logging = true WHERE endpoint_id = ${endpointId}`;
}, 120_000);

afterAll(async () => {
  await relayed?.end({ timeout: 1 }).catch(() => {});
  await sql?.end({ timeout: 1 }).catch(() => {});
  await new Promise((resolve) => relay?.close(resolve));
  await pg?.stop();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

function entry(promptTokens: number, overrides: Partial<RecordedRequest> = {}): RecordedRequest {
  return {
    endpointId,
    replicaId: null,
    teamId,
    userId,
    stream: false,
    httpStatus: 200,
    promptTokens,
    completionTokens: 1,
    ttftMs: 1,
    durationMs: 2,
    queuedMs: 0,
    finishReason: 'stop',
    cancelled: false,
    startedAt: new Date(),
    ...overrides,
  };
}

function answered(text: string): ContentCapture {
  const capture = new ContentCapture([{ role: 'user', content: `prompt of ${text}` }], 0);
  capture.wholeBody(Buffer.from(JSON.stringify({ choices: [{ message: { content: text }, finish_reason: 'stop' }] })));
  return capture;
}

async function logged(from: number) {
  return sql<{ prompt_tokens: number; content: string | null }[]>`
    SELECT r.prompt_tokens, c.response->>'content' AS content FROM request_log r LEFT JOIN request_content c ON c.request_log_id = r.id
    WHERE r.endpoint_id = ${endpointId} AND r.prompt_tokens >= ${from} ORDER BY r.id`;
}

test('an outage loses nothing: the outcomes are held, tried again at a growing interval, and written once it is back', async () => {
  const lines: string[] = [];
  const recorder = new RequestRecorder(relayed, 50, (message) => lines.push(message));
  try {
    recorder.record(entry(1, { content: answered('ONE') }));
    await recorder.flush();
    expect(await logged(1)).toEqual([{ prompt_tokens: 1, content: 'ONE' }]);
    const [before] = await sql<{ at: Date }[]>`SELECT last_request_at AS at FROM endpoints WHERE id = ${endpointId}`;

    await pg!.stop();
    pg = undefined;
    connections = 0;
    recorder.record(entry(2, { content: answered('TWO') }));
    recorder.record(entry(3));
    recorder.record(entry(4, { completionTokens: 2 ** 31 })); // a value the database refuses: lost alone, later
    recorder.record(entry(5, { refused: true, httpStatus: 429 })); // counted in the roll-ups, never logged
    await recorder.flush();
    // 3 s of ticks every 50 ms: 60 tries without a back-off; with it, 50 ms doubled up to 5 s, about 6.
    await sleep(3_000);
    expect(connections).toBeGreaterThan(0);
    expect(connections).toBeLessThan(12);
    const lastSeen = new Date();
    recorder.record(entry(6));
    await recorder.flush();

    pg = await start();
    // Written by the timer at its next try, without a flush of ours.
    await expect
      .poll(() => logged(2), { timeout: 15_000 })
      .toEqual([
        { prompt_tokens: 2, content: 'TWO' },
        { prompt_tokens: 3, content: null },
        { prompt_tokens: 6, content: null },
      ]);
    await expect
      .poll(
        async () =>
          (await sql<{ n: number }[]>`SELECT sum(requests)::int AS n FROM endpoint_metrics_minute WHERE endpoint_id = ${endpointId}`)[0]!.n,
      )
      .toBe(6);
    await expect
      .poll(async () => (await sql<{ at: Date }[]>`SELECT last_request_at AS at FROM endpoints WHERE id = ${endpointId}`)[0]!.at.getTime())
      .toBeGreaterThanOrEqual(lastSeen.getTime());
    expect(before!.at.getTime()).toBeLessThan(lastSeen.getTime());
    await expect.poll(() => lines.at(-1)).toMatch(/^request recording resumed/);
    expect(lines).toEqual([
      'request recording waits for the database: 4 request outcomes held, written once it is back',
      'recording requests failed (1 of 4)',
      'request recording resumed: the request outcomes held while the database was unreachable are written',
    ]);
  } finally {
    await recorder.close();
  }
}, 60_000);

test('held outcomes count toward the bound: past it, new ones are dropped and counted while the database is down', async () => {
  const lines: string[] = [];
  const recorder = new RequestRecorder(relayed, 60_000, (message) => lines.push(message), { maxBuffered: 3 });
  try {
    await pg!.stop();
    pg = undefined;
    recorder.record(entry(101));
    recorder.record(entry(102));
    await recorder.flush();
    for (const n of [103, 104, 105]) recorder.record(entry(n));
    expect(recorder.dropped).toBe(2);
    pg = await start();
    for (let i = 0; i < 40 && !(await sql`SELECT 1`.then(() => true).catch(() => false)); i++) await sleep(250);
    await recorder.flush();
    expect((await logged(101)).map((r) => r.prompt_tokens)).toEqual([101, 102, 103]);
    expect(lines).toEqual([
      'request recording waits for the database: 2 request outcomes held, written once it is back',
      'request recording fell behind: 2 request outcomes dropped (2 since start)',
      'request recording resumed: the request outcomes held while the database was unreachable are written',
    ]);
  } finally {
    await recorder.close();
  }
}, 60_000);

test('held content is bounded by bytes: past it, the newer outcomes are written without their content, and counted', async () => {
  const lines: string[] = [];
  // Room for the content of two of these (each about 2,100 bytes: its prompt and its answer).
  const big = (n: number) => entry(n, { content: answered(`${n} ${'x'.repeat(1000)}`) });
  const recorder = new RequestRecorder(relayed, 60_000, (message) => lines.push(message), { maxHeldContentBytes: 5000 });
  try {
    await pg!.stop();
    pg = undefined;
    for (const n of [201, 202, 203, 204]) recorder.record(big(n));
    await recorder.flush();
    expect(recorder.contentDropped).toBe(2);
    pg = await start();
    for (let i = 0; i < 40 && !(await sql`SELECT 1`.then(() => true).catch(() => false)); i++) await sleep(250);
    await recorder.flush();
    const rows = await logged(201);
    expect(rows.map((r) => r.prompt_tokens)).toEqual([201, 202, 203, 204]);
    expect(rows.map((r) => r.content?.split(' ')[0] ?? null)).toEqual(['201', '202', null, null]);
    expect(lines).toContain('request recording holds at most 5000 bytes of content through an outage: 2 contents not written');
  } finally {
    await recorder.close();
  }
}, 60_000);
