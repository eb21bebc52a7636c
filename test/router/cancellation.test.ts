/**
 * Every way a client can give up on a generation frees its slot: the engine
 * stops decoding it, and the next request is admitted at once. The endpoint
 * has one slot (max_batch_size 1) and a short queue wait, so a slot that
 * stayed taken would turn the next request into a 429; the first test shows
 * that it does, when nobody cancels.
 */
import { createClient as createWsClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp, replicaHealth } from '../support/app.js';

let t: TestApp;
let alice: SeededUser;
let endpoint: string;

const MESSAGES = [{ role: 'user', content: 'Tell me a long story.' }];
/** More tokens than the tiny model decodes in many seconds on one thread. */
const LONG = 3900;

beforeAll(async () => {
  t = await startTestApp({ env: { QUEUE_TIMEOUT_MS: '1500', CPU_SLOTS: '4' } });
  alice = await t.seed.user();
  const project = await alice.project('cancel');
  endpoint = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 1, max_token_count: 4096, max_input_length: 64 },
  });
  await waitForStatus(t.sql, endpoint, 'RUNNING');
});

const sockets: Client[] = [];
afterEach(async () => {
  await Promise.all(sockets.splice(0).map((client) => client.dispose()));
  // Whatever a test left running ends before the next one starts.
  await waitFor('the slot to be free', async () => (await engineHealth()).active === 0, 30_000);
});

const engineHealth = () => replicaHealth(t.sql, endpoint);

function rest(body: Record<string, unknown>, signal?: AbortSignal) {
  return fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: endpoint, messages: MESSAGES, temperature: 0, ...body }),
    ...(signal ? { signal } : {}),
  });
}

function graphqlHttp(query: string, variables: Record<string, unknown>, signal: AbortSignal, accept = 'application/json') {
  return fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept },
    body: JSON.stringify({ query, variables }),
    signal,
  });
}

function socket(): Client {
  const client = createWsClient({
    url: `${t.url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${alice.key}` },
    retryAttempts: 0,
  });
  sockets.push(client);
  return client;
}

const MUTATION = `mutation($input: ChatCompletionInput!) {
  createChatCompletion(input: $input) { __typename }
}`;
const SUBSCRIPTION = `subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { id } }`;
const longInput = () => ({ input: { model: endpoint, messages: MESSAGES, maxTokens: LONG, temperature: 0 } });

/** Waits until the engine decodes the long generation, cancels it as `cancel` does, and checks that the slot is free at once. */
async function expectFreedBy(cancel: () => void | Promise<void>) {
  await waitFor('the generation to hold the slot', async () => (await engineHealth()).active === 1, 20_000);
  await cancel();
  // The next request is admitted within the queue's 1.5 s wait: the slot was given back, not waited out.
  const next = await rest({ max_tokens: 2 });
  expect(next.status).toBe(200);
  await waitFor('the engine to stop decoding', async () => (await engineHealth()).active === 0, 5_000);
  const decoded = (await engineHealth()).totalCompletionTokens;
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect((await engineHealth()).totalCompletionTokens).toBe(decoded);
}

describe('a cancelled generation frees its slot at once', () => {
  test('(control) one that nobody cancels keeps the slot: the next request waits out the queue and is refused', async () => {
    const client = new AbortController();
    const long = rest({ max_tokens: LONG, stream: true }, client.signal).catch(() => undefined);
    await waitFor('the generation to hold the slot', async () => (await engineHealth()).active === 1, 20_000);
    const next = await rest({ max_tokens: 2 });
    expect(next.status).toBe(429);
    client.abort();
    await long;
  });

  test('REST, streamed: the client disconnects', async () => {
    const client = new AbortController();
    const response = await rest({ max_tokens: LONG, stream: true }, client.signal);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await expectFreedBy(() => client.abort());
  });

  test('REST, not streamed: the client disconnects while the answer is generated', async () => {
    const client = new AbortController();
    const pending = rest({ max_tokens: LONG }, client.signal).catch(() => undefined);
    await expectFreedBy(() => client.abort());
    await pending;
  });

  test('GraphQL mutation over HTTP: the request is aborted', async () => {
    const client = new AbortController();
    const pending = graphqlHttp(MUTATION, longInput(), client.signal).catch(() => undefined);
    await expectFreedBy(() => client.abort());
    await pending;
  });

  test('GraphQL mutation over WebSocket: the client completes the operation', async () => {
    const ws = socket();
    const stop = ws.subscribe({ query: MUTATION, variables: longInput() }, { next: () => {}, error: () => {}, complete: () => {} });
    await expectFreedBy(stop);
  });

  test('GraphQL mutation over WebSocket: the socket closes', async () => {
    const ws = socket();
    ws.subscribe({ query: MUTATION, variables: longInput() }, { next: () => {}, error: () => {}, complete: () => {} });
    await expectFreedBy(() => ws.dispose());
  });

  test('GraphQL subscription over WebSocket: unsubscribed (the console’s Stop)', async () => {
    const ws = socket();
    let received = 0;
    let failed: unknown;
    const stop = ws.subscribe(
      { query: SUBSCRIPTION, variables: longInput() },
      { next: () => void received++, error: (error) => void (failed = error), complete: () => {} },
    );
    await waitFor(
      'a first chunk',
      async () => {
        if (failed) throw new Error(`the subscription failed: ${JSON.stringify(failed)}`);
        return received > 0;
      },
      20_000,
    );
    await expectFreedBy(stop);
  });

  test('GraphQL subscription over SSE: the client disconnects', async () => {
    const client = new AbortController();
    const response = await graphqlHttp(SUBSCRIPTION, longInput(), client.signal, 'text/event-stream');
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await expectFreedBy(() => client.abort());
  });
});
