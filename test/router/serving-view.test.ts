/**
 * The router's view follows the announced endpoint events: each event reads
 * the endpoint and its ready replicas again at once, so a change is seen
 * without waiting for the cache to age, and the first requests to an
 * endpoint that just started serving find it read (no statement on their
 * path). Real PostgreSQL, real NOTIFY.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { EndpointEventInput, EndpointRecord } from '../../src/domain/endpoint.js';
import { ServingView } from '../../src/router/serving-view.js';
import { ServingWait } from '../../src/router/serving-wait.js';
import { ChatAccess } from '../../src/services/chat-access.js';
import { connectDatabase, type Sql } from '../../src/storage/database.js';
import { insertEvent } from '../../src/storage/events-repository.js';
import { waitFor } from '../support/app.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

let t: TestGateway;
let sql: Sql;
const statements: string[] = [];
let view: ServingView;
let wait: ServingWait;

beforeAll(async () => {
  t = await startTestGateway();
  sql = connectDatabase(t.dbUrl, { onQuery: (query) => statements.push(query) });
  const access = new ChatAccess(sql, t.services.endpoints);
  view = new ServingView(access, 500, () => {});
  wait = new ServingWait(sql, access, {
    timeoutMs: 1000,
    pollMs: undefined,
    maxWaiting: 3,
    endpoint: async (_principal, id) => view.endpoint(id, true),
    hasReplica: async (endpoint, fresh) => (await view.readyReplicas(endpoint, fresh)).length > 0,
    onAnnounced: (endpointId) => view.announced(endpointId),
  });
  expect(await wait.listen()).toBe(true);
});

afterAll(async () => {
  wait?.close();
  await sql?.end({ timeout: 5 });
});

function announce(endpoint: EndpointRecord): Promise<string> {
  const event: EndpointEventInput = {
    endpointId: endpoint.id,
    projectId: endpoint.projectId,
    teamId: endpoint.teamId,
    type: 'REPLICAS_CHANGED',
    status: 'RUNNING',
    phase: null,
    errorCode: null,
    versionIndex: endpoint.current.versionIndex,
    cause: 'test:replica-ready',
    actorId: null,
    detail: {},
  };
  return insertEvent(t.sql, event);
}

test('an endpoint never asked for is read when its event is announced, and its first request reads nothing', async () => {
  const alice = await t.seed.user();
  const project = await alice.project('warm');
  const id = await project.endpoint({ name: 'warm' });
  const [endpoint] = await t.services.chatAccess.readEndpoints([id]);
  await t.sql`
    INSERT INTO replicas (id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state, address, ready_at)
    VALUES ('rep_warm', ${id}, ${endpoint!.current.versionIndex}, 'local', 'test-node', 'H100', 1,
            'READY', 'http://127.0.0.1:9', now())`;
  await announce(endpoint!);
  await waitFor('the view to hold the endpoint and its replica', async () => view.cachedReplicas(id)?.replicas.length === 1, 5000);

  statements.length = 0;
  const cached = await view.endpoint(id, false);
  expect(cached?.id).toBe(id);
  expect((await view.readyReplicas(cached!, false)).map((r) => r.id)).toEqual(['rep_warm']);
  expect(statements).toEqual([]);

  // A change (the replica gone) is seen as soon as it is announced, well inside the cache's 500 ms.
  await t.sql`UPDATE replicas SET state = 'STOPPED', stopped_at = now() WHERE id = 'rep_warm'`;
  await announce(endpoint!);
  await waitFor('the view to drop the replica', async () => view.cachedReplicas(id)?.replicas.length === 0, 5000);
});

test('the endpoints announced in one tick are read together: two statements, however many', async () => {
  const bob = await t.seed.user();
  const project = await bob.project('many');
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push(await project.endpoint({ name: `many-${i}` }));
  // The creations' own announcements are read first: wait until no statement came for 200 ms.
  for (let seen = -1; seen !== statements.length;) {
    seen = statements.length;
    await new Promise((r) => setTimeout(r, 200));
  }
  statements.length = 0;
  for (const id of ids) view.announced(id);
  await waitFor('the re-read', async () => statements.length >= 2, 5000);
  await new Promise((r) => setTimeout(r, 100));
  expect(statements).toHaveLength(2);
  for (const id of ids) expect(view.cachedEndpoint(id)?.id).toBe(id);
});

test("a change made through this process's services is seen by the next request at once, before (or without) its announcement", async () => {
  const carol = await t.seed.user();
  const project = await carol.project('here');
  const id = await project.endpoint({ name: 'here' });
  // A view that hears no announcement: only this process's own changes reach it.
  const deaf = new ServingView(new ChatAccess(sql, t.services.endpoints), 60_000, () => {});
  const stop = t.services.endpoints.onChange((changed) => deaf.changedHere(changed));
  try {
    expect((await deaf.endpoint(id, false))?.status).not.toBe('TERMINATING');
    const principal = await t.services.auth.authenticate(`Bearer ${carol.key}`, undefined);
    if (principal.type !== 'ok') throw new Error('the key did not authenticate');
    expect((await t.services.endpoints.act(principal.value, id, 'terminate')).type).toBe('ok');
    expect((await deaf.endpoint(id, false))?.status).toBe('TERMINATING');
  } finally {
    stop();
  }
});

test('requests waiting for an endpoint to serve: as many as its queue holds (here 3), more refused at once', async () => {
  const dave = await t.seed.user();
  const project = await dave.project('waiting');
  const id = await project.endpoint({ name: 'waiting' });
  const principal = await t.services.auth.authenticate(`Bearer ${dave.key}`, undefined);
  if (principal.type !== 'ok') throw new Error('the key did not authenticate');
  const endpoint = (await view.endpoint(id, true))!;
  const clients = new AbortController();
  const waiting = Array.from({ length: 3 }, () => wait.until(principal.value, endpoint, clients.signal));
  await new Promise((resolve) => setTimeout(resolve, 200));
  // The fourth is refused at once: 429 queue_full with a time to retry.
  expect(await wait.until(principal.value, endpoint, clients.signal)).toMatchObject({
    kind: 'overloaded',
    code: 'queue_full',
    retryAfter: 5,
  });
  clients.abort();
  await Promise.all(waiting);
});
