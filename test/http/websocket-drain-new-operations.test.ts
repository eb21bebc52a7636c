/**
 * A gateway process stopping on SIGTERM (src/main.ts as `npm start` runs it), with a graphql-ws client (graphql-ws's
 * own createClient over `ws`) whose socket carries a chat completion streamed by subscription when the drain begins,
 * and which goes on sending new operations on that socket during the drain (src/http/graphql/websocket-drain.ts).
 * Its engine streams 5 tokens for a chat, the first at once and the rest once the test writes a `release` file; a
 * chat whose message is `forever` streams one token and never ends.
 *
 * Each new operation is refused at once, with an `error` message for its id (RESOURCE_EXHAUSTED, retryAfter 1, retry
 * on a new connection), ahead of the socket's cap and the user's quota (both set low here); the chat under way
 * finishes; the socket is closed with 1001 as soon as it has ended, and the process exits. Before: a new operation
 * ran like any other, so the socket stayed open past the chat's end for as long as the client kept one running (a
 * `forever` chat: up to DRAIN_TIMEOUT_MS, here 10 min), and the stopping gateway with it.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, expect, onTestFinished, test } from 'vitest';
import WebSocket from 'ws';
import { liveReplicaRows, standardRepos, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';
import { startGatewayProcess, gatewayExited as exited, killRecordedEngines } from '../support/processes.js';
import { engineScript, STREAM_RELEASED_JS } from '../support/scripted-engine.js';

const ADMIN_KEY = 'test_ws_drain_new_operations_admin_key_0123';
const TOKENS = ['one', 'two', 'three', 'four', 'five'];

const ENGINE = engineScript(`
${STREAM_RELEASED_JS}
const tokens = ${JSON.stringify(TOKENS)};
function onRequest(req, res, request, text) {
  if (req.url === '/tokenize') {
    return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: 1, tokens: [1], max_model_len: 4096, max_input_length: 4096 }));
  }
  if (!request.stream) return answerWhole(res);
  if (!text.includes('forever')) return streamReleased(res, tokens);
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write('data: ' + chunk('on and on') + '\\n\\n');
}
`);

const CHAT = `subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { choices { delta { content } } } }`;
const EVENTS = 'subscription($p: ID!) { endpointEvents(projectId: $p) { id } }';
/** Operations sent at once, each sent again as soon as it is answered, while the drain goes on. */
const FLOOD = 100;

let db: TestDatabase;
let hub: FakeHub;
let dir: string;
let env: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase();
  hub = await startFakeHub({ repos: standardRepos() });
  dir = await mkdtemp(path.join(os.tmpdir(), 'ws-drain-new-'));
  await chmod(dir, 0o755);
  const script = path.join(dir, 'engine.mjs');
  await writeFile(script, ENGINE);
  await writeFile(path.join(dir, 'engine.log'), '');
  env = testEnv(dir, hub.url, {
    DATABASE_URL: db.dbUrl,
    ADMIN_API_KEY: ADMIN_KEY,
    ENGINE_COMMAND: `"${process.execPath}" "${script}" {port} "${dir}"`,
    STOP_ENGINES_ON_EXIT: '1',
    // Far below the flood: a refusal of the drain comes before the socket's cap and the user's quota.
    WS_MAX_SUBSCRIPTIONS: '10',
    USER_MAX_SUBSCRIPTIONS: '3',
  });
}, 120_000);

afterAll(async () => {
  if (!db) return;
  await killRecordedEngines(db.sql);
  await hub.close();
  await db.close();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

/** One operation on the client: what it received, and how it ended (an error: GraphQL errors, or the socket's close). */
interface Tracked {
  results: any[];
  completed: boolean;
  error: unknown;
}

function track(client: Client, query: string, variables: Record<string, unknown>, ended?: (op: Tracked) => void): Tracked {
  const op: Tracked = { results: [], completed: false, error: undefined };
  client.subscribe(
    { query, variables },
    {
      next: (result) => void op.results.push(result),
      error: (error) => {
        op.error = error;
        ended?.(op);
      },
      complete: () => {
        op.completed = true;
        ended?.(op);
      },
    },
  );
  return op;
}

const contents = (op: Tracked) =>
  op.results.flatMap((r) => (r.data?.chatCompletion?.choices ?? []).map((c: any) => c.delta.content as string));

const chatInput = (model: string, content: string) => ({ input: { model, messages: [{ role: 'user', content }] } });

test('SIGTERM: new operations on an open socket are refused at once; the socket closes with 1001 as soon as the chat under way ends', async () => {
  const gateway = await startGatewayProcess({ ...env, DRAIN_TIMEOUT_MS: '600000' });
  const [project] = await db.sql<{ id: string }[]>`SELECT id FROM projects ORDER BY created_at LIMIT 1`;
  const created = await restClient(gateway.url, ADMIN_KEY)(
    'POST',
    '/dedicated/beta/endpoint',
    createBody(project!.id, { hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } }),
  );
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const model = created.body.endpointId as string;
  await waitFor('a READY replica', async () => (await liveReplicaRows(db.sql, model)).find((r) => r.state === 'READY'), 60_000);

  const closes: { code: number; reason: string }[] = [];
  const client = createClient({
    url: `${gateway.url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${ADMIN_KEY}` },
    retryAttempts: 0,
    lazy: false,
    on: { closed: (event) => void closes.push({ code: (event as CloseEvent).code, reason: (event as CloseEvent).reason }) },
    onNonLazyError: () => {},
  });
  onTestFinished(() => client.dispose());
  const chat = track(client, CHAT, chatInput(model, 'hi'));
  const events = track(client, EVENTS, { p: project!.id });
  await waitFor('the first token', async () => contents(chat).includes('one'), 30_000);

  gateway.child.kill('SIGTERM');
  onTestFinished(() => writeFile(path.join(dir, 'release'), ''));
  // The drain has begun on the socket once it completes the endless subscription.
  await waitFor('the events subscription completed', async () => events.completed, 10_000);

  // New operations from now on: a chat that would never end, and a flood of queries, each sent again once answered.
  const answered: Tracked[] = [];
  const again = (op: Tracked) => {
    answered.push(op);
    // Not once the socket is gone (the client would open another, which the stopping gateway refuses).
    if (closes.length === 0 && (op.completed || Array.isArray(op.error))) track(client, '{ __typename }', {}, again);
  };
  const forever = track(client, CHAT, chatInput(model, 'forever'));
  for (let i = 0; i < FLOOD; i++) track(client, '{ __typename }', {}, again);
  await waitFor('the flood answered, and sent again', async () => answered.length >= 5 * FLOOD, 60_000);
  expect(closes).toEqual([]);
  expect(chat.completed || chat.error).toBeFalsy();

  await writeFile(path.join(dir, 'release'), '');
  await waitFor('the chat to end', async () => chat.completed || chat.error, 30_000);
  expect(chat.error).toBeUndefined();
  expect(contents(chat)).toEqual(TOKENS);
  // New operations still come, yet the socket goes away now that nothing it had when the drain began runs.
  await waitFor('the socket to close after the chat', async () => closes.length > 0, 30_000);
  expect(closes).toEqual([{ code: 1001, reason: 'Going away' }]);

  // Every new operation was refused, none ran (one sent as the socket closed ends with the close).
  const refusal = [
    {
      message: expect.stringMatching(/shutting down.*retry it on a new connection/),
      extensions: { code: 'RESOURCE_EXHAUSTED', retryAfter: 1 },
    },
  ];
  expect(forever.results).toEqual([]);
  expect(forever.error).toEqual(refusal);
  for (const op of answered) {
    expect(op.results).toEqual([]);
    if (Array.isArray(op.error)) expect(op.error).toEqual(refusal);
    else expect((op.error as CloseEvent).code).toBe(1001);
  }
  // Idle now: it exits without waiting for DRAIN_TIMEOUT_MS (10 min).
  expect(await exited(gateway)).toBe(0);
}, 180_000);
