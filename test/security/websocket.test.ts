/**
 * The WebSocket transport under malformed and hostile input: an operation's
 * error stays that operation's (an `error` message for its id, the socket's
 * other subscriptions go on), a protocol violation closes with a 4400-series
 * code, and 4500 is left for real faults. Real gateway, real sockets.
 */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { beforeAll, describe, expect, test } from 'vitest';
import { startGateway } from '../../src/gateway.js';
import { waitFor } from '../support/app.js';
import { onCleanup } from '../support/cleanup.js';
import { startTestGateway, type SeededProject, type SeededUser, type TestGateway } from '../support/gateway.js';
import { openSocket } from '../support/live-clients.js';

let g: TestGateway;
let alice: SeededUser;
let project: SeededProject;

const EVENTS = 'subscription($p: ID!) { endpointEvents(projectId: $p) { id type endpointId } }';

beforeAll(async () => {
  g = await startTestGateway();
  alice = await g.seed.user();
  project = await alice.project('ws');
});

const auth = () => ({ authorization: `Bearer ${alice.key}` });

/** Starts a live subscription and proves it is live: an endpoint created now reaches it. */
async function provesLive(socket: Awaited<ReturnType<typeof openSocket>>, id: string): Promise<void> {
  const endpointId = await project.endpoint();
  await waitFor(
    `subscription ${id} to see ${endpointId}`,
    async () => socket.of(id).some((m) => m.type === 'next' && m.payload.data.endpointEvents.endpointId === endpointId),
    5000,
  );
}

describe('per-operation errors stay per operation', () => {
  test('a syntax error gets an error message for its id; the other subscription on the socket keeps running (graphql-ws client)', async () => {
    const client = createClient({
      url: `${g.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: auth(),
      retryAttempts: 0,
      lazy: false,
      onNonLazyError: () => {},
    });
    const closes: number[] = [];
    client.on('closed', (event) => closes.push((event as CloseEvent).code));
    const live: { endpointId: string }[] = [];
    const liveState = { error: undefined as unknown, done: false };
    client.subscribe(
      { query: EVENTS, variables: { p: project.id } },
      {
        next: (r) => live.push((r.data as any).endpointEvents),
        error: (e) => (liveState.error = e),
        complete: () => (liveState.done = true),
      },
    );
    await new Promise((r) => setTimeout(r, 200));

    const broken = await new Promise<unknown>((resolve) => {
      client.subscribe(
        { query: 'subscription { endpointEvents(projectId: "x") { id ' },
        { next: () => {}, error: resolve, complete: () => resolve('completed') },
      );
    });
    expect(broken).toEqual([expect.objectContaining({ message: expect.stringMatching(/^Syntax Error/) })]);

    const endpointId = await project.endpoint();
    await waitFor('the live subscription to see the new endpoint', async () => live.some((e) => e.endpointId === endpointId), 5000);
    expect(liveState).toEqual({ error: undefined, done: false });
    expect(closes).toEqual([]);
    await client.dispose();
  });

  test('validation errors, an unknown operationName and several operations without a name are errors for their id only', async () => {
    const s = await openSocket(g.url, auth());
    s.subscribe('live', EVENTS, { p: project.id });
    s.subscribe('invalid', 'subscription { nope }');
    s.send({ id: 'unknown-op', type: 'subscribe', payload: { query: EVENTS, variables: { p: project.id }, operationName: 'Nope' } });
    s.subscribe('two-ops', 'query A { __typename } query B { __typename }');
    s.subscribe('bad-vars', EVENTS, { p: { not: 'an id' } });
    await waitFor(
      'every error',
      async () =>
        ['invalid', 'unknown-op', 'two-ops'].every((id) => s.of(id).some((m) => m.type === 'error')) && s.of('bad-vars').length > 0,
      5000,
    );
    expect(s.of('invalid')[0]!.payload[0].message).toMatch(/Cannot query field "nope"/);
    expect(s.of('unknown-op')[0]!.payload[0].message).toBe('Unable to identify operation');
    expect(s.of('two-ops')[0]!.payload[0].message).toBe('Unable to identify operation');
    // Variables that do not coerce: a result with errors, then complete (as graphql-ws answers them).
    expect(s.of('bad-vars')[0]).toMatchObject({
      type: 'next',
      payload: { errors: [expect.objectContaining({ message: expect.stringContaining('$p') })] },
    });
    // Errors carry no yoga internals (the `http` status an HTTP answer would have had).
    for (const id of ['invalid', 'bad-vars']) {
      const message = s.of(id)[0]!;
      const errors = (message.type === 'error' ? message.payload : message.payload.errors) as { extensions?: Record<string, unknown> }[];
      for (const error of errors) expect(error.extensions ?? {}, id).not.toHaveProperty('http');
    }
    await provesLive(s, 'live');
    expect(s.closed).toBeUndefined();
    s.socket.close();
  });

  test('past WS_MAX_SUBSCRIPTIONS operations on one socket, another subscribe gets RESOURCE_EXHAUSTED; completing one makes room', async () => {
    const capped = await startGateway(g.sql, g.services, { port: 0, host: '127.0.0.1', log: () => {}, wsMaxSubscriptions: 3 });
    onCleanup(() => capped.close());
    const s = await openSocket(capped.url, auth());
    for (const id of ['a', 'b', 'c']) s.subscribe(id, EVENTS, { p: project.id });
    s.subscribe('d', EVENTS, { p: project.id });
    await waitFor('the refusal', async () => s.of('d').length > 0, 5000);
    expect(s.of('d')).toEqual([
      {
        id: 'd',
        type: 'error',
        payload: [expect.objectContaining({ message: expect.stringContaining('at most 3'), extensions: { code: 'RESOURCE_EXHAUSTED' } })],
      },
    ]);
    s.send({ id: 'a', type: 'complete' });
    await new Promise((r) => setTimeout(r, 100));
    s.subscribe('e', EVENTS, { p: project.id });
    await new Promise((r) => setTimeout(r, 200));
    expect(s.of('e')).toEqual([]);
    expect(s.closed).toBeUndefined();
    s.socket.close();
  });
});

describe('protocol violations close the socket with 4400-series codes', () => {
  const cases: [string, unknown, number][] = [
    ['a frame that is not JSON', '{"id":"1","type":"subscribe","payload":{"query":', 4400],
    ['JSON that is not an object', '[1,2,3]', 4400],
    ['a message without a type', { id: '1', payload: {} }, 4400],
    ['an unknown type', { type: 'subscribe_all' }, 4400],
    ['a type only a server sends (next)', { id: '1', type: 'next', payload: { data: {} } }, 4400],
    ['a type only a server sends (connection_ack)', { type: 'connection_ack' }, 4400],
    ['a subscribe without a query', { id: '1', type: 'subscribe', payload: { variables: {} } }, 4400],
    [
      'a subscribe whose variables are not an object',
      { id: '1', type: 'subscribe', payload: { query: '{ me { id } }', variables: [1] } },
      4400,
    ],
    [
      'a subscribe whose variables are a string',
      { id: '1', type: 'subscribe', payload: { query: '{ me { id } }', variables: '{}' } },
      4400,
    ],
    ['a subscribe without an id', { type: 'subscribe', payload: { query: '{ me { id } }' } }, 4400],
    ['a subscribe whose payload is not an object', { id: '1', type: 'subscribe', payload: 'query' }, 4400],
    ['a second connection_init', { type: 'connection_init', payload: {} }, 4429],
  ];
  for (const [what, message, code] of cases) {
    test(`${what} → ${code}`, async () => {
      const s = await openSocket(g.url, auth());
      s.send(message);
      const closed = await s.waitClosed();
      expect(closed.code).toBe(code);
    });
  }

  test('a duplicate subscription id → 4409', async () => {
    const s = await openSocket(g.url, auth());
    s.subscribe('same', EVENTS, { p: project.id });
    s.subscribe('same', EVENTS, { p: project.id });
    expect(await s.waitClosed()).toMatchObject({ code: 4409, reason: 'Subscriber for same already exists' });
  });

  test('a subscribe before connection_ack → 4401; a frame over the size limit → 1009', async () => {
    const early = new WebSocket(`${g.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
    await new Promise((r) => early.once('open', r));
    const code = new Promise<number>((resolve) => early.once('close', resolve));
    early.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: '{ me { id } }' } }));
    expect(await code).toBe(4401);

    const s = await openSocket(g.url, auth());
    s.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: `{ me { id } } #${'x'.repeat(2 << 20)}` } }));
    expect((await s.waitClosed()).code).toBe(1009);
  });

  test('malformed input never costs other sockets anything, and 4500 never answers it', async () => {
    const bystander = await openSocket(g.url, auth());
    bystander.subscribe('live', EVENTS, { p: project.id });
    const codes: number[] = [];
    for (const [, message] of cases) {
      const s = await openSocket(g.url, auth());
      s.send(message);
      codes.push((await s.waitClosed()).code);
    }
    expect(codes).not.toContain(4500);
    await provesLive(bystander, 'live');
    expect(bystander.closed).toBeUndefined();
    bystander.socket.close();
  });
});
