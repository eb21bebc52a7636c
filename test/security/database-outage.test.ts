/**
 * A PostgreSQL outage, for real: this file runs its own embedded PostgreSQL
 * (not the one the other test files share), stops it under a running
 * gateway, and starts it again on the same data and port. While it is down,
 * REST, GraphQL and chat answer 503 with Retry-After and say the database is
 * unavailable, and /readyz answers 503 within a second; once it is back the
 * gateway recovers by itself with nothing lost.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { httpStatusOf } from '../../src/domain/errors.js';
import { failureOf } from '../../src/http/failures.js';
import { startGateway, type Gateway } from '../../src/gateway.js';
import { createServices } from '../../src/services/index.js';
import { connectDatabase, migrate, type Sql } from '../../src/storage/database.js';
import { isDatabaseUnavailable } from '../../src/storage/database-errors.js';
import { ensureDatabase, freePort, startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/storage/embedded-postgres.js';
import { createBody, createSeed, type SeededUser } from '../support/gateway.js';
import { openSocket } from '../support/live-clients.js';

let dir: string;
let port: number;
let pg: EmbeddedDatabase | undefined;
let sql: Sql;
let gateway: Gateway;
let alice: SeededUser;
let projectId: string;
let endpointId: string;

const start = () => startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), port });

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-outage-pg-'));
  // The server runs as the `postgres` user, which must be able to reach its data directory.
  await chmod(dir, 0o755);
  port = await freePort();
  pg = await start();
  await ensureDatabase(pg.adminUrl, 'outage');
  sql = connectDatabase(pg.urlFor('outage'));
  await migrate(sql);
  const services = createServices(sql);
  gateway = await startGateway(sql, services, { port: 0, host: '127.0.0.1', log: () => {} });
  alice = await createSeed(services, gateway.url).user();
  const project = await alice.project('outage');
  projectId = project.id;
  endpointId = await project.endpoint({ name: 'before-the-outage' });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
  await sql?.end({ timeout: 1 }).catch(() => {});
  await pg?.stop();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

function chat(body: unknown) {
  return fetch(`${gateway.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

function graphql(query: string, variables: Record<string, unknown> = {}) {
  return fetch(`${gateway.url}/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
}

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await run();
  return { value, ms: performance.now() - started };
}

test('PostgreSQL stopped: 503 with Retry-After on REST, GraphQL and chat, /readyz 503 within 1 s; started again: recovery, nothing lost', async () => {
  expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);

  await pg!.stop();
  pg = undefined;

  // A statement now fails as an outage, and the one mapping calls it one.
  const failure = await sql`SELECT 1`.catch((error: unknown) => error);
  expect(isDatabaseUnavailable(failure)).toBe(true);
  expect(failureOf(failure)).toMatchObject({ kind: 'unavailable' });
  expect(httpStatusOf(failureOf(failure))).toBe(503);

  const ready = await timed(() => fetch(`${gateway.url}/readyz`));
  expect(ready.value.status).toBe(503);
  expect(ready.ms).toBeLessThan(1000);
  expect(await ready.value.json()).toEqual({ status: 'database unavailable' });

  // REST: a read, and a write that must not be half-done.
  const read = await timed(() => alice.rest('GET', `/dedicated/beta/endpoint/${endpointId}`));
  expect(read.value.status).toBe(503);
  expect(read.value.headers.get('retry-after')).toBe('5');
  expect(read.value.body.error).toMatchObject({ code: 'RESOURCE_EXHAUSTED', message: expect.stringContaining('database is unavailable') });
  expect(read.ms).toBeLessThan(6000);
  const write = await alice.rest('POST', '/dedicated/beta/endpoint', createBody(projectId, { name: 'during-the-outage' }));
  expect(write.status).toBe(503);
  expect(write.headers.get('retry-after')).toBe('5');

  // GraphQL over HTTP: status 503, the code in the extensions, Retry-After.
  const gql = await graphql('query($id: ID!) { endpoint(id: $id) { id name } }', { id: endpointId });
  expect(gql.status).toBe(503);
  expect(gql.headers.get('retry-after')).toBe('5');
  const gqlBody = (await gql.json()) as { errors: { message: string; extensions: Record<string, unknown> }[] };
  expect(gqlBody.errors[0]).toMatchObject({
    message: expect.stringContaining('database is unavailable'),
    extensions: { code: 'RESOURCE_EXHAUSTED', retryAfter: 5 },
  });
  expect(gqlBody.errors[0]!.extensions.http).toBeUndefined();
  const mutation = await graphql('mutation($id: ID!) { sleepEndpoint(id: $id) { __typename } }', { id: endpointId });
  expect(mutation.status).toBe(503);

  // Chat: the OpenAI error shape.
  const completion = await chat({ model: endpointId, messages: [{ role: 'user', content: 'hi' }] });
  expect(completion.status).toBe(503);
  expect(completion.headers.get('retry-after')).toBe('5');
  expect(await completion.json()).toEqual({
    error: { message: expect.stringContaining('database is unavailable'), type: 'server_error', param: null, code: 'database_unavailable' },
  });

  // WebSocket: a key that must be looked up closes the socket with 1013 "try again later", not 4500.
  const socket = await openSocket(gateway.url, { authorization: 'Bearer dek_not_cached_during_the_outage_0123456789' }, { ack: false });
  const closed = await socket.waitClosed(8000);
  expect(closed).toMatchObject({ code: 1013, reason: expect.stringContaining('database is unavailable') });

  // Back: the gateway recovers by itself.
  pg = await start();
  const recoveredAt = performance.now();
  for (;;) {
    const response = await alice.rest('GET', `/dedicated/beta/endpoint/${endpointId}`);
    if (response.status === 200) {
      expect(response.body).toMatchObject({ endpointId, name: 'before-the-outage' });
      break;
    }
    expect(response.status).toBe(503);
    expect(performance.now() - recoveredAt).toBeLessThan(20_000);
    await sleep(200);
  }
  // Ready again too (its own probe of the database may come a moment after the first answer).
  const readyBy = performance.now() + 10_000;
  while ((await fetch(`${gateway.url}/readyz`)).status !== 200) {
    expect(performance.now()).toBeLessThan(readyBy);
    await sleep(200);
  }

  // Nothing lost, nothing half-written: the one endpoint and its one version, and writes work again.
  const names = await sql<
    { name: string }[]
  >`SELECT v.name FROM endpoints e JOIN endpoint_versions v ON v.endpoint_id = e.id ORDER BY v.name`;
  expect(names.map((r) => r.name)).toEqual(['before-the-outage']);
  // A pooled connection the restart broke is found so by the first statement sent on it: that request is answered
  // 503 with Retry-After (nothing was written), and the client's retry goes through. Retried as a client would.
  const retried = async (send: () => ReturnType<typeof alice.rest>) => {
    for (;;) {
      const response = await send();
      if (response.status !== 503) return response;
      expect(response.headers.get('retry-after')).not.toBeNull();
      expect(performance.now() - recoveredAt).toBeLessThan(30_000);
      await sleep(200);
    }
  };
  const updated = await retried(() =>
    alice.rest('PUT', `/dedicated/beta/endpoint/${endpointId}`, { newVersionComment: 'after the outage' }),
  );
  expect(updated.status).toBe(200);
  expect(updated.body.versionIndex).toBe(1);
  const created = await retried(() => alice.rest('POST', '/dedicated/beta/endpoint', createBody(projectId, { name: 'after-the-outage' })));
  expect(created.status).toBe(200);
  const list = await graphql('query($p: ID) { endpoints(projectId: $p) { edges { node { name } } } }', { p: projectId });
  expect(list.status).toBe(200);
  expect(
    ((await list.json()) as { data: { endpoints: { edges: { node: { name: string } }[] } } }).data.endpoints.edges.map((e) => e.node.name),
  ).toEqual(['before-the-outage', 'after-the-outage']);
}, 90_000);
