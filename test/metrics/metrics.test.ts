/**
 * Metrics and request activity with real traffic through the tiny model: the
 * roll-ups (GraphQL series), the Prometheus text and the live subscription are
 * checked against the requests sent (counts, token sums, latencies within
 * what the client measured), and activity pages through every request.
 * Content logs: content-logs.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { createClient as createWsClient } from 'graphql-ws';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import WebSocket from 'ws';
import { beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { ask, chat, graphql, type Answer } from './traffic.js';

const SCRAPE_TOKEN = `scrape-${randomUUID()}`;
const PROMPT = 'metrics';

let t: TestApp;
let alice: SeededUser;
let bob: SeededUser;
let admin: SeededUser;
let plain: string;

/** What was sent to `plain`, as the client saw it. */
const sent = { requests: 0, promptTokens: 0, completionTokens: 0, durationsMs: [] as number[], refused: 0 };

beforeAll(async () => {
  t = await startTestApp({ env: { METRICS_TOKEN: SCRAPE_TOKEN, METRICS_SAMPLE_INTERVAL_MS: '300' } });
  alice = await t.seed.user();
  bob = await t.seed.user();
  admin = await t.seed.user({ admin: true });
  const project = await alice.project('metrics');
  plain = await project.endpoint({
    name: 'plain',
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_batch_size: 4 },
  });
  await waitForStatus(t.sql, plain, 'RUNNING');
}, 120_000);

async function sendPlain(count: number): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < count; i++) {
    const answer = await ask(t, alice.key, plain, PROMPT, i % 2 === 0, i);
    expect(answer.status).toBe(200);
    sent.requests++;
    sent.promptTokens += answer.promptTokens;
    sent.completionTokens += answer.completionTokens;
    sent.durationsMs.push(answer.ms);
    answers.push(answer);
  }
  return answers;
}

const METRICS_QUERY = `query($id: ID!, $from: DateTime!, $step: Int) { endpoint(id: $id) { metrics(from: $from, step: $step) {
  stepSeconds timestamps requests errors4xx errors5xx errorsCut promptTokens completionTokens completionTokensPerSecond
  durationAvgMs ttftAvgMs ttftP50Ms ttftP95Ms ttftP99Ms tpotP50Ms tpotP99Ms queueWaitAvgMs replicasCurrent replicasDesired replicasUpdated } } }`;

type Series = Record<string, (number | null)[]> & { timestamps: string[]; stepSeconds: number };

async function series(id: string, fromMsAgo: number, step?: number): Promise<Series> {
  const result = await graphql(alice, METRICS_QUERY, { id, from: new Date(Date.now() - fromMsAgo).toISOString(), step });
  expect(result.errors).toBeUndefined();
  return result.data.endpoint.metrics as Series;
}

const total = (values: (number | null)[]) => values.reduce<number>((sum, v) => sum + (v ?? 0), 0);
const largest = (values: (number | null)[]) => Math.max(...values.map((v) => v ?? -Infinity));

describe('metrics', () => {
  test('the series count the requests sent, their tokens, and latencies within what the client measured', async () => {
    await sendPlain(6);
    // Refused by the endpoint's spec (max_token_count 4096) before any replica: an error in the metrics, not in the activity.
    const refused = await chat(t, alice.key, { model: plain, messages: [{ role: 'user', content: PROMPT }], max_tokens: 5000 });
    expect(refused.status).toBe(400);
    sent.refused++;
    const s = await waitFor('the roll-ups', async () => {
      const read = await series(plain, 10 * 60_000, 60);
      return total(read.requests!) === sent.requests + sent.refused ? read : undefined;
    });
    expect(s.stepSeconds).toBe(60);
    // Ten minutes from a time inside a minute: the first step starts at that minute.
    expect(s.timestamps.length).toBeGreaterThanOrEqual(10);
    expect(s.timestamps.length).toBeLessThanOrEqual(11);
    expect(Date.parse(s.timestamps[1]!) - Date.parse(s.timestamps[0]!)).toBe(60_000);
    for (const name of ['requests', 'ttftP50Ms', 'replicasCurrent']) expect(s[name]).toHaveLength(s.timestamps.length);
    expect(total(s.promptTokens!)).toBe(sent.promptTokens);
    expect(total(s.completionTokens!)).toBe(sent.completionTokens);
    expect(total(s.errors4xx!)).toBe(sent.refused);
    expect(total(s.errors5xx!) + total(s.errorsCut!)).toBe(0);
    const clientMax = Math.max(...sent.durationsMs);
    const clientMean = sent.durationsMs.reduce((a, b) => a + b, 0) / sent.durationsMs.length;
    // The gateway measures inside the client's time: never longer.
    expect(largest(s.ttftP99Ms!)).toBeLessThanOrEqual(clientMax);
    expect(largest(s.ttftP50Ms!)).toBeGreaterThan(0);
    const minutes = s.requests!.map((n, i) => [n ?? 0, s.durationAvgMs![i] ?? 0] as const);
    const served = s.requests!.map((n, i) => (n ?? 0) - (s.errors4xx![i] ?? 0));
    const serverMean = minutes.reduce((sum, [, avg], i) => sum + served[i]! * avg, 0) / sent.requests;
    expect(serverMean).toBeLessThanOrEqual(clientMean);
    expect(serverMean).toBeGreaterThan(0);
    expect(largest(s.tpotP50Ms!)).toBeGreaterThan(0);
    expect(largest(s.queueWaitAvgMs!)).toBeGreaterThanOrEqual(0);
    expect(largest(s.completionTokensPerSecond!)).toBeGreaterThan(0);
    // Replica counts are sampled every 300 ms here.
    const withReplicas = await waitFor('a replica sample', async () => {
      const read = await series(plain, 10 * 60_000, 60);
      return largest(read.replicasCurrent!) >= 1 ? read : undefined;
    });
    expect(largest(withReplicas.replicasDesired!)).toBe(1);
    expect(largest(withReplicas.replicasUpdated!)).toBe(1);

    // One step over the whole range sums the same.
    const hours = await series(plain, 2 * 3600_000, 7200);
    expect(hours.timestamps.length).toBeLessThanOrEqual(2);
    expect(total(hours.requests!)).toBe(sent.requests + sent.refused);
    expect(total(hours.completionTokens!)).toBe(sent.completionTokens);
    expect(largest(hours.ttftP99Ms!)).toBeLessThanOrEqual(clientMax);
  });

  test('a step that is not whole minutes, or too many points, is refused; another team sees no endpoint', async () => {
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const odd = await graphql(alice, METRICS_QUERY, { id: plain, from, step: 90 });
    expect(odd.errors?.[0]?.message).toMatch(/step/);
    const many = await graphql(alice, METRICS_QUERY, { id: plain, from: new Date(Date.now() - 30 * 86_400_000).toISOString(), step: 60 });
    expect(many.errors?.[0]?.message).toMatch(/points/);
    const other = await graphql(bob, METRICS_QUERY, { id: plain, from });
    expect(other.data.endpoint).toBeNull();
  });
});

describe('request activity', () => {
  const PAGE = `query($id: ID!, $first: Int, $after: String, $filter: RequestActivityFilter) { endpoint(id: $id) { requests(first: $first, after: $after, filter: $filter) {
    edges { cursor node { id startedAt status latencyMs ttftMs queuedMs promptTokens completionTokens stream cancelled errorCode finishReason user { id } content { messages } } }
    pageInfo { hasNextPage endCursor } } } }`;

  test('pages through every request, newest first, with its status, latency, tokens and user', async () => {
    await sendPlain(3);
    await waitFor('the request log', async () => {
      const [row] = await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM request_log WHERE endpoint_id = ${plain}`;
      return row!.n === sent.requests;
    });
    const seen: any[] = [];
    let after: string | null = null;
    let pages = 0;
    for (;;) {
      const result: any = await graphql(alice, PAGE, { id: plain, first: 4, after });
      expect(result.errors).toBeUndefined();
      const connection = result.data.endpoint.requests;
      seen.push(...connection.edges.map((e: any) => e.node));
      pages++;
      if (!connection.pageInfo.hasNextPage) break;
      after = connection.pageInfo.endCursor;
    }
    expect(pages).toBe(Math.ceil(sent.requests / 4));
    expect(seen).toHaveLength(sent.requests);
    expect(new Set(seen.map((n) => n.id)).size).toBe(sent.requests);
    const times = seen.map((n) => Date.parse(n.startedAt));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(seen.every((n) => n.status === 200 && n.user.id === alice.user.id && n.errorCode === null && n.content === null)).toBe(true);
    expect(seen.reduce((sum, n) => sum + n.promptTokens, 0)).toBe(sent.promptTokens);
    expect(seen.reduce((sum, n) => sum + n.completionTokens, 0)).toBe(sent.completionTokens);
    const clientMax = Math.max(...sent.durationsMs);
    for (const n of seen) {
      expect(n.latencyMs).toBeGreaterThan(0);
      expect(n.latencyMs).toBeLessThanOrEqual(clientMax);
      expect(n.ttftMs).toBeLessThanOrEqual(n.latencyMs);
    }
    expect(seen.filter((n) => n.stream).length).toBeGreaterThan(0);

    const failed = await graphql(alice, PAGE, { id: plain, filter: { errorsOnly: true } });
    expect(failed.data.endpoint.requests.edges).toEqual([]);
    const byStatus = await graphql(alice, PAGE, { id: plain, first: 100, filter: { statuses: [200], userId: alice.user.id } });
    expect(byStatus.data.endpoint.requests.edges).toHaveLength(sent.requests);
    const bad = await graphql(alice, PAGE, { id: plain, after: 'not-a-cursor' });
    expect(bad.errors?.[0]?.message).toMatch(/after/);
    expect((await graphql(bob, PAGE, { id: plain })).data.endpoint).toBeNull();
  });
});

describe('Prometheus text at /metrics', () => {
  test('needs an admin key or the scrape token; counts what was sent, per endpoint, with no user or request labels', async () => {
    const scrape = (authorization?: string) => fetch(`${t.url}/metrics`, { headers: authorization ? { authorization } : {} });
    expect((await scrape()).status).toBe(401);
    expect((await scrape('Bearer not-a-key-at-all-000000')).status).toBe(401);
    expect((await scrape(`Bearer ${alice.key}`)).status).toBe(403);
    expect((await scrape(`Bearer ${admin.key}`)).status).toBe(200);
    // Everything sent so far has been counted once the roll-ups show it (the same batch feeds both).
    await waitFor('the roll-ups', async () => total((await series(plain, 30 * 60_000, 60)).requests!) === sent.requests + sent.refused);
    const response = await scrape(`Bearer ${SCRAPE_TOKEN}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    const families = parsePrometheusTextFormat(text);
    // The parser keeps a histogram's labels only when it has none: read as untyped, each of its
    // `_bucket`, `_sum` and `_count` series is a family of its own, labels kept.
    const samples = parsePrometheusTextFormat(text.replace(/^# TYPE (\S+) histogram$/gm, '# TYPE $1 untyped'));
    const family = (name: string) => families.find((f) => f.name === name) ?? samples.find((f) => f.name === name);
    const forPlain = (name: string) => (family(name)?.metrics ?? []).filter((m) => m.labels?.endpoint_id === plain);
    const sum = (name: string) => forPlain(name).reduce((n, m) => n + Number(m.value), 0);
    expect(family('dedicated_requests_total')?.type).toBe('COUNTER');
    const byOutcome = Object.fromEntries(forPlain('dedicated_requests_total').map((m) => [m.labels!.outcome, Number(m.value)]));
    expect(byOutcome).toEqual({ ok: sent.requests, '4xx': sent.refused });
    expect(sum('dedicated_prompt_tokens_total')).toBe(sent.promptTokens);
    expect(sum('dedicated_completion_tokens_total')).toBe(sent.completionTokens);
    for (const name of ['dedicated_request_duration_seconds', 'dedicated_time_to_first_token_seconds', 'dedicated_queue_wait_seconds']) {
      expect(families.find((f) => f.name === name)?.type).toBe('HISTOGRAM');
      expect(sum(`${name}_count`)).toBe(sent.requests);
      // The +Inf bucket counts every request too.
      expect(forPlain(`${name}_bucket`).find((m) => m.labels!.le === '+Inf')?.value).toBe(String(sent.requests));
    }
    const clientTotalS = sent.durationsMs.reduce((a, b) => a + b, 0) / 1000;
    expect(sum('dedicated_request_duration_seconds_sum')).toBeGreaterThan(0);
    expect(sum('dedicated_request_duration_seconds_sum')).toBeLessThanOrEqual(clientTotalS);
    expect(sum('dedicated_time_to_first_token_seconds_sum')).toBeLessThanOrEqual(clientTotalS);
    await waitFor('the replica gauge', async () => {
      const text = await (await scrape(`Bearer ${SCRAPE_TOKEN}`)).text();
      return text.includes(`dedicated_endpoint_replicas{endpoint_id="${plain}",kind="current"} 1`);
    });
    expect(family('dedicated_request_records_dropped_total')?.metrics[0]?.value).toBe('0');
    // The runtime pool's GPUs (here CPU-backed slots) of every kind: what it offers, and what live replicas request.
    const gpus = family('dedicated_runtime_gpus')!;
    expect(gpus.type).toBe('GAUGE');
    const gpuSeries = Object.fromEntries(gpus.metrics.map((m) => [`${m.labels!.gpu_type} ${m.labels!.state}`, Number(m.value)]));
    const offered = t.app.runtime.capacity();
    const requested = await t.sql<{ gpu_type: string; n: number }[]>`
      SELECT gpu_type, sum(num_gpu)::int AS n FROM replicas WHERE state IN ('STARTING', 'READY', 'DRAINING') GROUP BY 1`;
    expect(Object.keys(gpuSeries).sort()).toEqual(
      ['A100', 'B200', 'H100', 'H200'].flatMap((kind) => [`${kind} offered`, `${kind} requested`]).sort(),
    );
    for (const kind of ['A100', 'B200', 'H100', 'H200'] as const) expect(gpuSeries[`${kind} offered`]).toBe(offered[kind] ?? 0);
    expect(gpuSeries['H100 offered']).toBeGreaterThan(0);
    for (const { gpu_type, n } of requested) expect(gpuSeries[`${gpu_type} requested`], gpu_type).toBe(n);
    expect(requested.length).toBeGreaterThan(0);
    // Labels are the endpoint and a bounded class (or the GPU kind), never a user, a key or a request.
    const labels = new Set(samples.flatMap((f) => f.metrics.flatMap((m) => Object.keys(m.labels ?? {}))));
    expect([...labels].sort()).toEqual(['endpoint_id', 'gpu_type', 'kind', 'le', 'outcome', 'state']);
    for (const f of families) if (f.type === 'COUNTER') expect(f.name).toMatch(/_total$/);
  });
});

describe('Prometheus series of a deleted endpoint', () => {
  test('are dropped once it is deleted: create, request, delete cannot grow /metrics without bound', async () => {
    const project = await alice.project('short-lived');
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 0, maxReplica: 1 } });
    // Refused before any replica runs, and counted.
    const refused = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: id, messages: [{ role: 'user', content: 'x' }], max_tokens: 1_000_000 }),
    });
    expect(refused.status).toBe(400);
    const scrape = async () => (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${SCRAPE_TOKEN}` } })).text();
    await waitFor('the series', async () => (await scrape()).includes(`endpoint_id="${id}"`));
    expect((await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`)).status).toBe(200);
    await waitFor('the series to be dropped', async () => !(await scrape()).includes(`endpoint_id="${id}"`), 10_000);
    // The others stay.
    expect(await scrape()).toContain(`endpoint_id="${plain}"`);
  });
});

describe('the endpointMetrics subscription', () => {
  test("pushes the current minute's figures as requests end; another team's key gets NOT_FOUND", async () => {
    const client = createWsClient({
      url: `${t.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${alice.key}` },
    });
    const figures: { minute: string; requests: number; completionTokens: number }[] = [];
    const unsubscribe = client.subscribe<{ endpointMetrics: (typeof figures)[number] }>(
      {
        query: 'subscription($id: ID!) { endpointMetrics(id: $id) { minute requests completionTokens ttftP50Ms replicasCurrent } }',
        variables: { id: plain },
      },
      { next: ({ data }) => data && figures.push(data.endpointMetrics), error: () => {}, complete: () => {} },
    );
    try {
      await waitFor('the first figures', async () => figures.length > 0);
      const before = figures[figures.length - 1]!;
      const [answer] = await sendPlain(1);
      const after = await waitFor('figures with the new request', async () => {
        const last = figures[figures.length - 1]!;
        // Within the same minute the counts grow by the request; across a minute boundary the new minute holds it.
        const grown = last.minute === before.minute ? last.requests === before.requests + 1 : last.requests >= 1;
        return grown ? last : undefined;
      });
      expect(after.completionTokens).toBeGreaterThanOrEqual(answer!.completionTokens);
    } finally {
      unsubscribe();
      await client.dispose();
    }

    const bobClient = createWsClient({
      url: `${t.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${bob.key}` },
    });
    const error = await new Promise<unknown>((resolve) => {
      bobClient.subscribe(
        { query: 'subscription($id: ID!) { endpointMetrics(id: $id) { requests } }', variables: { id: plain } },
        { next: () => resolve(undefined), error: resolve, complete: () => resolve(undefined) },
      );
    });
    await bobClient.dispose();
    expect(JSON.stringify(error)).toContain('NOT_FOUND');
  });
});
