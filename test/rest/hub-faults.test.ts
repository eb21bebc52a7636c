/**
 * The hub's failures as an endpoint's start meets them, through the whole gateway and the stand-in hub: transient
 * ones (503, a reset connection, a 429 with Retry-After) are retried, each retry an event of the endpoint, and the
 * endpoint serves; permanent ones fail it at once with the documented code, mapped as huggingface_hub maps them.
 */
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { FIRST_START_TRAIL, startTestApp, statusTrail, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import type { SeededProject } from '../support/gateway.js';

const FAULT_REPO = 'test-org/fault-GGUF';
const ADVANCED = { max_batch_size: 2, max_token_count: 1024, max_input_length: 512 };

let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  project = await alice.project('hub faults');
});

afterEach(() => t.hub.setFault(null));

interface RetryEvent {
  type: string;
  status: string | null;
  phase: string | null;
  cause: string;
  detail: { attempt: number; maxAttempts: number; delayMs: number; retryAfterMs?: number; message: string; operation: string };
}

const retryEvents = (id: string) =>
  t.sql<RetryEvent[]>`
    SELECT type, status, phase, cause, detail FROM endpoint_events WHERE endpoint_id = ${id} AND type = 'RETRYING' ORDER BY id`;

async function failsWith(overrides: Record<string, unknown>, code: string) {
  const id = await project.endpoint({ advanced: ADVANCED, ...overrides });
  const failed = await waitForStatus(t.sql, id, 'FAILED');
  expect(failed.errorCode, JSON.stringify(overrides)).toBe(code);
  expect(await retryEvents(id)).toEqual([]); // permanent: never retried
  const res = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
  expect(res.body).toMatchObject({ status: 'FAILED', errorCode: code });
}

describe('transient hub failures are retried, and the endpoint serves', () => {
  test('503s on the API and a reset download connection: RUNNING, each retry an event with its phase and attempt', async () => {
    t.hub.setFault({ type: 'server-error', status: 503 }, { repo: FAULT_REPO, times: 2 });
    t.hub.setFault({ type: 'reset' }, { on: ['cdn'], times: 1 });
    const id = await project.endpoint({ hfModelRepo: FAULT_REPO, advanced: ADVANCED });
    await waitForStatus(t.sql, id, 'RUNNING');
    expect(t.hub.requests.filter((r) => r.status === 503)).toHaveLength(2);
    expect(t.hub.requests.filter((r) => r.status === 0)).toHaveLength(1);

    const events = await retryEvents(id);
    expect(events.map((e) => [e.type, e.phase, e.cause, e.detail.attempt, e.detail.maxAttempts])).toEqual([
      ['RETRYING', 'DOWNLOADING_MODEL', 'controller:retry', 2, 6],
      ['RETRYING', 'DOWNLOADING_MODEL', 'controller:retry', 3, 6],
      ['RETRYING', 'DOWNLOADING_MODEL', 'controller:retry', 2, 6],
    ]);
    expect(events[0]!.detail.message).toMatch(/answered 503 .*Attempt 2 of 6/);
    expect(events[2]!.detail.operation).toBe(`downloading fault-Q8_0.gguf from ${FAULT_REPO}`);
    // Retries are not status changes: the trail is the plain start.
    expect(await statusTrail(t.sql, id)).toEqual(FIRST_START_TRAIL);
  });

  test("a 429 with Retry-After: the next attempt waits the hub's time, and the endpoint serves", async () => {
    t.hub.setFault({ type: 'rate-limit', retryAfter: 1 }, { repo: FAULT_REPO, times: 1 });
    const before = t.hub.requests.length;
    const id = await project.endpoint({ hfModelRepo: FAULT_REPO, advanced: ADVANCED });
    await waitForStatus(t.sql, id, 'RUNNING');
    const [limited, next] = t.hub.requests.slice(before).filter((r) => r.route === 'api');
    expect(limited!.status).toBe(429);
    expect(next!.at - limited!.at).toBeGreaterThanOrEqual(1000);
    const events = await retryEvents(id);
    expect(events).toHaveLength(1);
    expect(events[0]!.detail).toMatchObject({ attempt: 2, delayMs: 1000, retryAfterMs: 1000 });
    expect(events[0]!.detail.message).toMatch(/429/);
  });
});

describe('permanent hub failures fail the start at once, with the documented code', () => {
  test('RepoNotFound on a 401 (a token was sent): WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR, not INVALID_TOKEN', async () => {
    t.hub.setFault({ type: 'repo-not-found', status: 401 }, { repo: FAULT_REPO });
    await failsWith({ hfModelRepo: FAULT_REPO }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
  });

  test('a bad token (401, Invalid credentials in Authorization header): WORKLOAD_INIT_INVALID_TOKEN_ERROR', async () => {
    t.hub.setFault({ type: 'invalid-token' }, { repo: FAULT_REPO });
    await failsWith({ hfModelRepo: FAULT_REPO }, 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
  });

  test('a gated repo: WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR', async () => {
    t.hub.setFault({ type: 'gated' }, { repo: FAULT_REPO });
    await failsWith({ hfModelRepo: FAULT_REPO }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
  });

  test('a missing revision: WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR', async () => {
    await failsWith({ hfModelRepo: FAULT_REPO, hfModelRepoRevision: 'no-such-branch' }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
  });

  test('a missing file: WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR', async () => {
    t.hub.setFault({ type: 'entry-not-found' }, { repo: FAULT_REPO });
    await failsWith({ hfModelRepo: FAULT_REPO }, 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
  });

  test('a disabled repo: WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR', async () => {
    t.hub.setFault({ type: 'disabled' }, { repo: FAULT_REPO });
    await failsWith({ hfModelRepo: FAULT_REPO }, 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
  });
});
