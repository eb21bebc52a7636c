/**
 * An endpoint's replicas, engine logs and event history through every
 * surface, against a real gateway running a real engine on the tiny model:
 * GraphQL (queries and the replicaLogs subscription over graphql-ws), REST
 * (the follow as text and as SSE) and the CLI as a process. Nothing shown
 * names an engine's address, process or token; another team's user gets
 * 404 everywhere, a revoked key 401.
 */
import { execFile, spawn } from 'node:child_process';
import { appendFile } from 'node:fs/promises';
import path from 'node:path';
import { createClient as createWsClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { liveReplicaRows, startTestApp, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { restClient } from '../support/gateway.js';
import { openSse } from '../support/live-clients.js';

/** USER_MAX_SUBSCRIPTIONS here: a followed log holds one of its user's places, as a subscription does. */
const SUBSCRIPTIONS = 4;

let t: TestApp;
let alice: SeededUser;
let bob: SeededUser;
let revokedKey: string;
let endpointId: string;
let replica: { id: string; address: string; locator: string; engine_token: string | null };

beforeAll(async () => {
  t = await startTestApp({ env: { USER_MAX_SUBSCRIPTIONS: String(SUBSCRIPTIONS) } });
  alice = await t.seed.user();
  bob = await t.seed.user();
  const project = await alice.project('logs');
  endpointId = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
  await waitForStatus(t.sql, endpointId, 'RUNNING', 90_000);
  replica = (await liveReplicaRows(t.sql, endpointId))[0] as unknown as typeof replica;
  const key = await t.app.services.identity.createApiKey('system', { name: 'to revoke', user: alice.user.id });
  if (key.type === 'error') throw new Error(key.error.message);
  revokedKey = key.value.secret;
  await t.app.services.identity.revokeApiKey('system', key.value.record.id);
}, 120_000);

afterAll(async () => {
  if (endpointId) await alice.rest('DELETE', `/dedicated/beta/endpoint/${endpointId}`);
});

const base = () => `/dedicated/beta/endpoint/${endpointId}`;
const logFile = () => path.join(t.dataDir, 'replicas', `${replica.id}.log`);

/** Nothing a user is shown names the engine's address, port, process or token. */
function expectNoInternals(text: string): void {
  expect(text).not.toContain(replica.address);
  expect(text).not.toContain(`"pid"`);
  expect(text).not.toContain(`"port"`);
  if (replica.engine_token) expect(text).not.toContain(replica.engine_token);
  expect(text).not.toMatch(/"(address|locator|token)"/);
}

/** Reads a streamed answer until `marker` shows, then stops reading. */
async function readUntil(response: Response, marker: string): Promise<string> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    while (!text.includes(marker)) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel();
  }
  return text;
}

/**
 * Runs `read` while the line is appended to the replica's log every 200 ms: a follow reads from where the log ended
 * when it began, which may be after a line written as its answer's headers arrived.
 */
async function whileWriting<T>(line: string, read: () => Promise<T>): Promise<T> {
  const writer = setInterval(() => void appendFile(logFile(), `${line}\n`), 200);
  try {
    return await read();
  } finally {
    clearInterval(writer);
  }
}

describe('REST', () => {
  test('replicas: the READY replica, where it runs and since when, and no failures', async () => {
    const answer = await alice.rest('GET', `${base()}/replicas`);
    expect(answer.status).toBe(200);
    expect(answer.body.data).toEqual([
      expect.objectContaining({ replicaId: replica.id, state: 'READY', versionIndex: 0, runtime: 'local', node: t.app.runtime.node }),
    ]);
    expect(Date.parse(answer.body.data[0].since)).toBeGreaterThan(0);
    expect(answer.body.failures).toEqual({ windowSeconds: 600, count: 0, last: null });
    expectNoInternals(JSON.stringify(answer.body));
  });

  test("logs: the tail holds the engine's start line (without its port or pid); tail cuts it", async () => {
    const answer = await alice.rest('GET', `${base()}/logs`);
    expect(answer.status).toBe(200);
    expect(answer.body.replicaId).toBe(replica.id);
    expect(answer.body.lines.some((l: string) => l.startsWith('ENGINE_READY'))).toBe(true);
    expectNoInternals(JSON.stringify(answer.body));
    const one = await alice.rest('GET', `${base()}/logs?replica=${replica.id}&tail=1`);
    expect(one.body.lines).toHaveLength(1);
    expect((await alice.rest('GET', `${base()}/logs?tail=-1`)).status).toBe(400);
    expect((await alice.rest('GET', `${base()}/logs?replica=rep_nope`)).status).toBe(404);
  });

  test('logs follow=true streams new lines, as text and as SSE', async () => {
    const text = await fetch(new URL(`${base()}/logs?follow=true&tail=0`, t.url), { headers: { authorization: `Bearer ${alice.key}` } });
    expect(text.status).toBe(200);
    expect(text.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await whileWriting('rest-follow-marker', () => readUntil(text, 'rest-follow-marker'))).toContain('rest-follow-marker\n');

    const sse = await fetch(new URL(`${base()}/logs?follow=true&tail=1`, t.url), {
      headers: { authorization: `Bearer ${alice.key}`, accept: 'text/event-stream' },
    });
    expect(sse.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await whileWriting('sse-follow-marker', () => readUntil(sse, 'data: sse-follow-marker'));
    expect(events).toMatch(/^data: rest-follow-marker\n\n[^]*data: sse-follow-marker\n\n/);
  });

  test("a follow holds one of its user's subscription places: one past USER_MAX_SUBSCRIPTIONS is a 429, and a place freed is taken again", async () => {
    const follow = () => fetch(new URL(`${base()}/logs?follow=true&tail=0`, t.url), { headers: { authorization: `Bearer ${alice.key}` } });
    const held: Response[] = [];
    try {
      // The follows of the tests before give their places back as their connections close: taken again as they come.
      const deadline = Date.now() + 10_000;
      while (held.length < SUBSCRIPTIONS) {
        const answer = await follow();
        if (answer.status === 200) held.push(answer);
        else if (Date.now() > deadline) throw new Error(`follow ${held.length + 1} answered ${answer.status}`);
        else await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const refused = await follow();
      expect(refused.status).toBe(429);
      expect((await refused.json()).error).toEqual({
        code: 'RESOURCE_EXHAUSTED',
        message: `too many subscriptions open for this user (all their API keys): at most ${SUBSCRIPTIONS} at once; end one first`,
      });
      // A subscription over SSE counts against the same places.
      const project = await alice.project('logs-quota');
      const sse = await openSse(t.url, alice.key, 'subscription($p: ID!) { endpointEvents(projectId: $p) { id } }', { p: project.id });
      sse.close();
      expect(sse.status).toBe(429);
      // Another user is not held back by alice's follows: bob is refused for what he may read (404), not for her places.
      const other = await bob.rest('GET', `${base()}/logs?follow=true`);
      expect(other.status).toBe(404);
      // A follow that ends gives its place back.
      await held.shift()!.body!.cancel();
      await waitFor(
        'the place of the ended follow',
        async () => {
          const answer = await follow();
          if (answer.status !== 200) return false;
          held.push(answer);
          return true;
        },
        5000,
      );
    } finally {
      await Promise.all(held.map((answer) => answer.body?.cancel()));
    }
  });

  test('events page with limit and cursor, oldest or newest first', async () => {
    const seen: { eventId: string; type: string }[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
      const page = await alice.rest('GET', `${base()}/events?limit=2${query}`);
      expect(page.status).toBe(200);
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.data);
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expect(seen[0]!.type).toBe('CREATED');
    expect(seen.map((e) => Number(e.eventId))).toEqual([...seen.map((e) => Number(e.eventId))].sort((a, b) => a - b));
    const newest = await alice.rest('GET', `${base()}/events?limit=100&newestFirst=true`);
    expect(newest.body.data.map((e: { eventId: string }) => e.eventId)).toEqual(seen.map((e) => e.eventId).reverse());
    expect((await alice.rest('GET', `${base()}/events?cursor=nope`)).status).toBe(400);
  });

  test("another team's user gets 404 and a revoked key 401, on each route", async () => {
    for (const route of ['replicas', 'logs', 'logs?follow=true', 'events']) {
      expect((await bob.rest('GET', `${base()}/${route}`)).status, route).toBe(404);
      const revoked = await restClient(t.url, revokedKey)('GET', `${base()}/${route}`);
      expect(revoked.status, route).toBe(401);
      expect(revoked.body.error.code).toBe('UNAUTHENTICATED');
    }
  });
});

const QUERY = `query($id: ID!, $after: String) {
  endpoint(id: $id) {
    replicas { nodes { id state versionIndex node runtime since } failures { count windowSeconds last { id } } }
    logs(tail: 100) { replicaId lines }
    events(first: 2, after: $after) { edges { cursor node { id type } } pageInfo { hasNextPage endCursor } }
  }
}`;

describe('GraphQL', () => {
  test('replicas, a log tail and events paged like versions', async () => {
    const answer = await alice.rest('POST', '/graphql', { query: QUERY, variables: { id: endpointId } });
    expect(answer.body.errors).toBeUndefined();
    const { replicas, logs, events } = answer.body.data.endpoint;
    expect(replicas.nodes).toEqual([expect.objectContaining({ id: replica.id, state: 'READY', node: t.app.runtime.node })]);
    expect(replicas.failures).toEqual({ count: 0, windowSeconds: 600, last: null });
    expect(logs.lines.some((l: string) => l.startsWith('ENGINE_READY'))).toBe(true);
    expectNoInternals(JSON.stringify(answer.body));
    const ids: string[] = events.edges.map((e: { node: { id: string } }) => e.node.id);
    let pageInfo = events.pageInfo;
    while (pageInfo.hasNextPage) {
      const next = await alice.rest('POST', '/graphql', { query: QUERY, variables: { id: endpointId, after: pageInfo.endCursor } });
      ids.push(...next.body.data.endpoint.events.edges.map((e: { node: { id: string } }) => e.node.id));
      pageInfo = next.body.data.endpoint.events.pageInfo;
    }
    const rest = await alice.rest('GET', `${base()}/events?limit=100`);
    expect(ids).toEqual(rest.body.data.map((e: { eventId: string }) => e.eventId));
  });

  test('replicaLogs follows the log over graphql-ws', async () => {
    const url = new URL('/graphql', t.url);
    url.protocol = 'ws:';
    const client = createWsClient({
      url: url.toString(),
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${alice.key}` },
    });
    try {
      const subscription = client.iterate<{ replicaLogs: { replicaId: string; lines: string[] } }>({
        query: 'subscription($id: ID!) { replicaLogs(endpointId: $id, tail: 0) { replicaId lines } }',
        variables: { id: endpointId },
      });
      // The subscription is open once the server answers a first item or the marker; write the marker until it arrives.
      const writer = setInterval(() => void appendFile(logFile(), 'graphql-follow-marker\n'), 200);
      try {
        for await (const result of subscription) {
          expect(result.errors).toBeUndefined();
          expect(result.data!.replicaLogs.replicaId).toBe(replica.id);
          if (result.data!.replicaLogs.lines.includes('graphql-follow-marker')) break;
        }
      } finally {
        clearInterval(writer);
      }
    } finally {
      await client.dispose();
    }
  });

  test("another team's user sees null and gets NOT_FOUND from the subscription; a revoked key 401", async () => {
    const answer = await bob.rest('POST', '/graphql', { query: QUERY, variables: { id: endpointId } });
    expect(answer.body.data.endpoint).toBeNull();
    const url = new URL('/graphql', t.url);
    url.protocol = 'ws:';
    const client = createWsClient({
      url: url.toString(),
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${bob.key}` },
    });
    try {
      const subscription = client.iterate({
        query: 'subscription($id: ID!) { replicaLogs(endpointId: $id) { lines } }',
        variables: { id: endpointId },
      });
      const first = await subscription.next().catch((error: unknown) => ({ value: { errors: error as { extensions?: unknown }[] } }));
      expect(JSON.stringify(first.value)).toContain('NOT_FOUND');
    } finally {
      await client.dispose();
    }
    const revoked = await restClient(t.url, revokedKey)('POST', '/graphql', { query: QUERY, variables: { id: endpointId } });
    expect(revoked.status).toBe(401);
  });
});

/**
 * The CLI's entry: the run's bundle of bin/dedicated.mjs's source (test/support/global-setup.ts), which starts in about
 * half the time of the binary through tsx; test/cli/dedicated.test.ts runs the binary itself, and TEST_ENGINE=tsx here.
 */
const cliEntry = () => (process.env.TEST_ENGINE === 'tsx' ? 'bin/dedicated.mjs' : inject('cliBundle'));

function cli(args: string[], key: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const { DEDICATED_API_KEY: _k, DEDICATED_BASE_URL: _u, DEDICATED_CONFIG: _c, ...env } = process.env;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [cliEntry(), '--base-url', t.url, ...args],
      { env: { ...env, DEDICATED_API_KEY: key, DEDICATED_CONFIG: '/nonexistent/config.json', NO_COLOR: '1' }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('the CLI', () => {
  test('dedicated replicas, logs and events', async () => {
    // Each call is a process that starts in a second or so, and each only reads: they run together.
    const [replicas, logs, events] = await Promise.all([
      cli(['replicas', endpointId], alice.key),
      cli(['logs', endpointId, '--tail', '200'], alice.key),
      cli(['events', endpointId, '--limit', '3'], alice.key),
    ]);
    expect(replicas.code, replicas.stderr).toBe(0);
    expect(replicas.stdout).toMatch(new RegExp(`^REPLICA\\s+STATE\\s+VERSION\\s+NODE[^\\n]*\\n${replica.id}\\s+READY\\s+0\\s+`, 'm'));
    expect(replicas.stdout).toContain('failed in the last 10 min: 0');
    expectNoInternals(replicas.stdout);

    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout).toMatch(/^ENGINE_READY /m);
    expectNoInternals(logs.stdout);

    expect(events.code, events.stderr).toBe(0);
    expect(events.stdout.trim().split('\n')).toHaveLength(4); // the header and three events
    expect(events.stdout).toMatch(/CREATED\s+INITIALIZING/);
  }, 60_000);

  test('dedicated logs --follow prints new lines as they come, until Ctrl-C', async () => {
    const { DEDICATED_API_KEY: _k, DEDICATED_CONFIG: _c, ...env } = process.env;
    const child = spawn(process.execPath, [cliEntry(), '--base-url', t.url, 'logs', endpointId, '--follow', '--tail', '0'], {
      env: { ...env, DEDICATED_API_KEY: alice.key, DEDICATED_CONFIG: '/nonexistent/config.json', NO_COLOR: '1' },
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const writer = setInterval(() => void appendFile(logFile(), 'cli-follow-marker\n'), 250);
    try {
      await waitFor('the followed line', async () => stdout.includes('cli-follow-marker'), 30_000);
    } finally {
      clearInterval(writer);
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
  }, 60_000);

  test("another team's user and a revoked key get one-line errors, exit 1", async () => {
    // Six refused reads: they run together.
    const commands = [['replicas'], ['logs'], ['events']];
    const answers = await Promise.all(
      commands.map((command) => Promise.all([cli([...command, endpointId], bob.key), cli([...command, endpointId], revokedKey)])),
    );
    for (const [other, revoked] of answers) {
      expect(other.code).toBe(1);
      expect(other.stderr).toMatch(/not found/);
      expect(revoked.code).toBe(1);
      expect(revoked.stderr).toMatch(/refused|401/);
    }
  }, 60_000);
});
