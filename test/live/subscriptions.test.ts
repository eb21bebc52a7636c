/** Live-status subscriptions in one gateway: authorization, SSE, download progress and slow subscribers. */
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { beforeAll, describe, expect, test } from 'vitest';
import { LiveEventStream, SubscriptionOverflowError } from '../../src/live/event-stream.js';
import { connectDatabase } from '../../src/storage/database.js';
import { startTestApp, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import type { SeededProject } from '../support/gateway.js';

let t: TestApp;
let alice: SeededUser;
let bob: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestApp({ env: { SUBSCRIPTION_BUFFER: '20', SUBSCRIPTION_MAX_LAG_MS: '1000' } });
  alice = await t.seed.user();
  bob = await t.seed.user();
  project = await alice.project('live');
});

const wsUrl = () => `${t.url.replace('http', 'ws')}/graphql`;

function client(key: string, extra: Record<string, unknown> = {}): Client {
  return createClient({
    url: wsUrl(),
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${key}`, ...extra },
    retryAttempts: 0,
    lazy: false,
  });
}

describe('authorization', () => {
  test('a bad key is closed with 4401 and a reason; a team the caller is not in with 4403', async () => {
    const closes: { code: number; reason: string }[] = [];
    for (const [key, extra] of [
      ['dek_wrong', {}],
      [bob.key, { 'x-friendli-team': alice.teamId }],
    ] as const) {
      await new Promise<void>((resolve) => {
        const c = createClient({
          url: wsUrl(),
          webSocketImpl: WebSocket,
          connectionParams: { authorization: `Bearer ${key}`, ...extra },
          retryAttempts: 0,
          lazy: false,
          on: { closed: (event) => (closes.push({ code: (event as CloseEvent).code, reason: (event as CloseEvent).reason }), resolve()) },
          onNonLazyError: () => {},
        });
        void c;
      });
    }
    expect(closes).toEqual([
      { code: 4401, reason: 'invalid or revoked API key' },
      { code: 4403, reason: `you are not a member of team '${alice.teamId}'` },
    ]);
  });

  test("another team's key gets no events: its subscriptions fail with NOT_FOUND", async () => {
    const id = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
    const c = client(bob.key);
    const errors: unknown[] = [];
    const received: unknown[] = [];
    for (const [query, variables] of [
      ['subscription($id: ID!) { endpointStatus(endpointId: $id) { status { status } } }', { id }],
      ['subscription($p: ID!) { endpointEvents(projectId: $p) { id } }', { p: project.id }],
    ] as const) {
      await new Promise<void>((resolve) => {
        c.subscribe({ query, variables }, { next: (r) => received.push(r), error: (e) => (errors.push(e), resolve()), complete: resolve });
      });
    }
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { newVersionComment: 'more events' });
    expect(received.filter((r) => (r as { data?: unknown }).data)).toEqual([]);
    expect(JSON.stringify(errors)).toContain('NOT_FOUND');
    expect(JSON.stringify(errors)).not.toContain(alice.teamId);
    await c.dispose();
  });
});

describe('transports and content', () => {
  test('endpointStatus over SSE: the current status first, then changes, with download progress', async () => {
    // A slow transfer, so that the download reports progress more than once.
    t.hub.setFault({ type: 'slow', chunkBytes: 64 * 1024, delayMs: 60 }, { repo: 'test-org/fault-GGUF' });
    const id = await project.endpoint({ hfModelRepo: 'test-org/fault-GGUF', advanced: { max_token_count: 1024 } });
    const controller = new AbortController();
    const response = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: `subscription($id: ID!) { endpointStatus(endpointId: $id) {
          event { type status phase }
          status { status phase downloadProgress { bytesDone bytesTotal } currReplicaCnt }
        } }`,
        variables: { id },
      }),
      signal: controller.signal,
    });
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    const updates: {
      event: { type: string; status: string | null } | null;
      status: {
        status: string;
        phase: string | null;
        downloadProgress: { bytesDone: number; bytesTotal: number } | null;
        currReplicaCnt: number;
      };
    }[] = [];
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      for (const line of buffer.split('\n')) {
        if (line.startsWith('data:') && line.length > 6) {
          const parsed = JSON.parse(line.slice(5));
          if (parsed.data) updates.push(parsed.data.endpointStatus);
        }
      }
      buffer = buffer.slice(buffer.lastIndexOf('\n') + 1);
      // Until the RUNNING event itself: an update for another event (a replica count) may already show the status
      // RUNNING, as it is read when the update is delivered, before the status change's own event arrives.
      const last = updates.at(-1)?.event;
      if (last?.type === 'STATUS_CHANGED' && last.status === 'RUNNING') break;
    }
    controller.abort();
    t.hub.setFault(null, { repo: 'test-org/fault-GGUF' });
    expect(updates[0]!.event).toBeNull();
    expect(updates[0]!.status.status).toBe('INITIALIZING');
    const progress = updates.filter((u) => u.event === null && u.status.downloadProgress).map((u) => u.status.downloadProgress!);
    expect(progress.length).toBeGreaterThan(1);
    expect(progress.some((p) => p.bytesDone < p.bytesTotal)).toBe(true);
    for (let i = 1; i < progress.length; i++) expect(progress[i]!.bytesDone).toBeGreaterThanOrEqual(progress[i - 1]!.bytesDone);
    // The phase changes seen depend on when the subscription began (the download's may come before it on a loaded machine);
    // the engine's initialization, which follows the download seen in progress, and READY, RUNNING always come.
    const statuses = updates.filter((u) => u.event?.type === 'STATUS_CHANGED').map((u) => u.event!.status);
    expect(statuses.slice(-2)).toEqual(['READY', 'RUNNING']);
    expect(statuses.slice(0, -2).length).toBeGreaterThanOrEqual(1);
    expect(statuses.slice(0, -2).every((s) => s === 'INITIALIZING')).toBe(true);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });
});

describe('slow subscribers', () => {
  test('a burst larger than the buffer reaches a subscriber that keeps reading, over graphql-ws', async () => {
    const id = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
    await waitForStatus(t.sql, id, 'FAILED');
    const fast = client(alice.key);
    const fastIds: string[] = [];
    fast.subscribe(
      { query: 'subscription($p: ID!) { endpointEvents(projectId: $p) { id message } }', variables: { p: project.id } },
      { next: (r) => fastIds.push((r.data as { endpointEvents: { id: string } }).endpointEvents.id), error: () => {}, complete: () => {} },
    );
    await new Promise((r) => setTimeout(r, 300));
    // 300 events of 16 KB at once, against a buffer of 20: the dropped ones are read back from the log.
    await burst(id, 300, 16 * 1024);
    const ids = await t.sql<{ id: string }[]>`SELECT id::text FROM endpoint_events WHERE cause = 'test:burst' ORDER BY endpoint_events.id`;
    await waitFor('the whole burst', async () => fastIds.length >= ids.length, 20_000);
    expect(fastIds.slice(-ids.length)).toEqual(ids.map((r) => r.id));
    await fast.dispose();
  });

  test('a subscriber that stops reading is cut off with SUBSCRIPTION_OVERFLOW, without holding up one that reads', async () => {
    const id = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
    await waitForStatus(t.sql, id, 'FAILED');
    const scope = { projectId: project.id };
    const options = { bufferSize: 20, maxLagMs: 500 };
    const slow = new LiveEventStream(t.app.gateway.hub, t.sql, scope, options);
    const fast = new LiveEventStream(t.app.gateway.hub, t.sql, scope, options);
    // Both subscribe; the slow one then takes one event and stops pulling.
    const firstSlow = slow.next();
    const fastSeen: string[] = [];
    const fastReading = (async () => {
      for await (const item of fast) {
        if (item.kind === 'event') fastSeen.push(item.event.id);
        if (fastSeen.length === 201) return;
      }
    })();
    await new Promise((r) => setTimeout(r, 200));
    await burst(id, 200, 1024);
    await burst(id, 1, 16);
    await firstSlow;
    await fastReading;
    expect(new Set(fastSeen).size).toBe(201);
    // The slow one stayed behind its full buffer for longer than maxLagMs.
    await new Promise((r) => setTimeout(r, 700));
    await expect(slow.next()).rejects.toBeInstanceOf(SubscriptionOverflowError);
    await fast.return();
  });
});

test('a subscription resumed from far back (`after`) reads the log a page at a time, as it delivers', async () => {
  const id = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
  await waitForStatus(t.sql, id, 'FAILED');
  await burst(id, 2500, 16);
  const ids = (
    await t.sql<{ id: string }[]>`SELECT id::text FROM endpoint_events WHERE project_id = ${project.id} ORDER BY endpoint_events.id`
  ).map((r) => r.id);
  // The stream's own connection, its reads of the log counted.
  let reads = 0;
  const sql = connectDatabase(t.dbUrl, { max: 1, onQuery: (query) => void (/FROM endpoint_events/.test(query) && reads++) });
  const stream = new LiveEventStream(t.app.gateway.hub, sql, { projectId: project.id }, { after: '0' });
  try {
    const seen: string[] = [];
    const first = await stream.next();
    if (first.done || first.value.kind !== 'event') throw new Error('no event first');
    seen.push(first.value.event.id);
    // One page read for the first event, not the whole history.
    expect(reads).toBe(1);
    while (seen.length < ids.length) {
      const item = await stream.next();
      if (!item.done && item.value.kind === 'event') seen.push(item.value.event.id);
    }
    expect(seen).toEqual(ids);
    // Pages of 1,000, each read once the one before was delivered; the last is the first not full.
    expect(reads).toBe(Math.floor(ids.length / 1000) + 1);
  } finally {
    await stream.return();
    await sql.end({ timeout: 5 });
  }
});

/** Appends events straight to the log (as many writers at once would), each with a message of `bytes`. */
async function burst(endpointId: string, count: number, bytes: number) {
  await t.sql`
    INSERT INTO endpoint_events (endpoint_id, project_id, team_id, type, status, cause, detail)
    SELECT ${endpointId}, ${project.id}, ${alice.teamId}, 'STATUS_CHANGED', 'FAILED', 'test:burst', jsonb_build_object('message', repeat('x', ${bytes}::int))
    FROM generate_series(1, ${count}::int)`;
}

/** One SSE response read event by event: `{ event, data }` with `data` parsed, until `complete` or `until` says stop. */
async function readSse(response: Response, until: (events: { event: string; data: any }[]) => boolean = () => false) {
  const events: { event: string; data: any }[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  let pings = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (block.startsWith(':')) {
        pings++;
        continue;
      }
      const event = /^event: (\w+)$/m.exec(block)?.[1] ?? '';
      const data = /^data:(.*)$/m.exec(block)?.[1]?.trim() ?? '';
      events.push({ event, data: data ? JSON.parse(data) : null });
      if (event === 'complete' || until(events)) return { events, pings };
    }
  }
  return { events, pings };
}

describe('SSE subscriptions', () => {
  const STATUS = 'subscription($id: ID!) { endpointStatus(endpointId: $id) { event { type versionIndex } status { status } } }';
  const sse = (key: string, init: { method?: string; body?: unknown; query?: Record<string, string> } = {}) =>
    fetch(`${t.url}/graphql${init.query ? `?${new URLSearchParams(init.query)}` : ''}`, {
      method: init.method ?? 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        accept: 'text/event-stream',
        ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    });

  test('over GET and POST alike: a ping, the current status, each change, and `complete` when the endpoint is deleted', async () => {
    const id = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
    await waitForStatus(t.sql, id, 'FAILED');
    const byPost = await sse(alice.key, { body: { query: STATUS, variables: { id } } });
    const byGet = await sse(alice.key, { method: 'GET', query: { query: STATUS, variables: JSON.stringify({ id }) } });
    for (const response of [byPost, byGet]) {
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/event-stream');
    }
    const reading = [byPost, byGet].map((r) => readSse(r));
    await new Promise((r) => setTimeout(r, 200));
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { newVersionComment: 'seen by both' });
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
    const [post, get] = await Promise.all(reading);
    expect(post!.pings).toBeGreaterThanOrEqual(1);
    expect(get!.events).toEqual(post!.events);
    const updates = post!.events.filter((e) => e.event === 'next').map((e) => e.data.data.endpointStatus);
    expect(updates[0]).toEqual({ event: null, status: { status: 'FAILED' } });
    expect(updates.map((u) => u.event?.type)).toContain('VERSION_ADDED');
    expect(updates.at(-1)!.event.type).toBe('DELETED');
    expect(post!.events.at(-1)).toEqual({ event: 'complete', data: null });
  });

  test("another team's endpoint: one `next` with NOT_FOUND, then `complete`", async () => {
    const id = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
    const { events } = await readSse(await sse(bob.key, { body: { query: STATUS, variables: { id } } }));
    expect(events.map((e) => e.event)).toEqual(['next', 'complete']);
    expect(events[0]!.data.errors[0].extensions.code).toBe('NOT_FOUND');
    expect(JSON.stringify(events)).not.toContain(alice.teamId);
  });

  test("what is not a valid, authenticated subscription gets graphql-yoga's own answers", async () => {
    // A query asking for SSE: its result as one event.
    const query = await readSse(await sse(alice.key, { body: { query: '{ instanceOptions { id } }' } }));
    expect(query.events[0]!.data.data.instanceOptions.length).toBeGreaterThan(0);
    expect(query.events.at(-1)!.event).toBe('complete');
    // A bad key, a syntax error and an unknown field: refused before any stream starts.
    const badKey = await sse('dek_wrong', { body: { query: STATUS, variables: { id: 'x' } } });
    expect(badKey.status).toBe(401);
    expect(await badKey.text()).toContain('invalid or revoked API key');
    for (const body of [{ query: 'subscription {' }, { query: 'subscription { nope }' }, { query: STATUS }]) {
      const response = await sse(alice.key, { body });
      const text = await response.text();
      expect(text, JSON.stringify(body)).toMatch(/"errors":\[\{"message":"[^"]+/);
      expect(text).not.toContain('"data":{"endpointStatus"');
    }
  });
});

test('a subscriber that goes away is unsubscribed at once, without waiting for its endpoint to change', async () => {
  const id = await project.endpoint({ hfModelRepo: 'test-org/no-weights' });
  await waitForStatus(t.sql, id, 'FAILED');
  const hub = t.app.gateway.hub;
  const before = hub.subscriberCount;
  const query = 'subscription($id: ID!) { endpointStatus(endpointId: $id) { status { status } } }';
  // Three over graphql-ws on one socket, two over SSE.
  const ws = client(alice.key);
  const first: Promise<void>[] = [];
  const stops = Array.from({ length: 3 }, () => {
    let seen!: () => void;
    first.push(new Promise<void>((resolve) => (seen = resolve)));
    return ws.subscribe({ query, variables: { id } }, { next: () => seen(), error: () => {}, complete: () => {} });
  });
  const aborts = Array.from({ length: 2 }, () => new AbortController());
  const sse = await Promise.all(
    aborts.map((a) =>
      fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query, variables: { id } }),
        signal: a.signal,
      }),
    ),
  );
  // Read up to the first update, and keep the stream open.
  const sseReads = sse.map(async (r) => {
    const reader = r.body!.getReader();
    let text = '';
    while (!text.includes('event: next')) text += new TextDecoder().decode((await reader.read()).value);
  });
  await Promise.all([...first, ...sseReads]);
  await waitFor('five subscribers', async () => hub.subscriberCount === before + 5);

  stops[0]!();
  await waitFor('one fewer after a graphql-ws complete', async () => hub.subscriberCount === before + 4, 5000);
  aborts[0]!.abort();
  await waitFor('one fewer after an SSE client disconnects', async () => hub.subscriberCount === before + 3, 5000);
  await ws.dispose();
  aborts[1]!.abort();
  await waitFor('none left once the socket and the stream are closed', async () => hub.subscriberCount === before, 5000);
});
