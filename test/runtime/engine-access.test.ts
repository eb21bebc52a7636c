/**
 * The built-in engine, started by the local runtime as the gateway starts it:
 * it answers only the bearer of its own token (passed in its environment at
 * spawn), and once no request reaches it for ENGINE_IDLE_EXIT_MS (its gateway
 * gone, none adopting it) it drains and exits by itself.
 */
import { startReplica } from '../support/start-replica.js';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { LocalRuntime } from '../../src/runtime/local-runtime.js';
import { engineAuthHeaders } from '../../src/engine-client/engine-client.js';
import type { ReplicaRef } from '../../src/runtime/runtime.js';
import { writeTinyGguf } from '../support/tiny-gguf.js';
import { waitFor } from '../support/app.js';

const IDLE_EXIT_MS = 2000;
let dir: string;
let modelPath: string;
let runtime: LocalRuntime;
let handle: ReplicaRef;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'engine-access-'));
  modelPath = (await writeTinyGguf(path.join(dir, 'tiny.gguf'))).path;
  runtime = new LocalRuntime({
    dir: path.join(dir, 'replicas'),
    inventory: { H100: 1 },
    cpuOnly: true,
    threads: 1,
    engineIdleExitMs: IDLE_EXIT_MS,
  });
  handle = await startReplica(runtime, {
    replicaId: 'rep_access',
    endpointId: 'ep_access',
    modelPath,
    modelRepo: 'org/tiny',
    modelRevision: null,
    gpuType: 'H100',
    numGpu: 1,
    maxBatchSize: 1,
    contextSize: 512,
    maxInputLength: 256,
    addSpecialTokens: false,
    skipSpecialTokens: true,
  });
}, 60_000);

afterAll(async () => {
  if (handle && runtime.isAlive(handle)) await runtime.stop(handle, 0);
  await rm(dir, { recursive: true, force: true });
});

const chat = (headers: Record<string, string>) =>
  fetch(`${handle.address}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, temperature: 0 }),
  });

describe('an engine started by the runtime', () => {
  test('answers only the bearer of its token: without it, or with another, 401 in the OpenAI shape on every route', async () => {
    expect(handle.token).toMatch(/^[\w-]{32}$/);
    const strangers: Record<string, string>[] = [{}, { authorization: 'Bearer wrong' }, { authorization: `Bearer ${handle.token}x` }];
    for (const headers of strangers) {
      const refused = await chat(headers);
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ error: { type: 'authentication_error', code: 'invalid_api_key' } });
    }
    expect((await fetch(`${handle.address}/health`)).status).toBe(401);
    expect((await fetch(`${handle.address}/tokenize`, { method: 'POST', body: '{}' })).status).toBe(401);

    const answered = await chat(engineAuthHeaders(handle.token));
    expect(answered.status).toBe(200);
    expect(await runtime.health(handle)).toMatchObject({ status: 'ok' });
    // The token is in its environment, not its arguments (which `ps` shows to every user).
    const cmdline = await readFile(`/proc/${handle.locator}/cmdline`, 'utf8');
    expect(cmdline).not.toContain(handle.token!);
  }, 30_000);

  test('stays up while its gateway polls it, then exits by itself once nobody has for ENGINE_IDLE_EXIT_MS', async () => {
    // Polled (as the controller polls every replica it serves) for twice the idle limit: still up.
    const pollUntil = Date.now() + 2 * IDLE_EXIT_MS;
    let lastPollAt = 0;
    while (Date.now() < pollUntil) {
      expect(await runtime.health(handle, 1000)).toMatchObject({ status: 'ok' });
      lastPollAt = Date.now();
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(runtime.isAlive(handle)).toBe(true);
    // Requests without the token do not count as its gateway's.
    const strangers = setInterval(() => void fetch(`${handle.address}/health`).catch(() => {}), 200);
    try {
      await waitFor('the orphaned engine to exit', async () => !runtime.isAlive(handle), 15_000);
    } finally {
      clearInterval(strangers);
    }
    expect(Date.now() - lastPollAt).toBeGreaterThanOrEqual(IDLE_EXIT_MS);
    const log = await readFile(path.join(dir, 'replicas', 'rep_access.log'), 'utf8');
    expect(log).toContain(`no request for ${IDLE_EXIT_MS / 1000} s (its gateway is gone and none adopted it): draining`);
  }, 40_000);
});
