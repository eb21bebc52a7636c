/**
 * Every writer of an endpoint event, in every gateway, takes one lock (events-repository.ts: ids in commit order).
 * An API change sends its events with its commit, so that a gateway frozen in the middle of one (a pause, a long
 * GC, a network partition) holds nobody else's writes. Here the API's connection runs through a relay that, once the
 * gateway has sent its event, stops passing the database's answers back: the gateway waits for them as a frozen one
 * would. Another session's event must still be written at once.
 */
import net from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createServices } from '../../src/services/index.js';
import { connectDatabase, type Sql } from '../../src/storage/database.js';
import { insertEvent } from '../../src/storage/events-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
let relay: net.Server;
let relayed: Sql;
/** Set: answers from the database are held (not passed to the gateway) once the gateway has sent an event. */
const hold = { armed: false, holding: false, held: [] as (() => void)[], eventStatements: new Set<string>() };

beforeAll(async () => {
  db = await createTestDatabase();
  relay = net.createServer((client) => {
    const url = new URL(db.dbUrl);
    const server = net.connect(Number(url.port), url.hostname);
    client.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1');
      // Parse messages ('P', length, statement name, query): the prepared statements that write events.
      for (const [, name, query] of text.matchAll(/P[\s\S]{4}([^\0]+)\0([^\0]*)\0/g))
        if (query!.includes('endpoint_events')) hold.eventStatements.add(name!);
      // Once armed, the gateway's first run of one of them (its Bind names it) starts the hold.
      if (hold.armed && [...hold.eventStatements].some((name) => text.includes(`${name}\0`))) hold.holding = true;
      server.write(chunk);
    });
    server.on('data', (chunk: Buffer) => {
      if (hold.holding) hold.held.push(() => client.write(chunk));
      else client.write(chunk);
    });
    client.on('error', () => server.destroy());
    server.on('error', () => client.destroy());
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const relayUrl = new URL(db.dbUrl);
  relayUrl.port = String((relay.address() as net.AddressInfo).port);
  relayed = connectDatabase(relayUrl.toString(), { max: 1 });
}, 60_000);

afterAll(async () => {
  await relayed?.end({ timeout: 1 }).catch(() => {});
  await new Promise((resolve) => relay?.close(resolve));
  await db?.close();
});

test('a gateway frozen after sending an update’s event holds no other writer: its commit went with the event', async () => {
  const seeding = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, seeding, 'frozen-writer');
  const id = await createEndpointThrough(seeding, principal, projectId);
  const frozen = createServices(relayed);
  // One update first: the relayed connection has its statements prepared (a statement new to a connection waits for
  // its description before it runs: the hold would then stop it before it took the lock).
  expect((await frozen.endpoints.update(principal, id, { newVersionComment: 'first' })).type).toBe('ok');

  hold.armed = true;
  const update = frozen.endpoints.update(principal, id, { newVersionComment: 'from the frozen gateway' });
  await expect.poll(() => hold.holding, { timeout: 10_000 }).toBe(true);
  // Another gateway's event: written at once (before: it waited for the frozen transaction's commit, without end).
  const other = insertEvent(db.sql, {
    endpointId: id,
    projectId,
    teamId: principal.actingTeamId!,
    type: 'RETRYING',
    status: null,
    phase: null,
    errorCode: null,
    versionIndex: null,
    cause: 'test:other-gateway',
    actorId: null,
  });
  const outcome = await Promise.race([other.then(() => 'written'), new Promise((r) => setTimeout(() => r('waited 5 s'), 5000))]);
  // The frozen gateway's change is committed although its answers have not reached it.
  const [version] = await db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM endpoint_versions WHERE endpoint_id = ${id}`;

  hold.armed = false;
  hold.holding = false;
  for (const pass of hold.held.splice(0)) pass();
  await other;
  expect(outcome).toBe('written');
  expect(version!.n).toBe(3);
  expect((await update).type).toBe('ok');
}, 60_000);
