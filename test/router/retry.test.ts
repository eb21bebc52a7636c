/**
 * A request that nothing has been sent for yet is retried on another ready
 * replica when the one it was routed to is gone (connection refused, or a
 * kept-alive connection reset): a dead replica costs its clients nothing
 * before the controller notices it.
 */
import OpenAI from 'openai';
import { beforeAll, expect, test } from 'vitest';
import { liveReplicaRows, startTestApp, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';

let t: TestApp;
let alice: SeededUser;
let endpoint: string;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  const project = await alice.project('retry');
  endpoint = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 2, maxReplica: 2 },
    advanced: { max_batch_size: 4, max_token_count: 1024 },
  });
  await waitForStatus(t.sql, endpoint, 'RUNNING');
  await waitFor('two ready replicas', async () => (await liveReplicaRows(t.sql, endpoint)).filter((r) => r.state === 'READY').length === 2);
});

test('with one of two replicas SIGKILLed, every request (streamed or not) is answered by the other', async () => {
  const openai = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
  const ask = () => openai.chat.completions.create({ model: endpoint, max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }] });
  // Both replicas known to the router, with kept-alive connections to each.
  await Promise.all(Array.from({ length: 8 }, ask));
  const logged = async () => t.sql`SELECT replica_id, http_status FROM request_log WHERE endpoint_id = ${endpoint} ORDER BY id`;
  await waitFor('the first requests logged', async () => (await logged()).length === 8);
  const [victim, survivor] = (await liveReplicaRows(t.sql, endpoint)).filter((r) => r.state === 'READY');
  process.kill(victim!.pid, 'SIGKILL');
  // At once, before the controller has seen the death: nothing fails.
  const answers = await Promise.all(Array.from({ length: 12 }, ask));
  expect(answers.every((a) => a.choices.length === 1)).toBe(true);
  const stream = await openai.chat.completions.create({
    model: endpoint,
    stream: true,
    max_tokens: 4,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  let chunks = 0;
  for await (const chunk of stream) chunks += chunk.choices.length;
  expect(chunks).toBeGreaterThan(0);
  // They were all served by the survivor: the request log names it for each.
  const served = await waitFor('the log', async () => {
    const rows = await logged();
    return rows.length === 8 + 13 ? rows.slice(8) : undefined;
  });
  expect(served.every((r) => r.replica_id === survivor!.id && r.http_status === 200)).toBe(true);
});
