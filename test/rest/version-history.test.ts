/**
 * The REST version history holds what GraphQL's `EndpointVersion` tells of
 * each version (the contract: "The GraphQL schema exposes the same data"):
 * a failed rollout is marked (`rolloutState: FAILED`, "the history marks the
 * version as failed"), a rollback names the version it copies, and an
 * artifact endpoint's version names its registry artifact and what it
 * resolved to.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, statusOf, TINY_REPO, waitFor, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { FAKE_WANDB_KEY, startFakeWandb, type FakeWandb } from '../support/fake-wandb.js';
import type { SeededProject } from '../support/gateway.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';

let registry: FakeWandb;
let t: TestApp;
let alice: SeededUser;
let project: SeededProject;

const ARTIFACT = 'acme/model/history-llama:v0';

beforeAll(async () => {
  registry = await startFakeWandb({
    artifacts: [
      {
        org: 'acme',
        registry: 'model',
        name: 'history-llama',
        versions: [{ version: 'v0', files: { 'history-Q8_0.gguf': buildTinyGguf({ seed: 41 }) } }],
      },
    ],
  });
  t = await startTestApp({ env: { WANDB_BASE_URL: registry.url, WANDB_API_KEY: FAKE_WANDB_KEY } });
  alice = await t.seed.user();
  project = await alice.project('version history');
}, 120_000);

afterAll(() => registry.close());

type Entry = Record<string, unknown>;

async function restHistory(id: string): Promise<Record<string, Entry>> {
  const res = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/version?limit=100`);
  expect(res.status).toBe(200);
  return res.body.data as Record<string, Entry>;
}

/** GraphQL's versions, in the REST entries' names. */
async function graphqlHistory(id: string): Promise<Record<string, Entry>> {
  const res = await alice.rest('POST', '/graphql', {
    query: `query($id: ID!) { endpoint(id: $id) { versions(first: 100) { edges { node {
      versionIndex rolloutState rolledBackFrom creator { id }
      spec { hfModelRepo wandbArtifact { name version digest file } } } } } } }`,
    variables: { id },
  });
  expect(res.body.errors).toBeUndefined();
  type Node = {
    versionIndex: number;
    rolloutState: string;
    rolledBackFrom: number | null;
    creator: { id: string } | null;
    spec: { hfModelRepo: string | null; wandbArtifact: Entry | null };
  };
  const nodes = (res.body.data.endpoint.versions.edges as { node: Node }[]).map((e) => e.node);
  return Object.fromEntries(
    nodes.map((n) => [
      String(n.versionIndex),
      {
        versionIndex: n.versionIndex,
        rolloutState: n.rolloutState,
        rolledBackFrom: n.rolledBackFrom,
        versionCreatorId: n.creator?.id ?? null,
        hfModelRepo: n.spec.hfModelRepo,
        wandbArtifact: n.spec.wandbArtifact,
      },
    ]),
  );
}

/** The REST entries, cut to the fields GraphQL was asked for: the two must agree. */
function sameFieldsAs(graphql: Record<string, Entry>, rest: Record<string, Entry>): Record<string, Entry> {
  return Object.fromEntries(
    Object.entries(rest).map(([k, entry]) => [k, Object.fromEntries(Object.keys(graphql[k] ?? {}).map((f) => [f, entry[f]]))]),
  );
}

describe('GET /dedicated/beta/endpoint/{id}/version', () => {
  test('a failed rollout is marked FAILED in the history, as GraphQL says; a rollback names the version it copies', async () => {
    const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
    await waitForStatus(t.sql, id, 'RUNNING', 150_000);
    expect((await restHistory(id))['0']).toMatchObject({ versionIndex: 0, rolloutState: 'ROLLED_OUT', rolledBackFrom: null });

    const update = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { hfModelRepo: 'test-org/no-weights' });
    expect(update.status).toBe(200);
    // The rollout fails: the old replica keeps serving, the status goes back to RUNNING with the error code set.
    await waitFor(
      'the rollout to fail',
      async () => {
        const s = await statusOf(t.sql, id);
        return s.status === 'RUNNING' && s.errorCode !== null ? s : undefined;
      },
      90_000,
    );
    const failed = await restHistory(id);
    expect(failed['1']).toMatchObject({
      versionIndex: 1,
      hfModelRepo: 'test-org/no-weights',
      rolloutState: 'FAILED',
      rolledBackFrom: null,
      versionCreatorId: alice.user.id,
      wandbArtifact: null,
    });
    expect(failed['0']).toMatchObject({ rolloutState: 'ROLLED_OUT' });
    expect(sameFieldsAs(await graphqlHistory(id), failed)).toEqual(await graphqlHistory(id));

    const rollback = await alice.rest('POST', '/graphql', {
      query: 'mutation($id: ID!) { rollbackEndpoint(id: $id, versionIndex: 0) { __typename } }',
      variables: { id },
    });
    expect(rollback.body.data.rollbackEndpoint.__typename).toBe('RollbackEndpointSuccess');
    expect((await restHistory(id))['2']).toMatchObject({ versionIndex: 2, rolledBackFrom: 0, hfModelRepo: TINY_REPO });
    // Version 2 changes nothing the replica runs: it is handed over, and reads ROLLED_OUT.
    await waitFor(
      'version 2 to roll out',
      async () => ((await restHistory(id))['2']!.rolloutState === 'ROLLED_OUT' ? true : undefined),
      90_000,
    );
    const after = await restHistory(id);
    expect(sameFieldsAs(await graphqlHistory(id), after)).toEqual(await graphqlHistory(id));
    // The other fields are the spec object's, as before.
    expect(after['2']).toMatchObject({ endpointId: id, versionComment: 'Rollback to version 0', maxTokenCountFromModel: true });
  }, 240_000);

  test("an artifact endpoint's versions name the artifact, and once started what it resolved to, as GraphQL does", async () => {
    const created = await alice.rest('POST', '/dedicated/endpoint/wandb-artifact-create', {
      wandbArtifactVersionName: ARTIFACT,
      projectId: project.id,
      autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    });
    expect(created.status).toBe(200);
    const id = created.body.endpointId as string;
    const before = (await restHistory(id))['0']!;
    expect(before).toMatchObject({ hfModelRepo: null, wandbArtifact: { name: ARTIFACT } });

    await waitForStatus(t.sql, id, 'RUNNING', 150_000);
    const after = await restHistory(id);
    expect(after['0']).toMatchObject({
      rolloutState: 'ROLLED_OUT',
      hfModelRepo: null,
      wandbArtifact: { name: ARTIFACT, version: 'v0', digest: expect.any(String), file: 'history-Q8_0.gguf' },
    });
    expect(sameFieldsAs(await graphqlHistory(id), after)).toEqual(await graphqlHistory(id));
  }, 240_000);
});
