/**
 * Clients that hold the chat path's resources without using them, against a real gateway whose engine is an
 * OpenAI-compatible server run through ENGINE_COMMAND (a few lines below), one max_batch_size 1 replica per endpoint:
 * a reader that stops reading a stream, a client that leaves while its prompt is counted, a flood of prompts over
 * the limits at a busy endpoint (each counted on the busy replica, at most 4 at once), and an engine that ends a
 * stream with its own error event.
 *
 * The engine: `HOLD` in a message holds its stream open; `SHUTDOWN` ends the stream with the engine's error event;
 * `UNAVAILABLE` is answered 503 as a stopping engine answers;
 * `BIG` streams about 60 MB at once; /tokenize answers after 1.5 s. It appends what it does to `engine.log` (its
 * port, then the line) and counts the /tokenize calls it runs at once.
 */
import net from 'node:net';
import { beforeAll, expect, test } from 'vitest';
import { waitFor, type SeededUser, type TestApp } from '../support/app.js';
import { openSse } from '../support/live-clients.js';
import { engineScript, singleSlotEndpoints, startScriptedApp } from '../support/scripted-engine.js';

const ENGINE = engineScript(`
let tokenizing = 0;
const onRequest = (req, res, request, text) => {
  if (req.url === '/tokenize') {
    tokenizing++;
    note('tokenize at once ' + tokenizing);
    return setTimeout(() => {
      tokenizing--;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: 10, tokens: [1, 2, 3], max_model_len: 4096, max_input_length: 64 }));
    }, 1500);
  }
  if (text.includes('UNAVAILABLE')) {
    return res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'The engine is shutting down', type: 'server_error', param: null, code: 'engine_shutting_down' } }));
  }
  active++;
  res.on('close', () => active--);
  if (request.stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: ' + chunk('hi') + '\\n\\n');
    if (text.includes('HOLD')) return note('holding');
    if (text.includes('SHUTDOWN')) {
      res.write('data: {"error":{"message":"The engine is shutting down","type":"server_error","param":null,"code":"engine_shutting_down"}}\\n\\n');
      return res.end('data: [DONE]\\n\\n');
    }
    if (text.includes('BIG')) {
      const piece = 'data: ' + chunk('y'.repeat(2000)) + '\\n\\n';
      for (let i = 0; i < 30000; i++) res.write(piece);
      res.end('data: [DONE]\\n\\n');
      return note('BIG written');
    }
    return res.end('data: [DONE]\\n\\n');
  }
  answerWhole(res);
};
`);

const STALL_MS = 1500;
let t: TestApp;
let engineLog: () => Promise<string>;
let alice: SeededUser;
/** Another key of alice's: admission shares slots fairly between keys. */
let otherKey: string;
let endpoints: string[] = [];

beforeAll(async () => {
  ({ t, engineLog } = await startScriptedApp('hostile-clients', ENGINE, {
    QUEUE_TIMEOUT_MS: '6000',
    STREAM_STALL_TIMEOUT_MS: String(STALL_MS),
  }));
  alice = await t.seed.user();
  const key = await t.app.services.identity.createApiKey('system', { name: 'second', user: alice.user.id });
  if (key.type === 'error') throw new Error(key.error.message);
  otherKey = key.value.secret;
  endpoints = await singleSlotEndpoints(t, alice, 'hostile', 4);
}, 120_000);

const chat = (id: string, key: string, content: string, extra: Record<string, unknown> = {}, signal?: AbortSignal) =>
  fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    ...(signal ? { signal } : {}),
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: id, messages: [{ role: 'user', content }], ...extra }),
  });

/** Holds the endpoint's one slot with a stream the engine keeps open; `end` lets it go. */
async function holdSlot(id: string) {
  const abort = new AbortController();
  const held = await chat(id, alice.key, 'HOLD', { stream: true }, abort.signal);
  expect(held.status).toBe(200);
  return { end: () => abort.abort() };
}

test('a client that stops reading a stream is cut after STREAM_STALL_TIMEOUT_MS: its slot goes back to the others', async () => {
  const id = endpoints[0]!;
  const body = JSON.stringify({ model: id, stream: true, messages: [{ role: 'user', content: 'BIG' }] });
  const url = new URL(t.url);
  const socket = net.connect(Number(url.port), url.hostname);
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.pause();
  let closed = false;
  socket.once('close', () => (closed = true));
  socket.write(
    `POST /dedicated/v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${alice.key}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  // The engine has written the whole answer; the client reads none of it.
  await waitFor('the engine to finish writing', async () => (await engineLog()).includes('BIG written'), 20_000);
  // Another key's request gets the slot once the stalled stream is cut, well within its queue wait.
  const started = performance.now();
  const other = await chat(id, otherKey, 'hello');
  expect(other.status).toBe(200);
  expect(performance.now() - started).toBeLessThan(STALL_MS + 4000);
  // The gateway ended the stalled stream: read now, it ends (cut) instead of going on.
  socket.resume();
  await waitFor('the stalled connection closed by the gateway', async () => closed, 10_000);
});

test('a client gone while its prompt was counted takes no queue place', async () => {
  const id = endpoints[1]!;
  const slot = await holdSlot(id);
  try {
    // A prompt the limits may refuse: counted on the replica (1.5 s) before it would queue; the client leaves meanwhile.
    const gone = new AbortController();
    const leaving = chat(id, alice.key, 'x'.repeat(500), {}, gone.signal).catch(() => 'left');
    setTimeout(() => gone.abort(), 300);
    expect(await leaving).toBe('left');
    await new Promise((resolve) => setTimeout(resolve, 1800));
    // Nobody waits: the queue this gateway publishes (the autoscaler's demand) is empty.
    const [published] = await t.sql<{ queued: number }[]>`
      SELECT coalesce(sum(queued), 0)::int AS queued FROM gateway_queue_depth WHERE endpoint_id = ${id}`;
    expect(published!.queued).toBe(0);
    // Another key's request is queued (not refused for a request ahead of it), and runs once the slot frees.
    const other = chat(id, otherKey, 'hello');
    await new Promise((resolve) => setTimeout(resolve, 300));
    slot.end();
    expect((await other).status).toBe(200);
  } finally {
    slot.end();
  }
});

test('prompts over the limits flooding a busy endpoint: no more than 4 counted at once on its replica', async () => {
  const id = endpoints[2]!;
  const slot = await holdSlot(id);
  try {
    const before = (await engineLog()).split('\n').length;
    const flood = Promise.all(Array.from({ length: 20 }, () => chat(id, alice.key, 'z'.repeat(5000)).then((r) => r.status)));
    // The endpoint's tokenizer route keeps its own places meanwhile: the user's /tokenize is answered, not refused.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const tokenized = await fetch(`${t.url}/dedicated/v1/tokenize`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: id, prompt: 'hello' }),
    });
    expect(tokenized.status).toBe(200);
    const answers = await flood;
    const lines = (await engineLog()).split('\n').slice(before - 1);
    const atOnce = lines
      .map((line) => /tokenize at once (\d+)/.exec(line)?.[1])
      .filter(Boolean)
      .map(Number);
    // Four prompt counts at once, and the user's own /tokenize beside them.
    expect(Math.max(0, ...atOnce)).toBeLessThanOrEqual(5);
    // The counted ones over max_input_length are refused with 400; the others queue or are refused for the queue.
    expect(answers.every((s) => s === 400 || s === 429 || s === 200)).toBe(true);
  } finally {
    slot.end();
  }
}, 60_000);

test("GraphQL: an engine's error event inside the stream is the subscription's error, with the engine's code", async () => {
  const stream = await openSse(
    t.url,
    alice.key,
    'subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { id choices { delta { content } } } }',
    { input: { model: endpoints[3], messages: [{ role: 'user', content: 'SHUTDOWN' }] } },
  );
  await waitFor('the stream to end', async () => stream.ended !== undefined, 20_000);
  const errors = stream.events.flatMap((e) => (e.data?.errors as { message: string; extensions?: { code?: string } }[] | undefined) ?? []);
  expect(errors).toHaveLength(1);
  expect(errors[0]!.message).not.toBe('Unexpected error.');
  expect(JSON.stringify(errors[0])).toContain('engine_shutting_down');
});

test("a replica that answers 503 (it is stopping) is not the client's answer: the next replica is tried, and with none left a 503 that says when to retry", async () => {
  const answer = await chat(endpoints[3]!, alice.key, 'UNAVAILABLE');
  expect(answer.status).toBe(503);
  expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
  const body = (await answer.json()) as { error: { code: string } };
  expect(body.error.code).not.toBe('engine_shutting_down');
});

test('a request queued when its key is revoked, or its user removed from the team, is refused once a slot frees: not served', async () => {
  // Each request alone in the queue: admission expects it to start in time (no 429).
  const id = endpoints[3]!;
  const { identity, auth } = t.app.services;
  const owner = await auth.authenticate(`Bearer ${alice.key}`, undefined);
  if (owner.type !== 'ok') throw new Error('alice authenticates');
  const member = async () => {
    const user = await t.seed.user();
    expect((await identity.addTeamMember('system', { teamId: alice.teamId, user: user.user.id })).type).toBe('ok');
    const [key] = await t.sql<{ id: string }[]>`SELECT id FROM api_keys WHERE user_id = ${user.user.id}`;
    return { ...user, keyId: key!.id };
  };
  /** Queues `key`'s request behind a held slot, takes access away, then frees the slot: the request's answer. */
  const queuedThrough = async (key: string, takeAway: () => Promise<{ type: string }>) => {
    const slot = await holdSlot(id);
    try {
      const waiting = chat(id, key, 'hello');
      await waitFor('it to queue', async () => {
        const [row] = await t.sql<{ queued: number }[]>`
          SELECT coalesce(sum(queued), 0)::int AS queued FROM gateway_queue_depth WHERE endpoint_id = ${id}`;
        return row!.queued === 1;
      });
      expect((await takeAway()).type).toBe('ok');
      slot.end();
      return await waiting;
    } finally {
      slot.end();
    }
  };
  const revoked = await member();
  const afterRevocation = await queuedThrough(revoked.key, () => identity.revokeApiKey('system', revoked.keyId));
  expect(afterRevocation.status).toBe(401);
  expect(((await afterRevocation.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
  const removed = await member();
  const afterRemoval = await queuedThrough(removed.key, () =>
    identity.removeTeamMember(owner.value, { teamId: alice.teamId, userId: removed.user.id }),
  );
  // Outside her teams now: as if it did not exist.
  expect(afterRemoval.status).toBe(404);
  // The slot they did not use is free: the owner is served.
  expect((await chat(id, alice.key, 'hello')).status).toBe(200);
}, 120_000);

test('a queued request whose caller cannot be checked again (the database away) gives its slot back with its 503', async () => {
  const id = endpoints[3]!;
  const slot = await holdSlot(id);
  const waiting = chat(id, alice.key, 'hello');
  await waitFor('it to queue', async () => {
    const [row] = await t.sql<{ queued: number }[]>`
      SELECT coalesce(sum(queued), 0)::int AS queued FROM gateway_queue_depth WHERE endpoint_id = ${id}`;
    return row!.queued === 1;
  });
  // The authenticator's reads fail as with the database gone, and its cache is emptied: the check after the queue reads.
  const auth = t.app.services.auth as unknown as { db: unknown; forgetAll(): void };
  const real = auth.db as { unsafe: (...args: unknown[]) => unknown };
  const closed = Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' });
  auth.db = Object.assign(() => Promise.reject(closed), { unsafe: real.unsafe.bind(real) });
  auth.forgetAll();
  try {
    slot.end();
    expect((await waiting).status).toBe(503);
  } finally {
    auth.db = real;
  }
  // The slot came back: the next request is served, not refused as if the endpoint were full.
  expect((await chat(id, alice.key, 'hello')).status).toBe(200);
});
