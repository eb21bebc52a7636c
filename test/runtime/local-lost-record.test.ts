/**
 * A local replica placed, then the write of its placement lost: the controller asks the local runtime to place the
 * replica (its model step, then its engine spawned, in the runtime's background) and records the engine's token in the
 * replica's row; when that write fails (PostgreSQL away for a moment, a connection broken) the runtime goes on and the
 * row says nothing of it. The next pass must adopt what this gateway process placed (Runtime.adopt) and follow its
 * start: one engine spawned, none stopped. (It used to judge the replica abandoned, stop its engine, perhaps loading a
 * large model for minutes, and spawn another from scratch.) Both ways: the engine already spawned when the next pass
 * looks, and its model step still downloading (then the row records its token, as a placement's write does, and the
 * engine once it is spawned).
 *
 * The write is lost in PostgreSQL itself, as in test/runtime/kubernetes-lost-record.test.ts: a trigger on the replicas
 * table cancels its own statement inside any update that gives a row its first engine token, while the test keeps it
 * armed (see FAULT). The gateway is the real one (controller, local runtime, real engine processes on the tiny
 * model); the stand-in hub is reached through a proxy that holds one repository's downloads while the test asks.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { SPAWN_LINE_PREFIX } from '../../src/runtime/local-runtime.js';
import { connectDatabase, type Sql } from '../../src/storage/database.js';
import { standardRepos, startTestApp, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';
import { placementRows } from '../support/placement-rows.js';

/** A repository of its own (its bytes in no cache yet), whose downloads the proxy holds while `holding`. */
const HELD_REPO = 'test-org/held-GGUF';

let hub: FakeHub;
let proxy: http.Server;
let holding = false;
/** Requests for HELD_REPO's files the proxy holds: each forwards its request when called. */
const held: (() => void)[] = [];

let t: TestApp;
let alice: SeededUser;
let projectEndpoint: (overrides: Record<string, unknown>) => Promise<string>;
/** The test's own connection: arms the fault and reads what the controller wrote. */
let observer: Sql;

/**
 * Cancels any update that gives a replica's row its first engine token while armed (pg_cancel_backend, as an
 * operator's or a statement_timeout would: 57014, which the gateway takes for its database away for a moment); counts
 * each cut. Not pg_terminate_backend, as in kubernetes-lost-record.test.ts: postgres.js 3.4.9 keeps the error of a
 * statement whose session ended that way and rejects the next statement of that connection with it, which here would
 * end the model step that runs beside the cuts, at random (a start lost to an outage, replaced: not this test's case).
 */
const FAULT = `
  CREATE TABLE test_cuts_armed (armed boolean);
  CREATE SEQUENCE test_cuts;
  CREATE FUNCTION test_cut() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF EXISTS (SELECT 1 FROM test_cuts_armed) THEN
      PERFORM nextval('test_cuts');
      PERFORM pg_cancel_backend(pg_backend_pid());
      PERFORM pg_sleep(30); -- the cancellation ends the statement here, before anything commits
    END IF;
    RETURN NEW;
  END $$;
  CREATE TRIGGER test_cut_placement BEFORE UPDATE ON replicas FOR EACH ROW
    WHEN (OLD.engine_token IS NULL AND NEW.engine_token IS NOT NULL) EXECUTE FUNCTION test_cut();`;

const arm = async () => void (await observer`INSERT INTO test_cuts_armed VALUES (true)`);
const disarm = async () => void (await observer`DELETE FROM test_cuts_armed`);
const cuts = async () => {
  const [row] = await observer<{ n: number }[]>`SELECT CASE WHEN is_called THEN last_value ELSE 0 END::int AS n FROM test_cuts`;
  return row!.n;
};

beforeAll(async () => {
  hub = await startFakeHub({ repos: [...standardRepos(), { id: HELD_REPO, files: { 'held-Q8_0.gguf': buildTinyGguf({ seed: 11 }) } }] });
  const hubPort = new URL(hub.url).port;
  proxy = http.createServer((req, res) => {
    const forward = () => {
      // The Host header is kept: the hub's redirects come back through the proxy.
      const upstream = http.request(
        { host: '127.0.0.1', port: hubPort, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      upstream.end(); // the hub answers GET and HEAD only: no body to forward
    };
    if (holding && req.method === 'GET' && req.url?.includes(`/${HELD_REPO}/resolve/`)) held.push(forward);
    else forward();
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  t = await startTestApp({ hub: { ...hub, url: proxyUrl } });
  observer = connectDatabase(t.dbUrl, { max: 1 });
  await observer.unsafe(FAULT);
  alice = await t.seed.user();
  const project = await alice.project('lost record');
  projectEndpoint = (overrides) => project.endpoint({ autoscalingPolicy: { minReplica: 1, maxReplica: 1 }, ...overrides });
}, 120_000);

/** The downloads go on, and the database answers: a test that failed leaves neither held. */
async function release(): Promise<void> {
  holding = false;
  for (const forward of held.splice(0)) forward();
  await disarm();
}

afterEach(release);

afterAll(async () => {
  await observer?.end({ timeout: 5 });
  proxy?.closeAllConnections();
  await new Promise((resolve) => (proxy ? proxy.close(resolve) : resolve(undefined)));
  await hub?.close();
});

const replicaRows = (endpointId: string) => placementRows(observer, endpointId);

/** How many engines the local runtime spawned for these replicas: the spawn lines their logs begin each run with. */
async function spawns(replicaIds: readonly string[]): Promise<number> {
  let n = 0;
  for (const id of replicaIds) {
    const log = await readFile(path.join(t.dataDir, 'replicas', `${id}.log`), 'utf8').catch(() => '');
    n += log.split('\n').filter((line) => line.startsWith(SPAWN_LINE_PREFIX)).length;
  }
  return n;
}

/**
 * The engine processes of these replicas that run now: each leads its own process group (spawned detached) and carries
 * its replica's REPLICA_ID (a process it forks carries it too, but leads no group).
 */
async function engineProcesses(replicaIds: readonly string[]): Promise<number[]> {
  const wanted = new Set(replicaIds.map((id) => `REPLICA_ID=${id}`));
  const found: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const environ = (await readFile(`/proc/${name}/environ`, 'latin1')).split('\0');
      if (!environ.some((entry) => wanted.has(entry))) continue;
      // The process group is the 5th field of stat, after the command in parentheses.
      const stat = await readFile(`/proc/${name}/stat`, 'latin1');
      if (stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2] === name) found.push(Number(name));
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** A chat completion through the gateway. */
async function chat(endpointId: string): Promise<{ status: number; content: unknown }> {
  const response = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: endpointId, max_tokens: 8, messages: [{ role: 'user', content: 'Hello' }] }),
  });
  const body = (await response.json()) as { choices?: { message?: { content?: unknown } }[] };
  return { status: response.status, content: body.choices?.[0]?.message?.content };
}

/** The endpoint RUNNING, served by its one replica ever (READY at the one engine spawned for it), and nothing stopped. */
async function expectServedByItsFirstEngine(endpointId: string, replicaId: string): Promise<void> {
  await waitForStatus(observer, endpointId, 'RUNNING');
  const rows = await replicaRows(endpointId);
  expect(rows).toEqual([{ id: replicaId, state: 'READY', locator: expect.stringMatching(/^\d+$/), has_token: true, last_error: null }]);
  expect(await spawns([replicaId])).toBe(1);
  expect(await engineProcesses([replicaId])).toEqual([Number(rows[0]!.locator)]);
  const answer = await chat(endpointId);
  expect(answer.status).toBe(200);
  expect(typeof answer.content).toBe('string');
}

test("the write of an engine's placement fails: the next pass adopts that engine, and records it once the database is back", async () => {
  const before = await cuts();
  await arm();
  const id = await projectEndpoint({ hfModelRepo: TINY_REPO });
  // The placement's write cut, then the next pass's (the database still refuses it): nothing stopped meanwhile.
  await waitFor('two writes cut', async () => (await cuts()) >= before + 2);
  const [replica] = await replicaRows(id);
  expect(await replicaRows(id)).toEqual([{ id: replica!.id, state: 'STARTING', locator: null, has_token: false, last_error: null }]);
  await waitFor('its engine spawned', async () => (await spawns([replica!.id])) > 0);
  // A pass after the spawn found the engine and tried to record it (its write cut too): the engine runs on meanwhile.
  const spawned = await cuts();
  await waitFor('a later write cut', async () => (await cuts()) > spawned);
  expect(await replicaRows(id)).toEqual([{ id: replica!.id, state: 'STARTING', locator: null, has_token: false, last_error: null }]);
  expect(await engineProcesses([replica!.id])).toHaveLength(1);

  await disarm();
  await expectServedByItsFirstEngine(id, replica!.id);
}, 120_000);

test('the write fails while the model still downloads: the next pass adopts the model step, then the engine it spawns', async () => {
  holding = true;
  const before = await cuts();
  await arm();
  const id = await projectEndpoint({ hfModelRepo: HELD_REPO });
  // The placement's write cut, then the next pass's (the database still refuses it), while the download waits.
  await waitFor('two writes cut, the download held', async () => (await cuts()) >= before + 2 && held.length > 0);
  const [replica] = await replicaRows(id);
  expect(await replicaRows(id)).toEqual([{ id: replica!.id, state: 'STARTING', locator: null, has_token: false, last_error: null }]);

  await disarm();
  // Recorded as a placement's write leaves it (its token, no engine to locate yet), and followed.
  await waitFor('the replica recorded placed', async () => (await replicaRows(id))[0]?.has_token === true);
  expect(await replicaRows(id)).toEqual([{ id: replica!.id, state: 'STARTING', locator: null, has_token: true, last_error: null }]);
  expect(await spawns([replica!.id])).toBe(0);

  await release();
  await expectServedByItsFirstEngine(id, replica!.id);
}, 120_000);
