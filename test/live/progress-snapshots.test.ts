/**
 * endpointStatus's download progress against the hub's shared snapshots: a
 * progress update shows the progress of its own moment whenever its
 * subscriber joined, and one tick is one read for every subscriber of a
 * gateway. Two gateways in this process, on one database, each with its own
 * hub; the progress is written by the test's own connection, as another
 * gateway's download would write it (announced through PostgreSQL).
 */
import { beforeAll, expect, test } from 'vitest';
import { startGateway, type Gateway } from '../../src/gateway.js';
import { createServices, type Services } from '../../src/services/index.js';
import { connectDatabase, type Sql } from '../../src/storage/database.js';
import { setProgress } from '../../src/storage/endpoints-repository.js';
import { waitFor } from '../support/app.js';
import { onCleanup } from '../support/cleanup.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createSeed, type SeededProject, type SeededUser } from '../support/gateway.js';
import { openSocket, type RawSocket } from '../support/live-clients.js';

/** The hub's snapshot read (src/live/event-hub.ts): one endpoint, deleted ones included, so nothing after the id. */
const SNAPSHOT_READ = /FROM endpoints e\b[\s\S]*WHERE e\.id = ANY\(\$1\)\s*$/;

let db: TestDatabase;
/** Gateway A's connection counts its snapshot reads. */
let snapshotReads = 0;
let a: Gateway;
let b: Gateway;
let servicesA: Services;
let alice: SeededUser;
let project: SeededProject;

async function gatewayOn(sql: Sql, services = createServices(sql)): Promise<Gateway> {
  const gateway = await startGateway(sql, services, { port: 0, host: '127.0.0.1', log: () => {} });
  onCleanup(async () => {
    await gateway.close();
    await sql.end({ timeout: 5 });
  });
  return gateway;
}

beforeAll(async () => {
  db = await createTestDatabase();
  onCleanup(() => db.close());
  const sqlA = connectDatabase(db.dbUrl, { onQuery: (query) => void (SNAPSHOT_READ.test(query) && snapshotReads++) });
  servicesA = createServices(sqlA);
  a = await gatewayOn(sqlA, servicesA);
  b = await gatewayOn(connectDatabase(db.dbUrl));
  alice = await createSeed(servicesA, a.url).user();
  project = await alice.project('progress');
});

const Q = 'subscription($id: ID!) { endpointStatus(endpointId: $id) { status { phase downloadProgress { bytesDone bytesTotal } } } }';
const done = (m: { payload?: any }): number | null => m.payload?.data?.endpointStatus?.status?.downloadProgress?.bytesDone ?? null;

async function downloading(): Promise<string> {
  const ep = await project.endpoint();
  await db.sql`UPDATE endpoints SET phase = 'DOWNLOADING_MODEL' WHERE id = ${ep}`;
  return ep;
}

/** A socket subscribed to the endpoint's status, once its first update (the current status) has come. */
async function watch(gateway: Gateway, ep: string): Promise<RawSocket> {
  const socket = await openSocket(gateway.url, { authorization: `Bearer ${alice.key}` });
  onCleanup(() => void socket.socket.close());
  socket.subscribe('s', Q, { id: ep });
  await waitFor('the first status', async () => socket.of('s').length === 1, 5000);
  return socket;
}

test('a progress update shows the progress now, never a snapshot cached by an earlier subscriber', async () => {
  const ep = await downloading();
  const x = await watch(a, ep);
  await setProgress(db.sql, ep, { bytesDone: 10, bytesTotal: 100 });
  await waitFor('x to see 10', async () => x.of('s').some((m) => done(m) === 10), 5000);
  x.socket.close();
  await x.waitClosed();

  await setProgress(db.sql, ep, { bytesDone: 50, bytesTotal: 100 }); // nobody watches
  const y = await watch(a, ep);
  await setProgress(db.sql, ep, { bytesDone: 60, bytesTotal: 100 });
  await waitFor('y second update', async () => y.of('s').length === 2, 5000);
  expect(y.of('s').map(done)).toEqual([50, 60]);
});

test('subscribers that joined at different ticks, on two gateways, each see every tick; a tick is one read per gateway', async () => {
  const ep = await downloading();
  const onA: RawSocket[] = [];
  const onB: RawSocket[] = [];
  const all = () => [...onA, ...onB];
  const seen = (value: number) =>
    waitFor(`every subscriber to see ${value}`, async () => all().every((s) => s.of('s').some((m) => done(m) === value)), 5000);
  // One more subscriber on each gateway before each tick: each has seen a different number of ticks.
  for (const value of [10, 20, 30]) {
    onA.push(await watch(a, ep));
    onB.push(await watch(b, ep));
    await setProgress(db.sql, ep, { bytesDone: value, bytesTotal: 100 });
    await seen(value);
  }
  // A subscriber's update comes after the read it shows: once all have it, the tick's reads are all counted.
  snapshotReads = 0;
  await setProgress(db.sql, ep, { bytesDone: 40, bytesTotal: 100 });
  await seen(40);
  expect(snapshotReads).toBe(1);
  for (const socket of [onA, onB]) {
    expect(socket.map((s) => s.of('s').map(done))).toEqual([
      [null, 10, 20, 30, 40],
      [10, 20, 30, 40],
      [20, 30, 40],
    ]);
  }
});
