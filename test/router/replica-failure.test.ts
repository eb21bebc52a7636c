/**
 * A replica that dies mid-answer: nothing ends silently. Open streams end
 * with an error event in OpenAI's streaming shape and `[DONE]` (the `openai`
 * client raises it), a non-streamed request gets a 503 in OpenAI's shape, the
 * request log records the cut, and the replica is replaced.
 */
import OpenAI from 'openai';
import { beforeAll, expect, test } from 'vitest';
import {
  engineFetch,
  liveReplicaRows,
  startTestApp,
  TINY_REPO,
  waitFor,
  waitForStatus,
  type SeededUser,
  type TestApp,
} from '../support/app.js';

let t: TestApp;
let alice: SeededUser;
let endpoint: string;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  const project = await alice.project('replica failure');
  endpoint = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 4, max_token_count: 4096 },
  });
  await waitForStatus(t.sql, endpoint, 'RUNNING');
});

// Greedy: the tiny model's greedy answers run to max_tokens without an end of sequence, so a stream is surely open when its engine dies.
const body = (stream: boolean) =>
  JSON.stringify({
    model: endpoint,
    stream,
    max_tokens: 3500,
    temperature: 0,
    messages: [{ role: 'user', content: 'Tell me a very long story.' }],
  });

/** A READY replica whose engine answers (a row killed by the test before stays READY until the controller sees it). */
async function readyReplica() {
  return waitFor('a ready replica', async () => {
    for (const row of await liveReplicaRows(t.sql, endpoint)) {
      if (
        row.state === 'READY' &&
        (await engineFetch(row, '/health').then(
          (r) => r.ok,
          () => false,
        ))
      )
        return row;
    }
    return undefined;
  });
}

/** Opens a raw streamed request and resolves once its first event arrived; `rest` reads the remainder. */
async function openStream() {
  const response = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: body(true),
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const rest = async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text + decoder.decode();
      text += decoder.decode(value, { stream: true });
    }
  };
  return { rest };
}

test('SIGKILL mid-stream: every open stream ends with an error event and [DONE], the log records the cut, the replica is replaced', async () => {
  const victim = await readyReplica();
  const streams = await Promise.all([openStream(), openStream(), openStream()]);
  process.kill(victim.pid, 'SIGKILL');
  const texts = await Promise.all(streams.map((s) => s.rest()));
  for (const text of texts) {
    const events = text.split('\n\n').filter(Boolean);
    expect(events.at(-1)).toBe('data: [DONE]');
    const error = JSON.parse(events.at(-2)!.slice('data: '.length)) as { error: { type: string; code: string; message: string } };
    expect(error.error).toMatchObject({ type: 'server_error', code: 'upstream_disconnected' });
    // What came before the cut came whole: every earlier event is a chunk of the answer.
    for (const event of events.slice(0, -2)) expect(JSON.parse(event.slice(6))).toHaveProperty('choices');
  }
  const replacement = await waitFor('a replacement', async () => {
    const rows = await liveReplicaRows(t.sql, endpoint);
    return rows.find((r) => r.id !== victim.id && r.state === 'READY');
  });
  expect(replacement.pid).not.toBe(victim.pid);
  const cut = await waitFor('the cut in the request log', async () => {
    const rows = await t.sql`SELECT error_code, cancelled FROM request_log WHERE endpoint_id = ${endpoint} AND error_code IS NOT NULL`;
    return rows.length >= 3 ? rows : undefined;
  });
  expect(cut.every((r) => r.error_code === 'upstream_disconnected' && r.cancelled)).toBe(true);
});

test('the openai client raises the cut as an APIError instead of ending the stream quietly', async () => {
  const victim = await readyReplica();
  const openai = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
  const stream = await openai.chat.completions.create({
    model: endpoint,
    stream: true,
    max_tokens: 3500,
    temperature: 0,
    messages: [{ role: 'user', content: 'Tell me a very long story.' }],
  });
  let chunks = 0;
  const consumed = (async () => {
    for await (const chunk of stream) {
      if (chunks++ === 0) process.kill(victim.pid, 'SIGKILL');
      void chunk;
    }
  })();
  await expect(consumed).rejects.toThrow(/stopped before the answer was complete/);
  expect(chunks).toBeGreaterThan(0);
});

test('SIGKILL during a non-streamed request, with no other replica ready: 503 with Retry-After in OpenAI shape', async () => {
  const victim = await readyReplica();
  const pending = fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: body(false),
  });
  // The request has reached the replica: its engine is generating it (3500 greedy tokens: seconds of work, and a
  // non-streamed answer sends nothing before its end).
  await waitFor(
    'the request to be generating on the replica',
    async () => {
      const health = (await (await engineFetch(victim, '/health')).json()) as { active: number };
      return health.active === 1;
    },
    20_000,
  );
  // The controller's record of the death waits on a row lock the test holds, so the router's second try finds what a
  // gateway finds before the death is seen: no replica but the one it already tried.
  const held = await t.sql.reserve();
  try {
    await held`BEGIN`;
    await held`SELECT 1 FROM replicas WHERE id = ${victim.id} FOR NO KEY UPDATE`;
    process.kill(victim.pid, 'SIGKILL');
    const response = await pending;
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('2');
    expect(await response.json()).toEqual({
      error: {
        type: 'server_error',
        code: 'replica_unavailable',
        param: null,
        message: expect.stringMatching(/no replica of endpoint .* answered; try again/),
      },
    });
  } finally {
    await held`COMMIT`;
    held.release();
  }
});

test('the GraphQL chatCompletion subscription over SSE ends with an UPSTREAM_DISCONNECTED error, not a masked one', async () => {
  const victim = await readyReplica();
  const response = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({
      query: 'subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { choices { delta { content } } } }',
      variables: {
        input: { model: endpoint, messages: [{ role: 'user', content: 'Tell me a very long story.' }], maxTokens: 3500, temperature: 0 },
      },
    }),
  });
  expect(response.status).toBe(200);
  const decoder = new TextDecoder();
  let text = '';
  let killed = false;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    text += decoder.decode(chunk, { stream: true });
    if (!killed && text.includes('"chatCompletion"')) {
      killed = true;
      process.kill(victim.pid, 'SIGKILL');
    }
  }
  expect(killed).toBe(true);
  const lastNext = text
    .split('\n\n')
    .filter((e) => e.startsWith('event: next'))
    .at(-1)!;
  const payload = JSON.parse(lastNext.slice(lastNext.indexOf('data: ') + 6)) as {
    errors?: { message: string; extensions?: { code?: string } }[];
  };
  expect(payload.errors?.[0]).toMatchObject({
    message: expect.stringMatching(/stopped before the answer was complete/),
    extensions: { code: 'UPSTREAM_DISCONNECTED' },
  });
  expect(text).toContain('event: complete');
});

// Last: it terminates the endpoint.
test('while TERMINATING (a stream still draining), a new request is a 409 endpoint_not_running at once, not a retryable 503', async () => {
  await readyReplica();
  const open = await openStream();
  const terminated = await alice.rest('PUT', `/dedicated/beta/endpoint/${endpoint}/terminate`);
  expect(terminated.status).toBe(200);
  const t0 = performance.now();
  const refused = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: body(false),
  });
  expect(performance.now() - t0).toBeLessThan(2000);
  expect(refused.status).toBe(409);
  expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('endpoint_not_running');
  // The stream that was open ends as it ends (drained, or cut with an error event): never silently.
  expect(await open.rest()).toContain('[DONE]');
});
