/**
 * A replica left starting by a gateway that stopped, whose liveness this gateway's runtime cannot tell (here: the
 * local runtime, and a replica recorded on another machine): the endpoint is neither resumed nor given a second
 * replica while it cannot tell, and after the crash policy's `unknownMs` without a break the replica is given up
 * (STOPPED, with why) and a new one serves in its place. The gateway restarts around the change that makes the replica
 * another machine's: the passes that follow are all of a gateway that found it so.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { liveReplicaRows, startTestApp, statusOf, TINY_REPO, waitFor, waitForStatus, type TestApp } from '../support/app.js';
import type { SeededProject } from '../support/gateway.js';
import { isRunning } from '../support/processes.js';

const UNKNOWN_MS = 5000;
let t: TestApp;
let project: SeededProject;
let strayPid: number | undefined;

beforeAll(async () => {
  t = await startTestApp({ controller: { crashLoop: { unknownMs: UNKNOWN_MS } } });
  project = await (await t.seed.user()).project('unknown-liveness');
}, 120_000);

afterAll(async () => {
  // The restart reaps it (an engine of this machine that no replica of this machine claims): killed here only if not.
  if (strayPid && (await isRunning(strayPid))) process.kill(strayPid, 'SIGKILL');
}, 120_000);

test('a starting replica the runtime cannot see holds the endpoint for unknownMs, then is given up and replaced', async () => {
  const id = await project.endpoint({ hfModelRepo: TINY_REPO });
  await waitForStatus(t.sql, id, 'RUNNING');
  const [replica] = await liveReplicaRows(t.sql, id);
  strayPid = replica!.pid;
  // The gateway stops (as one on another machine would have) before its replica is made out to be left there: RUNNING
  // shows before the start's last writes (its warm-up's count refresh) and the passes under way have ended, and those
  // recount the replicas as the table has them then. Its controller first, which waits for them all, then the rest.
  await t.app.controller.stop();
  // As a gateway on another machine would have left it: starting there, its engine out of this runtime's sight.
  await t.sql`UPDATE replicas SET state = 'STARTING', node = 'another-machine' WHERE id = ${replica!.id}`;
  const shown = await statusOf(t.sql, id);
  // This gateway starts again, and takes the endpoint over.
  await t.restart();

  // The controller renews the endpoint's lease on every tick (100 ms here) and passes over the endpoint: five
  // renewals seen are several passes, well within UNKNOWN_MS.
  const expiries = new Set<string>();
  await waitFor('five lease renewals', async () => {
    const [lease] = await t.sql<{ expires_at: Date }[]>`SELECT expires_at FROM endpoint_leases WHERE endpoint_id = ${id}`;
    if (lease) expiries.add(lease.expires_at.toISOString());
    return expiries.size >= 5;
  });
  const during = await t.sql<{ id: string; state: string }[]>`SELECT id, state FROM replicas WHERE endpoint_id = ${id}`;
  expect(during).toEqual([{ id: replica!.id, state: 'STARTING' }]);
  expect(await statusOf(t.sql, id)).toEqual(shown);

  // Past UNKNOWN_MS it is given up, with why, and a replica started here serves.
  const serving = await waitFor(
    'a new replica serving',
    async () => (await liveReplicaRows(t.sql, id)).find((r) => r.state === 'READY' && r.id !== replica!.id),
    60_000,
  );
  const [given] = await t.sql<{ state: string; last_error: string }[]>`SELECT state, last_error FROM replicas WHERE id = ${replica!.id}`;
  expect(given!.state).toBe('STOPPED');
  expect(given!.last_error).toMatch(/^given up: the local runtime could not tell for \d+ s whether it runs$/);
  expect((await liveReplicaRows(t.sql, id)).map((r) => r.id)).toEqual([serving.id]);
  await waitForStatus(t.sql, id, 'RUNNING');
}, 120_000);
