/**
 * The request log's batch insert: every column round-trips, nulls included, and one statement serves every batch size.
 * The endpoints' last-request times move forward only, and a row they would not move is not written.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createServices } from '../../src/services/index.js';
import { FINISH_REASON_MAX, insertRequestLog, touchEndpoints, type RequestLogEntry } from '../../src/storage/request-log-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createBody, seedPrincipal } from '../support/gateway.js';

let db: TestDatabase;
const statements: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase({ onQuery: (query) => statements.push(query) });
});
afterAll(() => db.close());

function entry(i: number, overrides: Partial<RequestLogEntry> = {}): RequestLogEntry {
  return {
    endpointId: `ep_${i}`,
    replicaId: `rp_${i}`,
    teamId: 'tm_1',
    userId: 'us_1',
    stream: i % 2 === 0,
    httpStatus: 200,
    promptTokens: 10 + i,
    completionTokens: 20 + i,
    ttftMs: 1.5 + i,
    durationMs: 30.25 + i,
    queuedMs: 0.125,
    finishReason: 'stop',
    cancelled: false,
    startedAt: new Date(Date.UTC(2026, 10, 21, 12, 0, i, 250)),
    ...overrides,
  };
}

test('a batch is stored column for column, with nulls where an entry has none', async () => {
  const failed = entry(2, {
    replicaId: null,
    httpStatus: 503,
    promptTokens: null,
    completionTokens: null,
    ttftMs: null,
    finishReason: null,
    cancelled: true,
  });
  await insertRequestLog(db.sql, [entry(1), failed, entry(3, { finishReason: 'it\'s "quoted", {braced}' })]);
  const rows = await db.sql`
    SELECT endpoint_id, replica_id, team_id, user_id, stream, http_status, prompt_tokens, completion_tokens,
      ttft_ms, duration_ms, queued_ms, finish_reason, cancelled, started_at
    FROM request_log ORDER BY id`;
  expect(rows).toEqual([
    {
      endpoint_id: 'ep_1',
      replica_id: 'rp_1',
      team_id: 'tm_1',
      user_id: 'us_1',
      stream: false,
      http_status: 200,
      prompt_tokens: 11,
      completion_tokens: 21,
      ttft_ms: 2.5,
      duration_ms: 31.25,
      queued_ms: 0.125,
      finish_reason: 'stop',
      cancelled: false,
      started_at: new Date(Date.UTC(2026, 10, 21, 12, 0, 1, 250)),
    },
    {
      endpoint_id: 'ep_2',
      replica_id: null,
      team_id: 'tm_1',
      user_id: 'us_1',
      stream: true,
      http_status: 503,
      prompt_tokens: null,
      completion_tokens: null,
      ttft_ms: null,
      duration_ms: 32.25,
      queued_ms: 0.125,
      finish_reason: null,
      cancelled: true,
      started_at: new Date(Date.UTC(2026, 10, 21, 12, 0, 2, 250)),
    },
    {
      endpoint_id: 'ep_3',
      replica_id: 'rp_3',
      team_id: 'tm_1',
      user_id: 'us_1',
      stream: false,
      http_status: 200,
      prompt_tokens: 13,
      completion_tokens: 23,
      ttft_ms: 4.5,
      duration_ms: 33.25,
      queued_ms: 0.125,
      finish_reason: 'it\'s "quoted", {braced}',
      cancelled: false,
      started_at: new Date(Date.UTC(2026, 10, 21, 12, 0, 3, 250)),
    },
  ]);
});

test("an engine's finish reason is stored as a string of 64 characters at most; one that is not a string is none, and costs no row", async () => {
  const hostile = [
    entry(11, { endpointId: 'hostile_11', finishReason: 'x'.repeat(1 << 20) }),
    entry(12, { endpointId: 'hostile_12', finishReason: { no: 'string' } as never }),
    entry(13, { endpointId: 'hostile_13', finishReason: 7 as never }),
  ];
  expect(await insertRequestLog(db.sql, hostile)).toHaveLength(3);
  const rows = await db.sql<{ finish_reason: string | null }[]>`
    SELECT finish_reason FROM request_log WHERE endpoint_id LIKE 'hostile_%' ORDER BY id`;
  expect(rows.map((r) => r.finish_reason)).toEqual(['x'.repeat(FINISH_REASON_MAX), null, null]);
});

test('batches of different sizes send the same statement', async () => {
  statements.length = 0;
  for (const size of [1, 7, 130])
    await insertRequestLog(
      db.sql,
      Array.from({ length: size }, (_, i) => entry(i)),
    );
  expect(statements).toHaveLength(3);
  expect(new Set(statements).size).toBe(1);
  const [row] = await db.sql`SELECT count(*)::int AS n FROM request_log WHERE endpoint_id LIKE 'ep_%'`;
  expect(row!.n).toBe(3 + 1 + 7 + 130);
});

test('each activity filter has an index that yields its page in id order (no scan of the endpoint log)', async () => {
  // The plans with sequential scans ruled out: what matters is that a matching index exists for each filter's shape.
  const plan = async (where: string) => {
    const rows = await db.sql.begin(async (tx) => {
      await tx`SET LOCAL enable_seqscan = off`;
      return tx.unsafe(
        `EXPLAIN SELECT id FROM request_log r WHERE r.endpoint_id = 'ep_x' AND r.id < 9223372036854775807 ${where} ORDER BY r.id DESC LIMIT 51`,
      );
    });
    return (rows as unknown as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']).join('\n');
  };
  expect(await plan(`AND r.user_id = 'usr_x'`)).toContain('request_log_endpoint_user_idx');
  expect(await plan('AND (r.http_status >= 400 OR r.error_code IS NOT NULL)')).toContain('request_log_endpoint_errors_idx');
});

test('last-request times move forward only; a row they would not move is not written', async () => {
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'touch');
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await services.endpoints.create(principal, createBody(projectId, { hfModelRepo: 'test-org/none', name: `touch-${i}` }));
    if (created.type === 'error') throw new Error(created.error.message);
    ids.push(created.value.id);
  }
  const [a, b, c] = ids as [string, string, string];
  const t = (s: number) => new Date(Date.UTC(2026, 11, 5, 12, 0, s));
  await touchEndpoints(
    db.sql,
    new Map([
      [a, t(10)],
      [b, t(10)],
    ]),
  );
  const rows = async () =>
    new Map(
      (
        await db.sql<{ id: string; at: Date | null; xmin: string }[]>`
        SELECT id, last_request_at AS at, xmin::text FROM endpoints WHERE id = ANY(${ids})`
      ).map((r) => [r.id, r]),
    );
  const before = await rows();
  // a: back (kept, not written); b: forward; c: first time.
  await touchEndpoints(
    db.sql,
    new Map([
      [c, t(5)],
      [b, t(20)],
      [a, t(1)],
    ]),
  );
  const after = await rows();
  expect(after.get(a)).toEqual(before.get(a));
  expect(after.get(b)!.at).toEqual(t(20));
  expect(after.get(c)!.at).toEqual(t(5));
  // A gateway whose clock runs an hour fast: recorded as the database's now, not an hour ahead (it would keep the
  // endpoint awake that long).
  await touchEndpoints(db.sql, new Map([[c, new Date(Date.now() + 3_600_000)]]));
  const [{ ahead }] = (await db.sql<{ ahead: number }[]>`
    SELECT extract(epoch FROM last_request_at - now())::float AS ahead FROM endpoints WHERE id = ${c}`) as unknown as [{ ahead: number }];
  expect(ahead).toBeLessThanOrEqual(0);
});
