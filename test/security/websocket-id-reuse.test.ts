/**
 * graphql-ws id reuse: `subscribe A; complete A; subscribe A` sent in one burst. graphql-ws forgets `A` on
 * `complete` while the first operation is still starting, and the operation that ends first deletes the id of the
 * one that reused it: without the adapter's own tracking (src/http/graphql/websocket-operations.ts), the first
 * operation kept streaming under id A after the client completed it, a later `complete A` could not stop it, the
 * socket's cap did not count it, and it outlived its socket (its user's quota place given back at close).
 * Real gateway, real sockets; the hub's subscriber count shows what still runs.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { startGateway, type Gateway } from '../../src/gateway.js';
import { waitFor } from '../support/app.js';
import { onCleanup } from '../support/cleanup.js';
import { startTestGateway, type SeededProject, type SeededUser, type TestGateway } from '../support/gateway.js';
import { openSocket, type RawSocket } from '../support/live-clients.js';

let g: TestGateway;
let alice: SeededUser;
let project: SeededProject;
let endpointId: string;
const STATUS = 'subscription($id: ID!) { endpointStatus(endpointId: $id) { event { id type } status { status } } }';

beforeAll(async () => {
  g = await startTestGateway();
  alice = await g.seed.user();
  project = await alice.project('reuse');
  endpointId = await project.endpoint();
});

const auth = () => ({ authorization: `Bearer ${alice.key}` });

/** The burst: the id is completed and taken again before the first operation got past its start. */
function reuse(s: RawSocket, id: string) {
  s.subscribe(id, STATUS, { id: endpointId });
  s.send({ id, type: 'complete' });
  s.subscribe(id, STATUS, { id: endpointId });
}

/** Every message the server sent before it answered this ping has arrived (one socket keeps its order). */
async function flushed(s: RawSocket) {
  const pongs = () => s.messages.filter((m) => m.type === 'pong').length;
  const before = pongs();
  s.send({ type: 'ping' });
  await waitFor('the pong', async () => pongs() > before, 5000);
}

async function gatewayWith(options: {
  wsMaxSubscriptions?: number;
  userMaxSubscriptions?: number;
  userMaxWebSockets?: number;
}): Promise<Gateway> {
  const gateway = await startGateway(g.sql, g.services, { port: 0, host: '127.0.0.1', log: () => {}, ...options });
  onCleanup(() => gateway.close());
  return gateway;
}

describe('an id reused at once after its complete', () => {
  test('only the second operation runs; its complete stops it, and no stray complete reaches the client', async () => {
    const s = await openSocket(g.url, auth());
    reuse(s, 'A');
    await waitFor('the second A to start', async () => s.of('A').some((m) => m.type === 'next'), 5000);
    await waitFor('one operation on the hub', async () => g.gateway.hub.subscriberCount === 1, 5000);

    s.send({ id: 'A', type: 'complete' });
    await waitFor('A to stop', async () => g.gateway.hub.subscriberCount === 0, 5000);
    await flushed(s);
    // Statuses only: no `complete` for A (the client completed both operations; one ending must not end the other's id).
    expect(s.of('A').every((m) => m.type === 'next')).toBe(true);
    s.socket.close();
    await s.waitClosed();
  });

  test('the same id reused over and over ends with one operation, which the socket’s close ends', async () => {
    const s = await openSocket(g.url, auth());
    for (let i = 0; i < 5; i++) {
      s.subscribe('A', STATUS, { id: endpointId });
      s.send({ id: 'A', type: 'complete' });
    }
    s.subscribe('A', STATUS, { id: endpointId });
    await waitFor('the last A to start', async () => s.of('A').some((m) => m.type === 'next'), 5000);
    await waitFor('one operation on the hub', async () => g.gateway.hub.subscriberCount === 1, 5000);
    s.socket.close();
    await s.waitClosed();
    await waitFor('nothing left on the hub', async () => g.gateway.hub.subscriberCount === 0, 5000);
  });

  test('the socket’s cap counts every operation the client has not completed', async () => {
    const capped = await gatewayWith({ wsMaxSubscriptions: 2 });
    const s = await openSocket(capped.url, auth());
    for (const id of ['a', 'b', 'c']) reuse(s, id);
    await waitFor('a and b to start, c to be refused', async () => {
      return ['a', 'b'].every((id) => s.of(id).some((m) => m.type === 'next')) && s.of('c').some((m) => m.type === 'error');
    });
    for (const message of s.of('c')) {
      expect(message).toEqual(
        expect.objectContaining({ type: 'error', payload: [expect.objectContaining({ extensions: { code: 'RESOURCE_EXHAUSTED' } })] }),
      );
    }
    await waitFor('two operations on the hub', async () => capped.hub.subscriberCount === 2, 5000);
    for (const id of ['a', 'b']) s.send({ id, type: 'complete' });
    await waitFor('a and b to stop', async () => capped.hub.subscriberCount === 0, 5000);
    s.socket.close();
    await s.waitClosed();
  });

  test('past both caps, socket after socket: closing each ends all it ran, and the user’s quota stays exact', async () => {
    const capped = await gatewayWith({ wsMaxSubscriptions: 2, userMaxSubscriptions: 4 });
    for (let round = 0; round < 5; round++) {
      const s = await openSocket(capped.url, auth());
      for (const id of ['a', 'b', 'c', 'd']) reuse(s, id);
      await waitFor('a and b to start', async () => ['a', 'b'].every((id) => s.of(id).some((m) => m.type === 'next')), 5000);
      s.socket.close();
      await s.waitClosed();
    }
    await waitFor('nothing left on the hub', async () => capped.hub.subscriberCount === 0, 5000);

    // The quota holds no place for anything gone: two fresh sockets open its 4, and a 5th is refused.
    const fresh = [await openSocket(capped.url, auth()), await openSocket(capped.url, auth())];
    for (const s of fresh) for (const id of ['x', 'y']) s.subscribe(id, STATUS, { id: endpointId });
    await waitFor('four to start', async () => fresh.every((s) => ['x', 'y'].every((id) => s.of(id).some((m) => m.type === 'next'))), 5000);
    const third = await openSocket(capped.url, auth());
    third.subscribe('z', STATUS, { id: endpointId });
    await waitFor('the refusal', async () => third.of('z').length > 0, 5000);
    expect(third.of('z')).toEqual([
      expect.objectContaining({ type: 'error', payload: [expect.objectContaining({ extensions: { code: 'RESOURCE_EXHAUSTED' } })] }),
    ]);
    expect(capped.hub.subscriberCount).toBe(4);
    for (const s of [...fresh, third]) {
      s.socket.close();
      await s.waitClosed();
    }
    await waitFor('nothing left on the hub', async () => capped.hub.subscriberCount === 0, 5000);
  });
});

test('idle sockets count too: one user holds at most USER_MAX_WEBSOCKETS authenticated sockets, over all their keys (4429 past it), and a closed one frees its place', async () => {
  const capped = await gatewayWith({ userMaxWebSockets: 3 });
  const key = await g.services.identity.createApiKey('system', { name: 'second', user: alice.user.id });
  if (key.type === 'error') throw new Error(key.error.message);
  const open = [
    await openSocket(capped.url, auth()),
    await openSocket(capped.url, auth()),
    await openSocket(capped.url, { authorization: `Bearer ${key.value.secret}` }),
  ];
  expect(open.every((s) => s.closed === undefined && s.messages.some((m) => m.type === 'connection_ack'))).toBe(true);
  // A fourth, with either key, holding no operation yet: refused, with the rule.
  const refused = await openSocket(capped.url, auth(), { ack: false });
  expect(await refused.waitClosed()).toMatchObject({
    code: 4429,
    reason: 'too many WebSockets open for this user (all their API keys): at most 3 at once; end one first',
  });
  // Another user is not affected.
  const bob = await g.seed.user();
  const other = await openSocket(capped.url, { authorization: `Bearer ${bob.key}` });
  expect(other.closed).toBeUndefined();
  // One closed: its place is free again.
  open[0]!.socket.close();
  await open[0]!.waitClosed();
  // (its close reaches the server a moment later: tried until a socket is acknowledged and stays open)
  const again = await waitFor(
    'a place freed',
    async () => {
      const next = await openSocket(capped.url, auth());
      return next.closed === undefined ? next : undefined;
    },
    5000,
  );
  for (const s of [...open, other, again]) s.socket.close();
});
