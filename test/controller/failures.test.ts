/** Every failure code that can be provoked here ends the start in FAILED with that code, after the right phases. */
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, statusTrail, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import type { SeededProject } from '../support/gateway.js';

let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  project = await alice.project('failures');
});

afterEach(() => t.hub.setFault(null, { repo: 'test-org/fault-GGUF' }));

async function failedTrail(overrides: Record<string, unknown>) {
  const id = await project.endpoint(overrides);
  const status = await waitForStatus(t.sql, id, 'FAILED');
  const res = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
  expect(res.body).toMatchObject({ status: 'FAILED', phase: null, errorCode: status.errorCode });
  // A failed endpoint holds no replica and no capacity.
  const live = await t.sql`SELECT id FROM replicas WHERE endpoint_id = ${id} AND state IN ('STARTING', 'READY', 'DRAINING')`;
  expect(live).toHaveLength(0);
  return { id, trail: await statusTrail(t.sql, id) };
}

const UNTIL_DOWNLOAD = ['INITIALIZING REQUESTING_VIRTUAL_MACHINE', 'INITIALIZING DOWNLOADING_MODEL'];

describe('model source failures', () => {
  test('the hub answers 401 to our token: WORKLOAD_INIT_INVALID_TOKEN_ERROR', async () => {
    t.hub.setFault({ type: 'invalid-token' }, { repo: 'test-org/fault-GGUF' });
    const { trail } = await failedTrail({ hfModelRepo: 'test-org/fault-GGUF' });
    expect(trail).toEqual([...UNTIL_DOWNLOAD, 'FAILED WORKLOAD_INIT_INVALID_TOKEN_ERROR']);
  });

  test('a private or missing repository: WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR', async () => {
    expect((await failedTrail({ hfModelRepo: 'test-org/private-GGUF' })).trail).toEqual([
      ...UNTIL_DOWNLOAD,
      'FAILED WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR',
    ]);
    expect((await failedTrail({ hfModelRepo: 'test-org/does-not-exist' })).trail.at(-1)).toBe(
      'FAILED WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR',
    );
  });

  test('the hub API fails with 500: WORKLOAD_INIT_HF_WANDB_API_ERROR', async () => {
    t.hub.setFault({ type: 'server-error' }, { repo: 'test-org/fault-GGUF' });
    expect((await failedTrail({ hfModelRepo: 'test-org/fault-GGUF' })).trail.at(-1)).toBe('FAILED WORKLOAD_INIT_HF_WANDB_API_ERROR');
  });

  test('a download with the wrong checksum: WORKLOAD_INIT_DOWNLOAD_ERROR', async () => {
    t.hub.setFault({ type: 'corrupt' }, { repo: 'test-org/fault-GGUF' });
    expect((await failedTrail({ hfModelRepo: 'test-org/fault-GGUF' })).trail.at(-1)).toBe('FAILED WORKLOAD_INIT_DOWNLOAD_ERROR');
  });

  test('no loadable model files: WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR', async () => {
    expect((await failedTrail({ hfModelRepo: 'test-org/no-weights' })).trail.at(-1)).toBe('FAILED WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
  });

  test('only safetensors, which the built-in engine cannot run: WORKLOAD_INIT_MANIFEST_TYPE_ERROR, with the reason', async () => {
    const { id, trail } = await failedTrail({ hfModelRepo: 'test-org/safetensors-only' });
    expect(trail.at(-1)).toBe('FAILED WORKLOAD_INIT_MANIFEST_TYPE_ERROR');
    const [event] = await t.sql`SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} ORDER BY id DESC LIMIT 1`;
    expect(event!.detail.message).toMatch(/safetensors/);
  });
});

describe('settings and engine failures', () => {
  test('max_input_length beyond the model context: WORKLOAD_INIT_SETTINGS_ERROR before the engine starts', async () => {
    const { id, trail } = await failedTrail({
      hfModelRepo: 'test-org/short-context-GGUF',
      advanced: { max_input_length: 512, max_token_count: 1024 },
    });
    expect(trail).toEqual([...UNTIL_DOWNLOAD, 'FAILED WORKLOAD_INIT_SETTINGS_ERROR']);
    const [event] = await t.sql`SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} ORDER BY id DESC LIMIT 1`;
    expect(event!.detail.message).toBe("max_input_length (512) is larger than the model's context (256 tokens)");
  });

  test('an engine that cannot load the weights: the engine code, after ENGINE_INITIALIZING', async () => {
    const { trail } = await failedTrail({ hfModelRepo: 'test-org/truncated-GGUF', advanced: { max_token_count: 1024 } });
    expect(trail).toEqual([...UNTIL_DOWNLOAD, 'INITIALIZING ENGINE_INITIALIZING', 'FAILED INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR']);
  });

  test('restart of a FAILED endpoint after the cause is fixed reaches RUNNING', async () => {
    t.hub.setFault({ type: 'server-error' }, { repo: 'test-org/fault-GGUF' });
    const { id } = await failedTrail({ hfModelRepo: 'test-org/fault-GGUF', advanced: { max_token_count: 1024 } });
    t.hub.setFault(null, { repo: 'test-org/fault-GGUF' });
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/restart`);
    await waitForStatus(t.sql, id, 'RUNNING');
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`)).body.errorCode).toBeNull();
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });
});

describe('a small model cache', () => {
  test('a model larger than MODEL_CACHE_MAX_BYTES: WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR, with nothing downloaded', async () => {
    const small = await startTestApp({ env: { MODEL_CACHE_MAX_BYTES: '64K' }, hub: t.hub });
    const bob = await small.seed.user();
    const p = await bob.project('small cache');
    const cdnBefore = t.hub.requests.filter((r) => r.route === 'cdn' && r.method === 'GET').length;
    const id = await p.endpoint({ hfModelRepo: 'test-org/tiny-thinking-GGUF' });
    await waitForStatus(small.sql, id, 'FAILED');
    expect(await statusTrail(small.sql, id)).toEqual([...UNTIL_DOWNLOAD, 'FAILED WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR']);
    expect(t.hub.requests.filter((r) => r.route === 'cdn' && r.method === 'GET').length).toBe(cdnBefore);
  });
});
