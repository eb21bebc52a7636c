/**
 * Revocation ends access everywhere at once: two real gateway processes on
 * one database; an access change made through gateway A (a revoked key, a
 * removed member), by the admin CLI's way (plain SQL: a deleted user), or
 * missed altogether (an announcement lost with the LISTEN connection) ends
 * the open WebSocket and SSE subscriptions on gateway B at once, and B's
 * cached principal with it. "At once" is by the announcement: nothing else
 * closes an open connection (no poll), so a connection that closes was told;
 * the bounds on waits are generous (a loaded machine is slow, not wrong), and
 * what must not happen is checked against a later event that it would have
 * come before.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createServices, type Services } from '../../src/services/index.js';
import { testEnv, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';
import { openSocket, openSse, type RawSocket, type SseStream } from '../support/live-clients.js';
import { startGatewayProcess, type GatewayProcess } from '../support/processes.js';

const ADMIN_KEY = 'test_revocation_admin_key_0123456789';
const EVENTS = 'subscription($p: ID!, $after: ID) { endpointEvents(projectId: $p, after: $after) { id type endpointId } }';
const ME = '{ me { user { id } } }';

let db: TestDatabase;
let hub: FakeHub;
let services: Services;
const dirs: string[] = [];
let a: GatewayProcess;
let b: GatewayProcess;

beforeAll(async () => {
  db = await createTestDatabase();
  hub = await startFakeHub({ repos: [{ id: 'test-org/no-weights', files: { 'README.md': 'nothing here\n' } }] });
  const start = async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-revoke-'));
    await chmod(dir, 0o755);
    dirs.push(dir);
    return startGatewayProcess({ ...testEnv(dir, hub.url), DATABASE_URL: db.dbUrl, ADMIN_API_KEY: ADMIN_KEY });
  };
  [a, b] = await Promise.all([start(), start()]);
  // Users and keys are seeded from here (as the admin CLI would); changes go through gateway A.
  services = createServices(db.sql);
}, 120_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await hub?.close();
  await db?.close();
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

let counter = 0;

async function seedUser() {
  const n = ++counter;
  const created = await services.identity.createUser('system', { email: `rev${n}@example.com`, name: `Rev ${n}` });
  if (created.type === 'error') throw new Error(created.error.message);
  const key = await services.identity.createApiKey('system', { name: 'k', user: created.value.id });
  if (key.type === 'error') throw new Error(key.error.message);
  const user = created.value;
  const project = await services.identity.createProject(
    { user, memberships: new Map([[user.defaultTeamId!, 'OWNER']]), actingTeamId: user.defaultTeamId },
    { name: `p${n}` },
  );
  if (project.type === 'error') throw new Error(project.error.message);
  return { user, teamId: user.defaultTeamId!, key: key.value.secret, keyId: key.value.record.id, projectId: project.value.id };
}

/** A GraphQL request to a gateway; the HTTP status and body. */
async function graphql(url: string, key: string, query: string, variables: Record<string, unknown> = {}) {
  return restClient(url, key)('POST', '/graphql', { query, variables });
}

/** The owner invites the user to their team through A (a team owner's addition is an invitation), and the user accepts. */
async function joinTeam(owner: { key: string; teamId: string }, member: { key: string; user: { id: string } }): Promise<void> {
  const invite =
    'mutation($t: ID!, $u: String!) { addTeamMember(teamId: $t, user: $u) { __typename ... on InviteTeamMemberSuccess { invitation { id } } } }';
  const invited = await graphql(a.url, owner.key, invite, { t: owner.teamId, u: member.user.id });
  expect(invited.body.data.addTeamMember.__typename).toBe('InviteTeamMemberSuccess');
  const accept = 'mutation($id: ID!) { acceptTeamInvitation(id: $id) { __typename } }';
  const accepted = await graphql(a.url, member.key, accept, { id: invited.body.data.addTeamMember.invitation.id });
  expect(accepted.body.data.acceptTeamInvitation.__typename).toBe('AcceptTeamInvitationSuccess');
}

/** A subscription is live when an endpoint created now in its project reaches it. */
async function createEndpoint(key: string, projectId: string): Promise<string> {
  const created = await restClient(a.url, key)(
    'POST',
    '/dedicated/beta/endpoint',
    createBody(projectId, { hfModelRepo: 'test-org/no-weights' }),
  );
  expect(created.status).toBe(200);
  return created.body.endpointId as string;
}

/** The project's latest event id ('0' before any): a subscription from there misses nothing that comes after. */
async function latestEvent(projectId: string): Promise<string> {
  const [row] = await db.sql<
    { id: string }[]
  >`SELECT coalesce(max(id), 0)::text AS id FROM endpoint_events WHERE project_id = ${projectId}`;
  return row!.id;
}

/** Subscribes `id` on the socket to the project's events, and proves it live: an endpoint created now reaches it. */
async function subscribeLive(ws: RawSocket, id: string, key: string, projectId: string): Promise<void> {
  ws.subscribe(id, EVENTS, { p: projectId, after: await latestEvent(projectId) });
  const endpointId = await createEndpoint(key, projectId);
  await waitFor(`subscription ${id} to be live`, async () => sawEndpoint(ws, id, endpointId), 10_000);
}

const sawEndpoint = (s: RawSocket, id: string, endpointId: string) =>
  s.of(id).some((m) => m.type === 'next' && m.payload.data.endpointEvents.endpointId === endpointId);
const sseSaw = (s: SseStream, endpointId: string) =>
  s.events.some((e) => e.event === 'next' && e.data?.data?.endpointEvents?.endpointId === endpointId);

/** Opens a WS and an SSE subscription on B to the project, and proves both are live. */
async function liveOnB(key: string, projectId: string, extra: Record<string, unknown> = {}) {
  const ws = await openSocket(b.url, { authorization: `Bearer ${key}`, ...extra });
  // From the latest event: whenever each subscription starts, the endpoint created below reaches it.
  const after = await latestEvent(projectId);
  ws.subscribe('events', EVENTS, { p: projectId, after });
  const sse = await openSse(b.url, key, EVENTS, { p: projectId, after });
  expect(sse.status).toBe(200);
  // As curl sends it: a JSON POST accepting anything. It is the same watched SSE stream.
  const posted = await openSse(b.url, key, EVENTS, { p: projectId, after }, { accept: '*/*' }, 'POST');
  expect(posted.status).toBe(200);
  const endpointId = await createEndpoint(key, projectId);
  await waitFor(
    'the subscriptions on B to be live',
    async () => sawEndpoint(ws, 'events', endpointId) && sseSaw(sse, endpointId) && sseSaw(posted, endpointId),
    10_000,
  );
  return { ws, sse, posted };
}

describe('an access change made through one gateway ends access on the other at once', () => {
  test('a revoked key: WS closed 4403, SSE ends with an error event, and HTTP on B answers 401 at once', async () => {
    const bob = await seedUser();
    const { ws, sse, posted } = await liveOnB(bob.key, bob.projectId);
    // B has the key's principal cached (it answered just now).
    expect((await graphql(b.url, bob.key, ME)).status).toBe(200);

    const revoked = await graphql(a.url, ADMIN_KEY, 'mutation($id: ID!) { revokeApiKey(id: $id) { __typename } }', { id: bob.keyId });
    expect(revoked.body.data.revokeApiKey.__typename).toBe('RevokeApiKeySuccess');
    const http = await graphql(b.url, bob.key, ME);
    expect(http.status).toBe(401);

    const closed = await ws.waitClosed(10_000);
    expect(closed.code).toBe(4403);
    expect(closed.reason).toBe('access revoked: invalid or revoked API key');

    await waitFor('the SSE stream to end', async () => sse.ended, 10_000);
    expect(sse.events.slice(-2)).toEqual([
      {
        event: 'next',
        data: { errors: [{ message: 'invalid or revoked API key: this subscription has ended', extensions: { code: 'UNAUTHENTICATED' } }] },
        at: expect.any(Number),
      },
      { event: 'complete', data: null, at: expect.any(Number) },
    ]);
    await waitFor('the POSTed SSE stream to end', async () => posted.ended, 10_000);
    expect(posted.events.at(-2)?.data).toMatchObject({ errors: [{ extensions: { code: 'UNAUTHENTICATED' } }] });
    // A new socket with the key is refused too.
    const again = await openSocket(b.url, { authorization: `Bearer ${bob.key}` }, { ack: false });
    expect((await again.waitClosed()).code).toBe(4401);
  });

  test("a member removed from a team loses that team's subscriptions at once, and keeps the others on the same socket", async () => {
    const owner = await seedUser();
    const carol = await seedUser();
    const third = await seedUser();
    await joinTeam(owner, carol);
    await joinTeam(third, carol);

    // Carol on B: the shared team's events (WS and SSE), her own team's and a third team's events, on one socket.
    const { ws, sse } = await liveOnB(carol.key, owner.projectId);
    await subscribeLive(ws, 'own', carol.key, carol.projectId);
    await subscribeLive(ws, 'third', third.key, third.projectId);

    // A role change that narrows nothing ends nothing.
    await graphql(a.url, owner.key, 'mutation($t: ID!, $u: String!) { addTeamMember(teamId: $t, user: $u, role: OWNER) { __typename } }', {
      t: owner.teamId,
      u: carol.user.id,
    });
    // The marker: a later change for the same user that does end a subscription on the same socket. B re-checks a
    // connection once per announcement, in order, so the marker's end comes after anything the role change ended.
    await graphql(a.url, third.key, 'mutation($t: ID!, $u: ID!) { removeTeamMember(teamId: $t, userId: $u) { __typename } }', {
      t: third.teamId,
      u: carol.user.id,
    });
    await waitFor("the third team's subscription to end", async () => ws.of('third').some((m) => m.type === 'error'), 10_000);
    expect(ws.messages.filter((m) => (m.type === 'error' || m.type === 'complete') && m.id !== 'third')).toEqual([]);
    // And the shared team's subscriptions still deliver (a revoked one delivers nothing more): an endpoint created now reaches them.
    const later = await createEndpoint(owner.key, owner.projectId);
    await waitFor(
      'the shared subscriptions to see a later endpoint',
      async () => sawEndpoint(ws, 'events', later) && sseSaw(sse, later),
      10_000,
    );
    expect(sse.ended).toBeUndefined();
    await graphql(a.url, owner.key, 'mutation($t: ID!, $u: String!) { addTeamMember(teamId: $t, user: $u, role: MEMBER) { __typename } }', {
      t: owner.teamId,
      u: carol.user.id,
    });

    const removed = await graphql(
      a.url,
      owner.key,
      'mutation($t: ID!, $u: ID!) { removeTeamMember(teamId: $t, userId: $u) { __typename } }',
      { t: owner.teamId, u: carol.user.id },
    );
    expect(removed.body.data.removeTeamMember.__typename).toBe('RemoveTeamMemberSuccess');

    await waitFor("the shared team's WS subscription to end", async () => ws.of('events').some((m) => m.type === 'error'), 10_000);
    const error = ws.of('events').find((m) => m.type === 'error')!;
    expect(error.payload).toEqual([
      { message: `your access to team '${owner.teamId}' changed: this subscription has ended`, extensions: { code: 'FORBIDDEN' } },
    ]);
    await waitFor('the SSE stream to end', async () => sse.ended, 10_000);
    expect(sse.events.at(-2)).toMatchObject({ event: 'next', data: { errors: [{ extensions: { code: 'FORBIDDEN' } }] } });

    // The key still authenticates: the socket stays open and her own team's subscription goes on.
    const own = await createEndpoint(carol.key, carol.projectId);
    await waitFor('her own subscription to see the new endpoint', async () => sawEndpoint(ws, 'own', own), 5000);
    expect(ws.closed).toBeUndefined();
    // And the team's events no longer reach her anywhere: a new subscription on B is NOT_FOUND.
    ws.subscribe('again', EVENTS, { p: owner.projectId });
    await waitFor('the new subscription to be refused', async () => ws.of('again').length > 0, 5000);
    expect(ws.of('again')[0]).toMatchObject({ type: 'error', payload: [{ extensions: { code: 'NOT_FOUND' } }] });
    ws.socket.close();
  });

  test('a socket acting as the team it was removed from (team header) is closed with 4403', async () => {
    const owner = await seedUser();
    const dan = await seedUser();
    await joinTeam(owner, dan);
    const ws = await openSocket(b.url, { authorization: `Bearer ${dan.key}`, 'x-friendli-team': owner.teamId });
    await subscribeLive(ws, 'events', owner.key, owner.projectId);
    await graphql(a.url, owner.key, 'mutation($t: ID!, $u: ID!) { removeTeamMember(teamId: $t, userId: $u) { __typename } }', {
      t: owner.teamId,
      u: dan.user.id,
    });
    const closed = await ws.waitClosed(10_000);
    expect(closed).toMatchObject({ code: 4403, reason: `access revoked: you are not a member of team '${owner.teamId}'` });
  });

  test('a user deleted with plain SQL: their sockets on both gateways close with 4403', async () => {
    const erin = await seedUser();
    const onA = await openSocket(a.url, { authorization: `Bearer ${erin.key}` });
    const onB = await openSocket(b.url, { authorization: `Bearer ${erin.key}` });
    const after = await latestEvent(erin.projectId);
    for (const s of [onA, onB]) s.subscribe('events', EVENTS, { p: erin.projectId, after });
    // Created by a member of her team: an endpoint Erin created would keep her row (its creator) from being deleted.
    const helper = await seedUser();
    await joinTeam(erin, helper);
    const endpointId = await createEndpoint(helper.key, erin.projectId);
    await waitFor(
      'both subscriptions to be live',
      async () => sawEndpoint(onA, 'events', endpointId) && sawEndpoint(onB, 'events', endpointId),
    );
    await db.sql`DELETE FROM users WHERE id = ${erin.user.id}`;
    for (const s of [onA, onB]) {
      const closed = await s.waitClosed(10_000);
      expect(closed.code).toBe(4403);
    }
    expect((await graphql(b.url, erin.key, ME)).status).toBe(401);
  });
});

test('an announcement missed while the LISTEN connection was down: its return drops every cached principal and re-checks every open socket', async () => {
  const fay = await seedUser();
  const gus = await seedUser();
  const ws = await openSocket(b.url, { authorization: `Bearer ${fay.key}` });
  await subscribeLive(ws, 'events', fay.key, fay.projectId);
  expect((await graphql(b.url, fay.key, ME)).status).toBe(200);
  // The marker: another user's socket on B, whose key is revoked with an announcement after Fay's is, without.
  const marker = await openSocket(b.url, { authorization: `Bearer ${gus.key}` });

  // Revoked without an announcement (triggers off for this transaction), as if B had missed it.
  await db.sql.begin(async (tx) => {
    await tx`SET LOCAL session_replication_role = replica`;
    await tx`UPDATE api_keys SET revoked_at = now() WHERE id = ${fay.keyId}`;
  });
  await db.sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${gus.keyId}`;
  expect(await marker.waitClosed(10_000)).toMatchObject({ code: 4403 });
  expect(ws.closed).toBeUndefined(); // nothing told B of Fay's: an announcement of it would have come before the marker's

  // The gateways' LISTEN connections drop and come back.
  const killed = await db.sql`
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'listen%'`;
  expect(killed.length).toBeGreaterThan(0);
  const closed = await ws.waitClosed(10_000);
  expect(closed).toMatchObject({ code: 4403, reason: 'access revoked: invalid or revoked API key' });
  expect((await graphql(b.url, fay.key, ME)).status).toBe(401);
});
