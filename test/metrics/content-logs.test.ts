/**
 * Content logs, with real traffic through the tiny model: the messages and
 * the whole answer (reasoning included) are stored and returned with the
 * activity only for an endpoint whose version has enable_content_logging on.
 * Without it, a sentinel in the prompts is found in no column of any table,
 * in no log line and in no file the replicas write; turning it off stops
 * capture at once; deleting the endpoint deletes its content logs; retention
 * deletes old rows. Text PostgreSQL's jsonb cannot hold never costs other
 * requests their logs: a client's is refused, a model's is stored replaced,
 * and a row the database still refuses loses only itself.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { MetricsUpkeep } from '../../src/services/metrics-upkeep.js';
import { createLogger } from '../../src/log.js';
import { ContentCapture } from '../../src/router/content-capture.js';
import { RequestRecorder, type RecordedRequest } from '../../src/router/request-recorder.js';
import { startTestApp, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { ask, chat, filesHolding, graphql, tablesHolding, type Answer } from './traffic.js';

/** In the prompts to the endpoint without content logging: must never be stored or logged. */
const PLAIN_SENTINEL = `SENTINEL-PLAIN-${randomUUID()}`;
/** In the prompts to the endpoint with content logging: stored in its content logs only, until it is deleted. */
const LOGGED_SENTINEL = `SENTINEL-LOGGED-${randomUUID()}`;

let t: TestApp;
let alice: SeededUser;
let plain: string;
let logged: string;
/** Content logging on, for the text PostgreSQL cannot hold. */
let unicode: string;
/** Every line the test process (gateway, controller, recorder) writes to its console. */
const captured: string[] = [];

beforeAll(async () => {
  for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    const original = console[method].bind(console);
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      captured.push(
        args.map((a) => (a instanceof Error ? `${a.message} ${a.stack}` : typeof a === 'string' ? a : JSON.stringify(a))).join(' '),
      );
      original(...(args as []));
    });
  }
  const writes = (stream: NodeJS.WriteStream) => {
    const original = stream.write.bind(stream);
    vi.spyOn(stream, 'write').mockImplementation(((chunk: unknown, ...rest: never[]) => {
      captured.push(String(chunk));
      return original(chunk as string, ...rest);
    }) as typeof stream.write);
  };
  writes(process.stdout);
  writes(process.stderr);
  // The gateway's structured log (access lines, failures), at its most verbose, is kept too.
  const logger = createLogger({ level: 'trace', format: 'json' }, { write: (line: string) => void captured.push(line) });
  t = await startTestApp({ env: { CPU_SLOTS: '8' }, logger });
  alice = await t.seed.user();
  const project = await alice.project('content');
  plain = await project.endpoint({
    name: 'plain',
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 4 },
  });
  logged = await project.endpoint({
    name: 'logged',
    hfModelRepo: 'test-org/tiny-thinking-GGUF',
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 4, enable_content_logging: true },
  });
  unicode = await project.endpoint({
    name: 'unicode',
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 4, enable_content_logging: true },
  });
  await waitForStatus(t.sql, plain, 'RUNNING');
  await waitForStatus(t.sql, logged, 'RUNNING');
  await waitForStatus(t.sql, unicode, 'RUNNING');
  // Without content logging: streamed, not streamed, and one refused (over max_token_count).
  for (let i = 0; i < 2; i++) expect((await ask(t, alice.key, plain, PLAIN_SENTINEL, i === 0, i)).status).toBe(200);
  const refused = await chat(t, alice.key, { model: plain, messages: [{ role: 'user', content: PLAIN_SENTINEL }], max_tokens: 5000 });
  expect(refused.status).toBe(400);
}, 120_000);

afterAll(() => vi.restoreAllMocks());

describe('content logs', () => {
  test('stored with the activity only where content logging is on; nowhere else, not in logs; deleted with the endpoint', async () => {
    const answers: Answer[] = [];
    for (let i = 0; i < 2; i++) answers.push(await ask(t, alice.key, logged, LOGGED_SENTINEL, i === 0, i));
    const withContent = await waitFor('the content logs', async () => {
      const result = await graphql(
        alice,
        `
          query ($id: ID!) {
            endpoint(id: $id) {
              requests(first: 10) {
                nodes {
                  stream
                  content {
                    messages
                    content
                    reasoningContent
                    finishReason
                  }
                }
              }
            }
          }
        `,
        { id: logged },
      );
      const nodes = result.data.endpoint.requests.nodes as any[];
      return nodes.length === 2 && nodes.every((n) => n.content) ? nodes : undefined;
    });
    for (const node of withContent) {
      const answer = answers[node.stream ? 0 : 1]!;
      expect(JSON.stringify(node.content.messages)).toContain(LOGGED_SENTINEL);
      expect(node.content.content).toBe(answer.content);
      expect(node.content.reasoningContent).toBe(answer.reasoning);
      expect(node.content.content.length + node.content.reasoningContent.length).toBeGreaterThan(0);
    }
    expect(answers.some((a) => a.reasoning.length > 0)).toBe(true);

    // Both sentinels' requests are recorded (so a missing write is not mistaken for privacy).
    const [plainRows] = await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM request_log WHERE endpoint_id = ${plain}`;
    expect(plainRows!.n).toBeGreaterThan(0);
    expect(await tablesHolding(t, PLAIN_SENTINEL)).toEqual([]);
    expect(await tablesHolding(t, LOGGED_SENTINEL)).toEqual(['request_content.messages']);
    expect(captured.some((line) => line.includes('/dedicated/v1/chat/completions'))).toBe(true); // the log saw the requests
    expect(captured.filter((line) => line.includes(PLAIN_SENTINEL))).toEqual([]);
    expect(await filesHolding(t.dataDir, PLAIN_SENTINEL)).toEqual([]);

    // Turned off: capture stops at once, even for a request the old version's replica still serves during the rollout.
    const OFF_SENTINEL = `SENTINEL-OFF-${randomUUID()}`;
    const off = await alice.rest('PUT', `/dedicated/beta/endpoint/${logged}`, { advanced: { enable_content_logging: false } });
    expect(off.status).toBe(200);
    expect((await ask(t, alice.key, logged, OFF_SENTINEL, true, 0)).status).toBe(200);
    await waitFor('the request logged', async () => {
      const [row] = await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM request_log WHERE endpoint_id = ${logged}`;
      return row!.n === 3;
    });
    await new Promise((resolve) => setTimeout(resolve, 300)); // the content, if any, is written in the same batch
    expect(await tablesHolding(t, OFF_SENTINEL)).toEqual([]);
    expect(captured.filter((line) => line.includes(OFF_SENTINEL))).toEqual([]);

    const deleted = await alice.rest('DELETE', `/dedicated/beta/endpoint/${logged}`);
    expect(deleted.status).toBe(200);
    expect(await tablesHolding(t, LOGGED_SENTINEL)).toEqual([]);
  });
});

describe('text that jsonb cannot hold', () => {
  const CONTENT_QUERY = `
    query ($id: ID!) { endpoint(id: $id) { requests(first: 50) { nodes { replicaId status content { messages content } } } } }`;

  test('a request with an unpaired surrogate is refused (400 naming it); one sent beside it is still logged', async () => {
    const [a, b] = await Promise.all([
      chat(t, alice.key, { model: unicode, messages: [{ role: 'user', content: 'AAA-normal-1' }], max_tokens: 4, temperature: 0 }),
      chat(t, alice.key, { model: unicode, messages: [{ role: 'user', content: 'BBB-\ud800' }], max_tokens: 4, temperature: 0 }),
    ]);
    expect(a.status).toBe(200);
    await a.text();
    expect(b.status).toBe(400);
    expect(((await b.json()) as { error: unknown }).error).toEqual({
      message: 'messages[0].content must be valid Unicode text (it contains an unpaired UTF-16 surrogate)',
      type: 'invalid_request_error',
      param: 'messages[0].content',
      code: 'invalid_value',
    });
    const nodes = await waitFor('the content log of A', async () => {
      const result = await graphql(alice, CONTENT_QUERY, { id: unicode });
      const found = result.data.endpoint.requests.nodes as any[];
      return found.some((n) => n.content) ? found : undefined;
    });
    expect(nodes).toHaveLength(1);
    expect(nodes[0].content.messages).toEqual([{ role: 'user', content: 'AAA-normal-1' }]);
    expect(captured.filter((line) => line.includes('recording content logs failed'))).toEqual([]);
  });

  test("NUL and lone surrogates in a model's answer are stored replaced; a row the database still refuses loses only itself", async () => {
    const lines: string[] = [];
    const recorder = new RequestRecorder(t.sql, 60_000, (message) => lines.push(message));
    const answer = (content: string, versionIndex = 0) => {
      const capture = new ContentCapture([{ role: 'user', content: `prompt of ${content.slice(0, 4)}` }], versionIndex);
      capture.wholeBody(Buffer.from(JSON.stringify({ choices: [{ message: { content }, finish_reason: 'stop' }] })));
      return capture;
    };
    const entry = (replicaId: string, overrides: Partial<RecordedRequest>): RecordedRequest => ({
      endpointId: unicode,
      replicaId,
      teamId: alice.teamId,
      userId: alice.user.id,
      stream: false,
      httpStatus: 200,
      promptTokens: 3,
      completionTokens: 4,
      ttftMs: 1,
      durationMs: 2,
      queuedMs: 0,
      finishReason: 'stop',
      cancelled: false,
      startedAt: new Date(),
      ...overrides,
    });
    const badVersion = answer('lost with its row', 2 ** 31); // past the int column: the content batch fails
    recorder.record(entry('rp_good', { content: answer('GOOD-OUTPUT') }));
    recorder.record(entry('rp_unstorable', { content: answer('out\u0000put \ud800 end \udc00') }));
    recorder.record(entry('rp_bad_content', { content: badVersion }));
    recorder.record(entry('rp_bad_log', { promptTokens: 2 ** 31, content: answer('never logged') })); // the request-log batch fails
    recorder.record(entry('rp_after', { content: answer('AFTER-OUTPUT') }));
    await recorder.close();

    const rows = await t.sql<{ replica_id: string; content: string | null }[]>`
      SELECT r.replica_id, c.response->>'content' AS content FROM request_log r LEFT JOIN request_content c ON c.request_log_id = r.id
      WHERE r.endpoint_id = ${unicode} AND r.replica_id LIKE 'rp\_%' ORDER BY r.id`;
    expect(rows).toEqual([
      { replica_id: 'rp_good', content: 'GOOD-OUTPUT' },
      { replica_id: 'rp_unstorable', content: 'out\ufffdput \ufffd end \ufffd' },
      { replica_id: 'rp_bad_content', content: null },
      { replica_id: 'rp_after', content: 'AFTER-OUTPUT' },
    ]);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe('recording requests failed (1 of 5)');
    expect(lines[1]).toMatch(/^recording content logs failed \(1 of 4; request-log ids \d+\): .*out of range/);
    expect(lines.join('\n')).not.toContain('lost with its row');

    // Read back over GraphQL as stored.
    const result = await graphql(alice, CONTENT_QUERY, { id: unicode });
    const stored = (result.data.endpoint.requests.nodes as any[]).find((n) => n.replicaId === 'rp_unstorable');
    expect(stored.content.content).toBe('out\ufffdput \ufffd end \ufffd');
  });
});

describe('retention', () => {
  test('deletes request-log rows, content logs and roll-ups past their age', async () => {
    const old = new Date(Date.now() - 40 * 86_400_000);
    await t.sql`INSERT INTO request_log (endpoint_id, team_id, user_id, stream, http_status, duration_ms, started_at)
      VALUES ('ep_old', 'tm', 'us', false, 200, 1, ${old})`;
    await t.sql`INSERT INTO endpoint_metrics_minute (endpoint_id, minute, requests) VALUES ('ep_old', ${old}, 1)`;
    const upkeep = new MetricsUpkeep(t.sql, { requestLogRetentionDays: 30, metricsRetentionDays: 30 });
    expect(await upkeep.retain()).toBe(2);
    const [left] = await t.sql<{ n: number }[]>`
      SELECT (SELECT count(*) FROM request_log WHERE endpoint_id = 'ep_old') + (SELECT count(*) FROM endpoint_metrics_minute WHERE endpoint_id = 'ep_old') AS n`;
    expect(Number(left!.n)).toBe(0);
    // Recent rows stay.
    const [recent] = await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM request_log WHERE endpoint_id = ${plain}`;
    expect(recent!.n).toBeGreaterThan(0);
  });
});

describe('what is captured of an answer', () => {
  test('tool calls, from a whole answer and from streamed deltas (a call by its index, its arguments in pieces)', () => {
    const whole = new ContentCapture([], 1);
    whole.wholeBody(
      Buffer.from(
        JSON.stringify({
          choices: [
            {
              message: {
                role: 'assistant',
                content: null,
                tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
              },
              finish_reason: 'tool_calls',
            },
          ],
        }),
      ),
    );
    expect(whole.response()).toEqual({
      content: '',
      reasoningContent: '',
      finishReason: 'tool_calls',
      toolCalls: [{ name: 'f', arguments: '{"a":1}' }],
    });

    const streamed = new ContentCapture([], 1);
    const chunk = (delta: object, finish: string | null = null) =>
      JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] });
    streamed.event(chunk({ role: 'assistant', content: 'Checking.' }));
    streamed.event(chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] }));
    streamed.event(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }));
    streamed.event(
      chunk({
        tool_calls: [
          { index: 0, function: { arguments: '1}' } },
          { index: 1, function: { name: 'g', arguments: '{}' } },
        ],
      }),
    );
    streamed.event(chunk({}, 'tool_calls'));
    expect(streamed.response()).toEqual({
      content: 'Checking.',
      reasoningContent: '',
      finishReason: 'tool_calls',
      toolCalls: [
        { name: 'f', arguments: '{"a":1}' },
        { name: 'g', arguments: '{}' },
      ],
    });
  });
});
