/**
 * Revocation ends open subscriptions of every kind (issue 31): each
 * Subscription field of schema.graphql (an unlisted one fails the first
 * test), open over WebSocket and over SSE against a running endpoint (a
 * stand-in engine that streams a chat answer until its client leaves), ends
 * when the subscriber's key is revoked (the socket closes 4403; each SSE
 * stream ends with an UNAUTHENTICATED error event) and when the subscriber is
 * removed from the endpoint's team (each subscription ends with a FORBIDDEN
 * error; the socket stays open for the rest). A streamed chat answer that
 * ends so is cancelled on the engine too. The owner's subscriptions, on the
 * same endpoint, go on: the check is a chunk of the owner's chat that comes
 * after the revoked ones ended, and the owner's socket holds no error. A
 * replica's log followed over REST (`…/logs?follow=true`) ends too, at once
 * (watched like a subscription; it does not poll).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { buildSchema, type GraphQLObjectType } from 'graphql';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startTestApp, TINY_REPO, waitFor, waitForStatus, type TestApp } from '../support/app.js';
import type { SeededUser } from '../support/gateway.js';
import { openSocket, openSse, type RawSocket, type SseStream } from '../support/live-clients.js';
import { ANSWER_WHOLE_JS, CHUNK_JS } from '../support/scripted-engine.js';

/** Answers the warm-up; a chat whose prompt says FOREVER streams a chunk every 50 ms until its client leaves. */
const ENGINE = `
import http from 'node:http';
import { appendFileSync } from 'node:fs';
const port = Number(process.argv[2]);
const journal = process.argv[4];
console.log('stand-in engine listening on ' + port);
${CHUNK_JS}
${ANSWER_WHOLE_JS}
http.createServer((req, res) => {
  if (req.method === 'GET') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok","active":0,"queued":0}');
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const request = JSON.parse(body || '{}');
    console.log('request ' + req.url);
    if (request.stream && JSON.stringify(request.messages ?? '').includes('FOREVER')) {
      appendFileSync(journal, 'open\\n');
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: ' + chunk('x') + '\\n\\n'), 50);
      res.on('close', () => { clearInterval(timer); appendFileSync(journal, 'close\\n'); });
      return;
    }
    if (request.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: ' + chunk('hi') + '\\n\\n');
      return res.end('data: [DONE]\\n\\n');
    }
    answerWhole(res);
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

interface Target {
  endpointId: string;
  projectId: string;
}

/** One row per Subscription field: a document and its variables, whose first result proves the subscription live. */
const SUBSCRIPTIONS: Record<string, (target: Target) => { query: string; variables: Record<string, unknown> }> = {
  chatCompletion: ({ endpointId }) => ({
    query: 'subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { id choices { delta { content } } } }',
    variables: { input: { model: endpointId, messages: [{ role: 'user', content: 'FOREVER' }] } },
  }),
  endpointEvents: ({ projectId }) => ({
    query: 'subscription($p: ID!) { endpointEvents(projectId: $p, after: "0") { id type } }',
    variables: { p: projectId },
  }),
  endpointMetrics: ({ endpointId }) => ({
    query: 'subscription($id: ID!) { endpointMetrics(id: $id) { endpointId requests } }',
    variables: { id: endpointId },
  }),
  endpointStatus: ({ endpointId }) => ({
    query: 'subscription($id: ID!) { endpointStatus(endpointId: $id) { status { status } } }',
    variables: { id: endpointId },
  }),
  // The engine's log so far (it prints a line at its start and one per request), then each new line.
  replicaLogs: ({ endpointId }) => ({
    query: 'subscription($id: ID!) { replicaLogs(endpointId: $id, tail: 10) { replicaId lines } }',
    variables: { id: endpointId },
  }),
};

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const subscriptionType = buildSchema(readFileSync(path.join(ROOT, 'schema.graphql'), 'utf8')).getSubscriptionType() as GraphQLObjectType;
const FIELDS = Object.keys(subscriptionType.getFields());
/** The kinds with a row (the first test fails naming any other). */
const KINDS = FIELDS.filter((kind) => kind in SUBSCRIPTIONS);

let dir: string;
let journal: string;
let app: TestApp;
let owner: SeededUser;
let target: Target;
let ownerSocket: RawSocket;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'revocation-subscriptions-'));
  const script = path.join(dir, 'engine.mjs');
  journal = path.join(dir, 'streams.log');
  await writeFile(script, ENGINE);
  await writeFile(journal, '');
  app = await startTestApp({ env: { ENGINE_COMMAND: `"${process.execPath}" "${script}" {port} {model} "${journal}"` } });
  owner = await app.seed.user();
  const project = await owner.project();
  const endpointId = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    // An ENGINE_COMMAND engine's log is shown only with content logging on (its log may quote requests).
    advanced: { max_batch_size: 16, enable_content_logging: true },
  });
  await waitForStatus(app.sql, endpointId, 'RUNNING', 60_000);
  target = { endpointId, projectId: project.id };
  // The owner's own subscriptions of every kind: none may end when someone else loses access.
  ownerSocket = await openSocket(app.url, { authorization: `Bearer ${owner.key}` });
  for (const kind of KINDS) {
    const { query, variables } = SUBSCRIPTIONS[kind]!(target);
    ownerSocket.subscribe(kind, query, variables);
  }
  await waitFor(
    'the owner subscriptions to be live',
    async () => KINDS.every((kind) => ownerSocket.of(kind).some((m) => m.type === 'next')),
    20_000,
  );
}, 120_000);

afterAll(async () => {
  ownerSocket?.socket.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Chat streams the engine holds open now. */
async function openStreams(): Promise<number> {
  const lines = (await readFile(journal, 'utf8')).split('\n');
  return lines.filter((l) => l === 'open').length - lines.filter((l) => l === 'close').length;
}

/** A member of the owner's team with a key whose id is known. */
async function member(): Promise<{ user: SeededUser; key: string; keyId: string }> {
  const user = await app.seed.user();
  const added = await app.app.services.identity.addTeamMember('system', { teamId: owner.teamId, user: user.user.id });
  expect(added.type).toBe('ok');
  const key = await app.app.services.identity.createApiKey('system', { name: 'subscriber', user: user.user.id });
  if (key.type === 'error') throw new Error(key.error.message);
  return { user, key: key.value.secret, keyId: key.value.record.id };
}

/** A followed engine log over REST (`GET …/logs?follow=true`, as SSE): its text so far, and when it ended. */
interface FollowedLog {
  text: string;
  ended: boolean;
  endedAt?: number;
}

async function followLog(key: string): Promise<FollowedLog> {
  const response = await fetch(`${app.url}/dedicated/beta/endpoint/${target.endpointId}/logs?follow=true&tail=5`, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
  });
  expect(response.status).toBe(200);
  const log: FollowedLog = { text: '', ended: false };
  void (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) log.text += decoder.decode(chunk, { stream: true });
    } catch {
      // cut off
    }
    log.ended = true;
    log.endedAt = performance.now();
  })();
  return log;
}

/** Every kind of subscription, on one socket and as one SSE stream each, and a followed log over REST, all proven live. */
async function subscribeEverything(key: string): Promise<{ ws: RawSocket; sse: Map<string, SseStream>; log: FollowedLog }> {
  const ws = await openSocket(app.url, { authorization: `Bearer ${key}` });
  const sse = new Map<string, SseStream>();
  for (const kind of KINDS) {
    const { query, variables } = SUBSCRIPTIONS[kind]!(target);
    ws.subscribe(kind, query, variables);
    const stream = await openSse(app.url, key, query, variables);
    expect(stream.status).toBe(200);
    sse.set(kind, stream);
  }
  const log = await followLog(key);
  await waitFor(
    'every subscription to be live',
    async () =>
      log.text.includes('data: ') &&
      KINDS.every(
        (kind) =>
          ws.of(kind).some((m) => m.type === 'next' && m.payload.data) &&
          sse.get(kind)!.events.some((e) => e.event === 'next' && e.data?.data),
      ),
    20_000,
  );
  return { ws, sse, log };
}

/** The owner's socket is open and error-free, and its chat answer keeps coming after `since` (a later chunk). */
async function ownerGoesOn(): Promise<void> {
  const chunks = ownerSocket.of('chatCompletion').length;
  await waitFor("the owner's chat to stream on", async () => ownerSocket.of('chatCompletion').length > chunks + 2, 10_000);
  expect(ownerSocket.closed).toBeUndefined();
  expect(ownerSocket.messages.filter((m) => m.type === 'error' || m.type === 'complete')).toEqual([]);
}

test('every Subscription field of schema.graphql has a row here', () => {
  const missing = FIELDS.filter((kind) => !(kind in SUBSCRIPTIONS));
  expect(missing, `subscriptions without a row in ${path.basename(fileURLToPath(import.meta.url))}`).toEqual([]);
});

test('a revoked key: the socket closes 4403, every SSE stream ends UNAUTHENTICATED, and the chat generations are cancelled', async () => {
  const streamsBefore = await openStreams();
  const subscriber = await member();
  const { ws, sse, log } = await subscribeEverything(subscriber.key);
  // Its two chat answers stream from the engine.
  await waitFor('the chat answers to reach the engine', async () => (await openStreams()) === streamsBefore + 2, 10_000);

  const revokedAt = performance.now();
  const revoked = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${subscriber.key}` },
    body: JSON.stringify({ query: 'mutation($id: ID!) { revokeApiKey(id: $id) { __typename } }', variables: { id: subscriber.keyId } }),
  });
  expect((await revoked.json()).data.revokeApiKey.__typename).toBe('RevokeApiKeySuccess');

  const closed = await ws.waitClosed(10_000);
  expect(closed).toMatchObject({ code: 4403, reason: 'access revoked: invalid or revoked API key' });
  for (const kind of KINDS) {
    const stream = sse.get(kind)!;
    await waitFor(`the ${kind} SSE stream to end`, async () => stream.ended, 10_000);
    expect(stream.events.slice(-2), kind).toMatchObject([
      { event: 'next', data: { errors: [{ extensions: { code: 'UNAUTHENTICATED' } }] } },
      { event: 'complete' },
    ]);
  }
  await waitFor('the revoked chat answers to be cancelled on the engine', async () => (await openStreams()) === streamsBefore, 10_000);
  // At once: the access watch ends it (replica-routes.ts).
  await waitFor('the followed log to end', async () => log.ended, 10_000);
  expect(log.endedAt! - revokedAt).toBeLessThan(3000);
  await ownerGoesOn();
});

test('a member removed from the team: each subscription ends FORBIDDEN, the socket stays open, and the chat generations are cancelled', async () => {
  const streamsBefore = await openStreams();
  const subscriber = await member();
  const { ws, sse, log } = await subscribeEverything(subscriber.key);
  await waitFor('the chat answers to reach the engine', async () => (await openStreams()) === streamsBefore + 2, 10_000);

  const removedAt = performance.now();
  const removed = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${owner.key}` },
    body: JSON.stringify({
      query: 'mutation($t: ID!, $u: ID!) { removeTeamMember(teamId: $t, userId: $u) { __typename } }',
      variables: { t: owner.teamId, u: subscriber.user.user.id },
    }),
  });
  expect((await removed.json()).data.removeTeamMember.__typename).toBe('RemoveTeamMemberSuccess');

  for (const kind of KINDS) {
    await waitFor(`the ${kind} subscription to end`, async () => ws.of(kind).some((m) => m.type === 'error'), 10_000);
    expect(ws.of(kind).find((m) => m.type === 'error')!.payload, kind).toEqual([
      { message: `your access to team '${owner.teamId}' changed: this subscription has ended`, extensions: { code: 'FORBIDDEN' } },
    ]);
    const stream = sse.get(kind)!;
    await waitFor(`the ${kind} SSE stream to end`, async () => stream.ended, 10_000);
    expect(stream.events.slice(-2), kind).toMatchObject([
      { event: 'next', data: { errors: [{ extensions: { code: 'FORBIDDEN' } }] } },
      { event: 'complete' },
    ]);
  }
  // The key still authenticates: the socket is open, and a new subscription to the team's endpoint is NOT_FOUND.
  expect(ws.closed).toBeUndefined();
  const { query, variables } = SUBSCRIPTIONS.endpointStatus!(target);
  ws.subscribe('again', query, variables);
  await waitFor('the new subscription to be refused', async () => ws.of('again').length > 0, 5000);
  expect(ws.of('again')[0]).toMatchObject({ type: 'error', payload: [{ extensions: { code: 'NOT_FOUND' } }] });
  await waitFor('the removed chat answers to be cancelled on the engine', async () => (await openStreams()) === streamsBefore, 10_000);
  await waitFor('the followed log to end', async () => log.ended, 10_000);
  expect(log.endedAt! - removedAt).toBeLessThan(3000);
  await ownerGoesOn();
  ws.socket.close();
});
