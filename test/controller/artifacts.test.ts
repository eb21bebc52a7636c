/**
 * Endpoints from W&B registry artifacts, end to end: the REST route and the
 * GraphQL mutation, idempotent rollouts, and every failure code, against the
 * stand-in registry serving the tiny model.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { CreateEndpointFromArtifactDocument } from '../../src/sdk/client.js';
import {
  liveReplicaRows,
  startTestApp,
  statusOf,
  statusTrail,
  waitFor,
  waitForStatus,
  type SeededUser,
  type TestApp,
} from '../support/app.js';
import { FAKE_WANDB_KEY, startFakeWandb, type FakeWandb } from '../support/fake-wandb.js';
import type { SeededProject } from '../support/gateway.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';

let registry: FakeWandb;
let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

const ROUTE = '/dedicated/endpoint/wandb-artifact-create';

beforeAll(async () => {
  registry = await startFakeWandb({
    artifacts: [
      {
        org: 'acme',
        registry: 'model',
        name: 'tiny-llama',
        versions: [
          { version: 'v0', files: { 'tiny-Q8_0.gguf': buildTinyGguf({ seed: 11 }), 'README.md': 'v0' } },
          { version: 'v1', aliases: ['latest'], files: { 'tiny-Q8_0.gguf': buildTinyGguf({ seed: 12 }), 'README.md': 'v1' } },
        ],
      },
      {
        org: 'acme',
        registry: 'model',
        name: 'not-a-model',
        versions: [{ version: 'v0', type: 'dataset', files: { 'data.csv': 'a,b\n' } }],
      },
      {
        org: 'acme',
        registry: 'model',
        name: 'fault-target',
        versions: [{ version: 'v0', files: { 'f-Q8_0.gguf': buildTinyGguf({ seed: 13 }) } }],
      },
    ],
  });
  t = await startTestApp({ env: { WANDB_BASE_URL: registry.url, WANDB_API_KEY: FAKE_WANDB_KEY, CPU_SLOTS: '8' } });
  alice = await t.seed.user();
  project = await alice.project('registry');
});

afterAll(() => registry.close());
afterEach(() => registry.setFault(null));

async function versionsOf(id: string) {
  return t.sql<
    { version_index: number; comment: string | null; wandb_artifact: string; model: { artifact: string; digest: string } | null }[]
  >`
    SELECT version_index, comment, wandb_artifact, model FROM endpoint_versions WHERE endpoint_id = ${id} ORDER BY version_index`;
}

describe('creating from an artifact', () => {
  test('REST without projectId: a new project in the default team, a generated name, then RUNNING', async () => {
    const res = await alice.rest('POST', ROUTE, {
      wandbArtifactVersionName: 'acme/model/tiny-llama:v0',
      accelerator: { type: 'A100', count: 1 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      endpointId: expect.stringMatching(/^ep_/),
      endpointName: 'tiny-llama-v0',
      projectId: expect.stringMatching(/^prj_/),
      projectName: 'model/tiny-llama',
      teamId: alice.teamId,
      teamName: expect.any(String),
    });
    expect(res.body.projectId).not.toBe(project.id);
    const id = res.body.endpointId as string;
    await waitForStatus(t.sql, id, 'RUNNING');
    const spec = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(spec.body).toMatchObject({ gpuType: 'A100', numGpu: 1, hfModelRepo: null, projectId: res.body.projectId });
    const [version] = await versionsOf(id);
    expect(version).toMatchObject({
      wandb_artifact: 'acme/model/tiny-llama:v0',
      model: { artifact: 'acme/model/tiny-llama:v0', digest: registry.manifestOf('acme', 'model', 'tiny-llama', 'v0').digest },
    });
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });

  test('without projectId, names as long as an artifact name allows: the project and endpoint names are cut to fit', async () => {
    const registryName = `r${'e'.repeat(99)}`;
    const artifactName = `n${'a'.repeat(99)}`;
    const res = await alice.rest('POST', ROUTE, { wandbArtifactVersionName: `acme/${registryName}/${artifactName}:v1` });
    expect(res.status).toBe(200);
    expect(res.body.projectName).toBe(`${registryName}/${artifactName}`.slice(0, 128));
    expect(res.body.endpointName).toBe(`${artifactName}-v1`);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${res.body.endpointId}`);
  });

  test('GraphQL, by alias: the spec shows the artifact, its resolved version and digest', async () => {
    const { createEndpointFromArtifact: result } = await alice.graphql.request(CreateEndpointFromArtifactDocument, {
      input: {
        wandbArtifactVersionName: 'acme/model/tiny-llama:latest',
        projectId: project.id,
        name: 'from-graphql',
        autoscalingPolicy: { minReplica: 1 },
      },
    });
    if (result.__typename !== 'CreateEndpointFromArtifactSuccess') throw new Error(result.__typename);
    expect(result).toMatchObject({ created: true, project: { id: project.id }, endpoint: { name: 'from-graphql' } });
    const id = result.endpoint.id;
    await waitForStatus(t.sql, id, 'RUNNING');
    const read = await alice.rest('POST', '/graphql', {
      query: 'query($id: ID!) { endpoint(id: $id) { spec { hfModelRepo wandbArtifact { name version digest file } } } }',
      variables: { id },
    });
    expect(read.body.data.endpoint.spec).toEqual({
      hfModelRepo: null,
      wandbArtifact: {
        name: 'acme/model/tiny-llama:latest',
        version: 'v1',
        digest: registry.manifestOf('acme', 'model', 'tiny-llama', 'v1').digest,
        file: 'tiny-Q8_0.gguf',
      },
    });
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  });
});

describe('idempotent rollouts', () => {
  test('a second call with the same key rolls the endpoint out: same id, a new version naming the artifact, the model changed', async () => {
    const body = { projectId: project.id, idempotencyKey: 'webhook-42', autoscalingPolicy: { minReplica: 1, maxReplica: 1 } };
    const first = await alice.rest('POST', ROUTE, { ...body, wandbArtifactVersionName: 'acme/model/tiny-llama:v0' });
    const id = first.body.endpointId as string;
    await waitForStatus(t.sql, id, 'RUNNING');
    const [before] = await liveReplicaRows(t.sql, id);

    const second = await alice.rest('POST', ROUTE, { ...body, wandbArtifactVersionName: 'acme/model/tiny-llama:v1' });
    expect(second.status).toBe(200);
    expect(second.body.endpointId).toBe(id);
    await waitFor('the rollout', async () => {
      const s = await statusOf(t.sql, id);
      return s.status === 'RUNNING' && s.updated === 1 ? s : undefined;
    });
    expect((await statusTrail(t.sql, id)).slice(-2)).toEqual(['UPDATING', 'RUNNING']);
    const versions = await versionsOf(id);
    expect(versions.map((v) => [v.version_index, v.wandb_artifact, v.comment])).toEqual([
      [0, 'acme/model/tiny-llama:v0', 'Created from acme/model/tiny-llama:v0'],
      [1, 'acme/model/tiny-llama:v1', 'Rollout of acme/model/tiny-llama:v1'],
    ]);
    expect(versions[1]!.model!.digest).not.toBe(versions[0]!.model!.digest);
    const [after] = await liveReplicaRows(t.sql, id);
    expect(after!.id).not.toBe(before!.id);
    expect(after!.version_index).toBe(1);
  });

  test('ten concurrent calls with one key yield one endpoint', async () => {
    const calls = await Promise.all(
      Array.from({ length: 10 }, () =>
        alice.rest('POST', ROUTE, {
          wandbArtifactVersionName: 'acme/model/tiny-llama:v0',
          projectId: project.id,
          idempotencyKey: 'burst-1',
          simplescale: { replicas: 0 },
        }),
      ),
    );
    expect(calls.map((c) => c.status)).toEqual(Array(10).fill(200));
    const ids = new Set(calls.map((c) => c.body.endpointId));
    expect(ids.size).toBe(1);
    const rows = await t.sql`SELECT id FROM endpoints WHERE project_id = ${project.id} AND idempotency_key = 'burst-1'`;
    expect(rows).toHaveLength(1);
    expect(await versionsOf(rows[0]!.id)).toHaveLength(10);
  });
});

describe('bad requests', () => {
  test('a malformed artifact name is a 400 that says what shape is expected', async () => {
    const res = await alice.rest('POST', ROUTE, { wandbArtifactVersionName: 'acme/tiny-llama' });
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields).toEqual([
      { field: 'wandbArtifactVersionName', message: expect.stringContaining('expected "<org>/<registry>/<name>:<version>"') },
    ]);
  });

  test('idempotencyKey without projectId, a bad accelerator, and unknown fields are 400s', async () => {
    const res = await alice.rest('POST', ROUTE, {
      wandbArtifactVersionName: 'acme/model/tiny-llama:v0',
      idempotencyKey: 'k',
      accelerator: { type: 'T4', count: 3 },
      extra: 1,
    });
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields.map((f: { field: string }) => f.field).sort()).toEqual([
      'accelerator.count',
      'accelerator.type',
      'extra',
      'projectId',
    ]);
  });
});

describe('failure codes', () => {
  async function failsWith(name: string, code: string) {
    const res = await alice.rest('POST', ROUTE, { wandbArtifactVersionName: name, projectId: project.id });
    const id = res.body.endpointId as string;
    const failed = await waitForStatus(t.sql, id, 'FAILED');
    expect(failed.errorCode).toBe(code);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
  }

  test('an unknown artifact: WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR', () =>
    failsWith('acme/model/nope:v0', 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR'));
  test('a missing manifest: WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR', async () => {
    registry.setFault({ type: 'missing-manifest' });
    await failsWith('acme/model/fault-target:v0', 'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR');
  });
  test('not a model: WORKLOAD_INIT_MANIFEST_TYPE_ERROR', () => failsWith('acme/model/not-a-model:v0', 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR'));
  test('401: WORKLOAD_INIT_INVALID_TOKEN_ERROR', async () => {
    registry.setFault({ type: 'invalid-key' });
    await failsWith('acme/model/fault-target:v0', 'WORKLOAD_INIT_INVALID_TOKEN_ERROR');
  });
  test('403: WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR', async () => {
    registry.setFault({ type: 'forbidden' });
    await failsWith('acme/model/fault-target:v0', 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR');
  });
  test('a GraphQL error, a 5xx or a malformed answer: WORKLOAD_INIT_HF_WANDB_API_ERROR', async () => {
    for (const fault of [{ type: 'graphql-error' as const }, { type: 'server-error' as const }, { type: 'malformed' as const }]) {
      registry.setFault(fault);
      await failsWith('acme/model/fault-target:v0', 'WORKLOAD_INIT_HF_WANDB_API_ERROR');
    }
  });
  test('a corrupt transfer: WORKLOAD_INIT_DOWNLOAD_ERROR', async () => {
    registry.setFault({ type: 'corrupt' }, { on: ['storage'] });
    await failsWith('acme/model/fault-target:v0', 'WORKLOAD_INIT_DOWNLOAD_ERROR');
  });
});
