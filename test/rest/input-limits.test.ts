/**
 * max_input_length against a max_token_count left out: that one follows the
 * model, and until the first start reads the model its value is a
 * placeholder (4096), which a request is not refused against. The first start
 * checks the input limit against the model's context instead, and a larger
 * one fails it with WORKLOAD_INIT_SETTINGS_ERROR, saying what to change. A
 * max_token_count the request gives is still checked at once.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, statusOf, TINY_LONG_REPO, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import type { SeededProject } from '../support/gateway.js';

let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

const SHORT = 'test-org/short-context-GGUF';

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  project = await alice.project('input limits');
}, 120_000);

const createBody = (overrides: Record<string, unknown>) => ({
  projectId: project.id,
  name: 'limits',
  instanceOptionId: 'TwD5AqnBSVN0',
  hfModelRepo: TINY_LONG_REPO,
  ...overrides,
});

describe('max_input_length with max_token_count left to follow the model', () => {
  test('above 4096 is accepted; the first start reads the 65,536-token context and runs with it', async () => {
    const created = await alice.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody({ advanced: { max_input_length: 8000 }, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id = created.body.endpointId as string;
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}`)).body).toMatchObject({
      maxInputLength: 8000,
      maxTokenCountFromModel: true,
    });
    await waitForStatus(t.sql, id, 'RUNNING', 150_000);
    const spec = (await alice.rest('GET', `/dedicated/beta/endpoint/${id}`)).body;
    expect(spec).toMatchObject({ maxInputLength: 8000, maxTokenCountFromModel: true });
    expect(spec.maxTokenCount).toBeGreaterThanOrEqual(8000);
    expect(spec.maxTokenCount).toBeLessThanOrEqual(65_536);
  }, 200_000);

  test("larger than the model's context: accepted, then the first start fails with WORKLOAD_INIT_SETTINGS_ERROR", async () => {
    const created = await alice.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody({ hfModelRepo: SHORT, advanced: { max_input_length: 5000 }, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id = created.body.endpointId as string;
    await waitForStatus(t.sql, id, 'FAILED', 150_000);
    expect((await statusOf(t.sql, id)).errorCode).toBe('WORKLOAD_INIT_SETTINGS_ERROR');
    const status = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    expect(status.body).toMatchObject({
      errorCode: 'WORKLOAD_INIT_SETTINGS_ERROR',
      errorMessage: expect.stringContaining("max_input_length (5000) is larger than the model's context (256 tokens)"),
    });
    expect(status.body.errorMessage).toContain('lower max_input_length to at most 256');
  }, 200_000);

  test('an update setting it above the placeholder is accepted too', async () => {
    const id = await project.endpoint({ hfModelRepo: TINY_LONG_REPO });
    const updated = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_input_length: 6000 } });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body).toMatchObject({ versionIndex: 1, maxInputLength: 6000, maxTokenCountFromModel: true });
  });
});

describe('max_input_length with a max_token_count given', () => {
  test('larger than it is refused at once, on create and on update, naming the field and the rule', async () => {
    const created = await alice.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody({ advanced: { max_token_count: 4096, max_input_length: 8000 } }),
    );
    expect(created.status).toBe(400);
    expect(created.body.error.details.fields).toEqual([
      { field: 'advanced.max_input_length', message: 'must not exceed max_token_count (8000 > 4096)' },
    ]);

    const id = await project.endpoint({ hfModelRepo: TINY_LONG_REPO, advanced: { max_token_count: 4096 } });
    const updated = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_input_length: 6000 } });
    expect(updated.status).toBe(400);
    expect(updated.body.error.details.fields).toEqual([
      { field: 'advanced.max_input_length', message: 'must not exceed max_token_count (6000 > 4096)' },
    ]);
    // Giving both in one update is checked on the merged spec: fine when they agree.
    const both = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_token_count: 8192, max_input_length: 6000 } });
    expect(both.status).toBe(200);
    expect(both.body).toMatchObject({ maxTokenCount: 8192, maxInputLength: 6000, maxTokenCountFromModel: false });
  });
});
