/**
 * Endpoints of one model resolved at the same time share one resolution (model-store.ts): the hub is asked once and
 * every caller gets its answer; a caller that leaves (its endpoint deleted) does not fail the others, and every caller
 * hears the shared resolution's retries; a resolution asked after one ended asks the hub again (a branch may have
 * moved). A real ModelStore against the stand-in hub (a real HTTP server speaking the hub's API).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { DEFAULT_ADVANCED, DEFAULT_AUTOSCALING, type EndpointSpec } from '../../src/domain/endpoint-spec.js';
import { ModelCache } from '../../src/models/model-cache.js';
import { ModelStore } from '../../src/models/model-store.js';
import type { RetryNotice } from '../../src/models/retry.js';
import { bytes } from '../support/bytes.js';
import { FAKE_HUB_TOKEN, startFakeHub, type FakeHub } from '../support/fake-hub.js';

const REPO = 'org/shared';
const MAIN_SHA = 'a'.repeat(40);
const DEV_SHA = 'b'.repeat(40);

let hub: FakeHub;
let dir: string;
let store: ModelStore;

beforeAll(async () => {
  hub = await startFakeHub({ repos: [{ id: REPO, files: { 'model.gguf': bytes(4000, 7) }, commits: { main: MAIN_SHA, dev: DEV_SHA } }] });
  dir = await mkdtemp(join(tmpdir(), 'shared-resolutions-'));
});

beforeEach(() => {
  // A store per test: nothing shared between tests but the hub.
  store = new ModelStore({
    cache: new ModelCache({ dir }),
    hubEndpoint: hub.url,
    hubToken: FAKE_HUB_TOKEN,
    allowExternalFormats: false,
    retry: { baseDelayMs: 5, maxDelayMs: 20 },
  });
  hub.setFault(null);
  hub.requests.length = 0;
});

afterAll(async () => {
  await hub?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const spec = (revision: string | null = null): EndpointSpec => ({
  name: 'e',
  instanceId: 'any',
  model: { source: 'hf', repo: REPO, revision },
  autoscaling: DEFAULT_AUTOSCALING,
  advanced: DEFAULT_ADVANCED,
});
/** The hub's model-info requests (which revision is which commit) and the file's HEADs. */
const modelInfos = () => hub.requests.filter((r) => r.route === 'api' && r.path.includes('/revision/')).length;
const heads = () => hub.requests.filter((r) => r.method === 'HEAD' && r.route === 'resolve').length;

test('endpoints of one model resolved at once ask the hub once, and each gets the answer', async () => {
  const answers = await Promise.all(Array.from({ length: 20 }, () => store.resolveVersion(spec(), null)));
  expect(modelInfos()).toBe(1);
  expect(heads()).toBe(1);
  for (const answer of answers)
    expect(answer.resolved).toMatchObject({ source: 'hf', repo: REPO, commitSha: MAIN_SHA, file: 'model.gguf' });

  // Another revision is another question; a resolution asked after the first ended asks again.
  const [dev] = await Promise.all([store.resolveVersion(spec('dev'), null), store.resolveVersion(spec(), null)]);
  expect(dev.resolved).toMatchObject({ commitSha: DEV_SHA });
  expect(modelInfos()).toBe(3);
});

test('a caller that leaves does not fail the others; each hears the retries', async () => {
  // The hub answers the first model-info request with a 429 asking for a second's wait.
  hub.setFault({ type: 'rate-limit', retryAfter: 1 }, { times: 1 });
  const heard: string[] = [];
  const leaving = new AbortController();
  const left = store.resolveVersion(spec(), null, {
    signal: leaving.signal,
    onRetry: () => void heard.push('leaving'),
  });
  const staying = store.resolveVersion(spec(), null, { onRetry: (notice: RetryNotice) => void heard.push(`staying ${notice.attempt}`) });
  await expect.poll(() => heard.length).toBe(2);
  expect(heard.sort()).toEqual(['leaving', 'staying 2']);
  leaving.abort(new Error('endpoint deleted'));
  await expect(left).rejects.toThrow('endpoint deleted');
  expect((await staying).resolved).toMatchObject({ commitSha: MAIN_SHA });
  expect(modelInfos()).toBe(2);
});

test('when every caller has left, the hub is asked no more', async () => {
  hub.setFault({ type: 'rate-limit', retryAfter: 1 }, { times: 1 });
  const callers = [new AbortController(), new AbortController()];
  let retries = 0;
  const waits = callers.map((c) => store.resolveVersion(spec(), null, { signal: c.signal, onRetry: () => void retries++ }));
  await expect.poll(() => retries).toBe(2);
  for (const c of callers) c.abort(new Error('gone'));
  for (const wait of waits) await expect(wait).rejects.toThrow('gone');
  // The retry would have come after the hub's second: nothing comes (nobody waits for the answer).
  await sleep(1500);
  expect(modelInfos()).toBe(1);
});
