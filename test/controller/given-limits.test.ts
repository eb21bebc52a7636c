/**
 * Where the gateway does not read the model (an engine run through ENGINE_COMMAND; a model fetched where the replica
 * runs, as on Kubernetes), a max_token_count left to follow the model stays its placeholder (4096). The API accepts a
 * larger max_input_length then (the built-in engine's first start reads the model's context and checks it), so the
 * start checks it against the version's own limits: WORKLOAD_INIT_SETTINGS_ERROR, saying what to change, before
 * anything is downloaded or an engine started.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import { TINY_REPO, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { startScriptedApp } from '../support/scripted-engine.js';

let t: TestApp;
let alice: SeededUser;
let dir: string;
const started = () => existsSync(path.join(dir, 'started'));

beforeAll(async () => {
  // An engine that records that it was started, then exits: this test's starts must not get that far.
  const script = `import { writeFileSync } from 'node:fs'; writeFileSync(process.argv[3] + '/started', ''); process.exit(3);`;
  ({ t, dir } = await startScriptedApp('given-limits', script));
  alice = await t.seed.user();
}, 120_000);

// The app, its database, its hub and the engine's directory are removed by the file's clean-ups (startScriptedApp).

test('max_input_length above the placeholder, max_token_count left to the model: the start fails with what to change', async () => {
  const project = await alice.project('given-limits');
  const id = await project.endpoint({
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_input_length: 8000 },
  });
  const failed = await waitForStatus(t.sql, id, 'FAILED', 60_000);
  expect(failed.errorCode).toBe('WORKLOAD_INIT_SETTINGS_ERROR');
  const [event] = await t.sql<{ detail: { message: string; advice?: string } }[]>`
    SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} AND status = 'FAILED' ORDER BY id DESC LIMIT 1`;
  expect(event!.detail.message).toMatch(/max_input_length \(8000\) is larger than max_token_count \(4096: .*\)/);
  // The status's message says what to change.
  const status = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
  expect(status.body.errorMessage ?? status.body.error_message).toMatch(
    /lower max_input_length to at most 4096, or give max_token_count, with an update, then restart the endpoint\.$/,
  );
  expect(started()).toBe(false);
}, 90_000);
