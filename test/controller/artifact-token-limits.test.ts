/**
 * W&B artifact endpoints' token limits follow the model, as a hub endpoint's
 * left out do (commit 2846d39): an artifact endpoint (whose create body has no
 * `advanced`) gets max_token_count and max_input_length from the model's
 * context at its first start, with the flag that says so; a value set later
 * that is larger than the context fails with the message that says what to do.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateEndpointFromArtifactDocument } from '../../src/sdk/client.js';
import { liveReplicaRows, startTestApp, statusOf, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { FAKE_WANDB_KEY, startFakeWandb, type FakeWandb } from '../support/fake-wandb.js';
import type { SeededProject } from '../support/gateway.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';

let registry: FakeWandb;
let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

const ROUTE = '/dedicated/endpoint/wandb-artifact-create';
/** The registry's model with a 256-token context (the tiny model's default is 4096). */
const SHORT = 'acme/model/short-llama:v0';

beforeAll(async () => {
  registry = await startFakeWandb({
    artifacts: [
      {
        org: 'acme',
        registry: 'model',
        name: 'short-llama',
        versions: [{ version: 'v0', files: { 'short-Q8_0.gguf': buildTinyGguf({ contextLength: 256, seed: 31 }) } }],
      },
    ],
  });
  t = await startTestApp({ env: { WANDB_BASE_URL: registry.url, WANDB_API_KEY: FAKE_WANDB_KEY } });
  alice = await t.seed.user();
  project = await alice.project('artifact limits');
});

afterAll(() => registry.close());

async function versionRows(id: string) {
  return t.sql<
    {
      version_index: number;
      max_token_count: number;
      max_input_length: number;
      max_token_count_auto: boolean;
      max_input_length_auto: boolean;
    }[]
  >`
    SELECT version_index, max_token_count, max_input_length, max_token_count_auto, max_input_length_auto
    FROM endpoint_versions WHERE endpoint_id = ${id} ORDER BY version_index`;
}

describe("an artifact endpoint's token limits", () => {
  test("left out, they become the model's context at the first start; a larger one set later fails, saying what to do", async () => {
    const created = await alice.rest('POST', ROUTE, {
      wandbArtifactVersionName: SHORT,
      projectId: project.id,
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    });
    expect(created.status).toBe(200);
    const id = created.body.endpointId as string;
    // Before the model is read: the flag is set, the numbers are placeholders.
    const before = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(before.body).toMatchObject({ maxTokenCountFromModel: true });
    expect(await versionRows(id)).toMatchObject([{ version_index: 0, max_token_count_auto: true, max_input_length_auto: true }]);

    await waitForStatus(t.sql, id, 'RUNNING');
    const spec = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(spec.body).toMatchObject({ maxTokenCount: 256, maxInputLength: 256, maxTokenCountFromModel: true, hfModelRepo: null });
    expect(await versionRows(id)).toMatchObject([
      { version_index: 0, max_token_count: 256, max_input_length: 256, max_token_count_auto: true, max_input_length_auto: true },
    ]);
    const gql = await alice.rest('POST', '/graphql', {
      query: 'query($id: ID!) { endpoint(id: $id) { spec { maxTokenCount maxInputLength } } }',
      variables: { id },
    });
    expect(gql.body.data.endpoint.spec).toEqual({ maxTokenCount: 256, maxInputLength: 256 });

    // A larger limit, set by an update: the rollout fails on the model's context; the old replica keeps serving.
    const [serving] = await liveReplicaRows(t.sql, id);
    const updated = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_token_count: 1024 } });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ maxTokenCount: 1024, maxTokenCountFromModel: false });
    expect((await versionRows(id))[1]).toMatchObject({ max_token_count: 1024, max_token_count_auto: false });
    await waitFor('the rollout to fail', async () => {
      const s = await statusOf(t.sql, id);
      return s.status === 'RUNNING' && s.errorCode ? s : undefined;
    });
    // The status says what to change, as a failed start does.
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`)).body).toMatchObject({
      status: 'RUNNING',
      errorCode: 'WORKLOAD_INIT_SETTINGS_ERROR',
      errorMessage: expect.stringContaining("max_token_count (1024) is larger than the model's context (256 tokens)"),
    });
    expect((await liveReplicaRows(t.sql, id)).map((r) => r.id)).toEqual([serving!.id]);
    const [failedRollout] = await t.sql<{ detail: { message: string } }[]>`
      SELECT detail FROM endpoint_events WHERE endpoint_id = ${id} AND cause = 'controller:rollout-failed' ORDER BY id DESC LIMIT 1`;
    expect(failedRollout!.detail.message).toContain("max_token_count (1024) is larger than the model's context (256 tokens)");

    // Started on that version, the endpoint fails with the message that says what to change.
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`);
    await waitForStatus(t.sql, id, 'TERMINATED');
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/restart`)).status).toBe(200);
    await waitForStatus(t.sql, id, 'FAILED');
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`)).body).toMatchObject({
      status: 'FAILED',
      errorCode: 'WORKLOAD_INIT_SETTINGS_ERROR',
      errorMessage:
        "max_token_count (1024) is larger than the model's context (256 tokens): lower max_token_count to at most 256 " +
        "(or leave it out to use the model's context) with an update, then restart the endpoint.",
    });
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }, 120_000);

  test('created through GraphQL, the limits follow the model too', async () => {
    const { createEndpointFromArtifact: result } = await alice.graphql.request(CreateEndpointFromArtifactDocument, {
      input: { wandbArtifactVersionName: SHORT, projectId: project.id, name: 'short-from-graphql', autoscalingPolicy: { minReplica: 0 } },
    });
    if (result.__typename !== 'CreateEndpointFromArtifactSuccess') throw new Error(result.__typename);
    const id = result.endpoint.id;
    const spec = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(spec.body).toMatchObject({ maxTokenCountFromModel: true });
    expect(await versionRows(id)).toMatchObject([{ max_token_count_auto: true, max_input_length_auto: true }]);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });
});
