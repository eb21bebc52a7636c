/**
 * A request whose body arrives slowly is authenticated before the body is read (so that a caller without a valid key
 * is refused unread), and again once it has arrived: a key revoked, or a member removed, while the body was on its
 * way acts no more once that revocation has returned, on every surface that takes a body (GraphQL, the management
 * routes, the OpenAI-style POSTs). The services' own writes that grant access check again under their rows' locks.
 */
import net from 'node:net';
import { expect, test } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

/** Sends a request's head and the first byte of its body now; `finish` sends the rest and reads the whole answer. */
function slowRequest(gateway: TestGateway, method: string, path: string, key: string, body: string) {
  const socket = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
  let raw = '';
  socket.on('data', (d: Buffer) => (raw += d.toString()));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  const bytes = Buffer.from(body);
  socket.write(
    `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${bytes.length}\r\nConnection: close\r\n\r\n`,
  );
  socket.write(bytes.subarray(0, 1));
  return {
    /** Resolves once the gateway has read the head and looked the key up (it waits for the body then). */
    waiting: new Promise<void>((resolve) => setTimeout(resolve, 500)),
    async finish(): Promise<{ status: number; body: string }> {
      socket.write(bytes.subarray(1));
      await closed;
      const [head, ...rest] = raw.split('\r\n\r\n');
      return { status: Number(head!.split(' ')[1]), body: rest.join('\r\n\r\n') };
    },
  };
}

async function keyIdOf(user: { rest: (m: string, p: string, b?: unknown) => Promise<{ body: any }> }): Promise<string> {
  const keys = await user.rest('POST', '/graphql', { query: '{ me { apiKeys { id } } }' });
  return keys.body.data.me.apiKeys[0].id as string;
}

test('GraphQL: a key revoked while its createApiKey body arrives is refused once the body is in: no key is made', async () => {
  const gw = await startTestGateway();
  const alice = await gw.seed.user();
  const keyId = await keyIdOf(alice);
  const query = 'mutation { createApiKey(name: "persist") { __typename ... on CreateApiKeySuccess { secret } } }';
  const pending = slowRequest(gw, 'POST', '/graphql', alice.key, JSON.stringify({ query }));
  await pending.waiting;
  expect((await gw.services.identity.revokeApiKey('system', keyId)).type).toBe('ok');
  const answer = await pending.finish();
  expect(answer.status).toBe(401);
  expect(answer.body).not.toContain('secret');
  const [row] = await gw.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM api_keys WHERE name = 'persist'`;
  expect(row!.n).toBe(0);
});

test('REST: a member removed from the team while the body of their DELETE arrives is refused: the endpoint stays', async () => {
  const gw = await startTestGateway();
  const owner = await gw.seed.user();
  const mallory = await gw.seed.user();
  await gw.services.identity.addTeamMember('system', { teamId: owner.teamId, user: mallory.user.id, role: 'MEMBER' });
  const project = await owner.project('p', owner.teamId);
  const endpointId = await project.endpoint();
  const pending = slowRequest(gw, 'DELETE', `/dedicated/beta/endpoint/${endpointId}`, mallory.key, '{}');
  await pending.waiting;
  const ownerPrincipal = await gw.services.auth.authenticate(`Bearer ${owner.key}`, undefined);
  if (ownerPrincipal.type !== 'ok') throw new Error('the owner authenticates');
  const removed = await gw.services.identity.removeTeamMember(ownerPrincipal.value, { teamId: owner.teamId, userId: mallory.user.id });
  expect(removed.type).toBe('ok');
  // Not found for her now: the endpoint is outside every team she belongs to.
  expect((await pending.finish()).status).toBe(404);
  expect((await owner.rest('GET', `/dedicated/beta/endpoint/${endpointId}`)).status).toBe(200);
});

test('OpenAI-style POST: a key revoked while its chat body arrives gets 401, not the answer for its model', async () => {
  const gw = await startTestGateway();
  const alice = await gw.seed.user();
  const keyId = await keyIdOf(alice);
  const body = JSON.stringify({ model: 'ep_doesnotexist', messages: [{ role: 'user', content: 'hi' }] });
  const pending = slowRequest(gw, 'POST', '/dedicated/v1/chat/completions', alice.key, body);
  await pending.waiting;
  expect((await gw.services.identity.revokeApiKey('system', keyId)).type).toBe('ok');
  const answer = await pending.finish();
  expect(answer.status).toBe(401);
  expect(answer.body).toContain('invalid_api_key');
});

test('the services check again under the rows’ locks: a principal read before its key was revoked, or before it lost ownership, grants nothing', async () => {
  const gw = await startTestGateway();
  const owner = await gw.seed.user();
  const other = await gw.seed.user();
  const read = await gw.services.auth.authenticate(`Bearer ${owner.key}`, undefined);
  if (read.type !== 'ok') throw new Error('the owner authenticates');
  const stale = read.value;

  // Ownership handed over, then taken from the stale principal's user: its additions and removals are refused.
  await gw.services.identity.addTeamMember('system', { teamId: owner.teamId, user: other.user.id, role: 'OWNER' });
  await gw.services.identity.addTeamMember('system', { teamId: owner.teamId, user: owner.user.id, role: 'MEMBER' });
  const promoted = await gw.services.identity.addTeamMember(stale, { teamId: owner.teamId, user: owner.user.id, role: 'OWNER' });
  expect(promoted).toMatchObject({ type: 'error', error: { type: 'FORBIDDEN' } });
  const removed = await gw.services.identity.removeTeamMember(stale, { teamId: owner.teamId, userId: other.user.id });
  expect(removed).toMatchObject({ type: 'error', error: { type: 'FORBIDDEN' } });

  // The key revoked: a key made through the stale principal is refused, none is made.
  expect((await gw.services.identity.revokeApiKey('system', stale.keyId!)).type).toBe('ok');
  const made = await gw.services.identity.createApiKey(stale, { name: 'after-revocation' });
  expect(made).toMatchObject({ type: 'error', error: { type: 'UNAUTHENTICATED' } });
  const [row] = await gw.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM api_keys WHERE name = 'after-revocation'`;
  expect(row!.n).toBe(0);
});
