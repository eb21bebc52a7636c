/**
 * A model download its endpoint no longer wants is cut: a terminate during a long download reaches TERMINATED at
 * once, instead of when the download (and the engine's start) would have ended. Its own app, so that no earlier test
 * has cached the model already.
 */
import { beforeAll, expect, test } from 'vitest';
import { startTestApp, statusOf, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import type { SeededProject } from '../support/gateway.js';

const REPO = 'test-org/fault-GGUF';
let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  project = await alice.project('downloads');
});

test('terminating an endpoint while its model downloads cuts the download: TERMINATED at once, not when it ends', async () => {
  // About 2.5 KB/s: the tiny model would take minutes.
  t.hub.setFault({ type: 'slow', chunkBytes: 256, delayMs: 100 }, { repo: REPO });
  const id = await project.endpoint({ hfModelRepo: REPO, advanced: { max_token_count: 1024 } });
  await waitFor('bytes to arrive', async () => {
    const status = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    return (status.body as { progress?: { bytesDone: number } | null }).progress?.bytesDone ? true : undefined;
  });
  expect((await statusOf(t.sql, id)).phase).toBe('DOWNLOADING_MODEL');
  const asked = Date.now();
  expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`)).status).toBe(200);
  await waitForStatus(t.sql, id, 'TERMINATED', 15_000);
  expect(Date.now() - asked).toBeLessThan(15_000);
  const [replica] = await t.sql`SELECT state, last_error FROM replicas WHERE endpoint_id = ${id}`;
  // Stopped by the terminate's pass (no pass waits for the download), or by the cut download's own step if it wrote first.
  expect(replica!.state).toBe('STOPPED');
  const lastError = replica!.last_error as string | null;
  expect(lastError === null || lastError.includes('no longer wants'), String(lastError)).toBe(true);
  // The download itself was cut (the runtime aborted it when the replica stopped), not left to run to its end.
  const transfer = t.hub.requests.find((r) => r.method === 'GET' && r.route === 'cdn' && r.path.includes('fault-GGUF'));
  expect(transfer).toBeDefined();
  await waitFor('the transfer to be cut', async () => (transfer!.closedAt !== undefined ? true : undefined), 10_000);
  expect(transfer!.complete).toBe(false);
  t.hub.setFault(null, { repo: REPO });
}, 60_000);
