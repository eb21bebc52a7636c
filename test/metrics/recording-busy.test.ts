/**
 * The recorder and a database that answers but gives up on its writes (a statement_timeout on every insert, as a
 * role's setting can make it): that is no outage to wait out. The batch is reported lost, once, and the recorder
 * goes on with what comes next; it does not hold the batch and try it again for ever, growing (an unreachable
 * database's writes are held: test/router/request-recorder-outage.test.ts).
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { RequestRecorder, type RecordedRequest } from '../../src/router/request-recorder.js';
import { createServices } from '../../src/services/index.js';
import { createEndpointThrough, seedPrincipal } from '../support/gateway.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let endpointId: string;
let teamId: string;
let userId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  const services = createServices(db.sql);
  const { principal, projectId } = await seedPrincipal(db.sql, services, 'busy-recorder');
  endpointId = await createEndpointThrough(services, principal, projectId);
  teamId = principal.actingTeamId!;
  userId = principal.user.id;
  // Every insert into the request log is cancelled by the server, as a statement_timeout cancels it.
  await db.sql.unsafe(`
    CREATE FUNCTION busy_insert() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled'; END $$;
    CREATE TRIGGER busy_insert BEFORE INSERT ON request_log FOR EACH STATEMENT EXECUTE FUNCTION busy_insert();
  `);
});

afterAll(async () => {
  await db?.close();
});

test('writes the database gives up on are reported lost, not held for ever', async () => {
  const logged: string[] = [];
  const recorder = new RequestRecorder(db.sql, 3_600_000, (message) => logged.push(message));
  const outcome: RecordedRequest = {
    endpointId,
    replicaId: null,
    teamId,
    userId,
    stream: false,
    httpStatus: 200,
    promptTokens: 1,
    completionTokens: 1,
    ttftMs: 5,
    durationMs: 10,
    queuedMs: 0,
    finishReason: 'stop',
    cancelled: false,
    startedAt: new Date(),
  };
  const failures = () => logged.filter((m) => m.startsWith('recording requests failed'));
  try {
    recorder.record(outcome);
    await recorder.flush();
    expect(failures()).toEqual(['recording requests failed (1 of 1)']);
    // Nothing was held back: the next flush writes only what came since, and reports only that.
    recorder.record(outcome);
    await recorder.flush();
    expect(failures()).toEqual(['recording requests failed (1 of 1)', 'recording requests failed (1 of 1)']);
  } finally {
    await recorder.close();
  }
});
