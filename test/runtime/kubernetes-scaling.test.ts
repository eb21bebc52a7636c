/**
 * Scaling on Kubernetes, through the stand-in API server with real engines in
 * its pods: a scale-out adds a pod; a scale-in takes the newest replica out of
 * routing first (DRAINING: the gateway sends it nothing more), lets the answer
 * it is generating finish, and only then deletes its pod.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import {
  engineFetch,
  liveReplicaRows,
  startTestApp,
  stopAllReplicas,
  statusOf,
  TINY_REPO,
  waitFor,
  waitForStatus,
  type SeededUser,
  type TestApp,
} from '../support/app.js';
import type { SeededProject } from '../support/gateway.js';
import { endpointPods, kubernetesTestEnv } from '../support/kube-env.js';
import { startKubeStandIn, type KubeStandIn } from '../support/kube/index.js';

const NS = 'default';
let kube: KubeStandIn;
let t: TestApp;
let alice: SeededUser;
let project: SeededProject;
let cacheDir: string;

beforeAll(async () => {
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kube-scaling-'));
  kube = await startKubeStandIn({
    cwd: process.cwd(),
    probePeriodMs: 100,
    nodes: [{ name: 'gpu-a', gpus: 2, labels: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' } }],
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kube.writeKubeconfig(NS));
  // A drain long enough for any answer here: what ends it must be the answer, not the timeout.
  t = await startTestApp({ kubeConfig, env: kubernetesTestEnv(NS, cacheDir, { DRAIN_TIMEOUT_MS: '120000' }) });
  alice = await t.seed.user();
  project = await alice.project('kube-scaling');
}, 120_000);

afterAll(async () => {
  await t?.app.close();
  if (t) await stopAllReplicas(t.sql, t.app);
  await kube?.close();
  await rm(cacheDir, { recursive: true, force: true });
});

const livePodsOf = (endpointId: string) => endpointPods(kube, NS, endpointId, true);
const podNameOf = (replicaId: string) =>
  kube.pods(NS).find((p) => (p.metadata as { labels?: Record<string, string> }).labels?.['dedicated-endpoints.io/replica'] === replicaId)
    ?.metadata.name;

type Replica = Awaited<ReturnType<typeof liveReplicaRows>>[number];

/** Requests the replica's engine has answered (its own count, from /health). */
async function answeredBy(replica: Replica): Promise<number> {
  const res = await engineFetch(replica, '/health');
  return ((await res.json()) as { totalRequests: number }).totalRequests;
}

test('scale-out adds a pod; scale-in drains the newest replica out of routing, lets its answer finish, then deletes its pod', async () => {
  const id = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 2 } });
  await waitForStatus(t.sql, id, 'RUNNING', 90_000);
  expect(livePodsOf(id)).toHaveLength(1);

  // Scale out: a second pod, the endpoint serving on both.
  expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { autoscalingPolicy: { minReplica: 2, maxReplica: 2 } })).status).toBe(
    200,
  );
  const two = await waitFor(
    'two replicas serving',
    async () => {
      const rows = await liveReplicaRows(t.sql, id);
      return rows.length === 2 && rows.every((r) => r.state === 'READY') ? rows : undefined;
    },
    90_000,
  );
  expect(livePodsOf(id)).toHaveLength(2);
  const [kept, victim] = [two[0]!, two[1]!]; // scale-in removes the newest
  const victimPod = podNameOf(victim.id)!;

  // An answer in flight on the replica the scale-in will remove, streamed from its engine. Greedy, the tiny model's
  // answer runs to max_tokens without an end of sequence: long enough to outlast the scale-in's steps on a loaded
  // machine (400 sampled tokens could end first: the drain was then over before the test could see it).
  const streamed = await engineFetch(victim, '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      messages: [{ role: 'user', content: 'Tell me a very long story.' }],
      max_tokens: 3500,
      temperature: 0,
      stream: true,
    }),
  });
  expect(streamed.status).toBe(200);
  let ended = false;
  const answer = (async () => {
    const text = await streamed.text();
    ended = true;
    return text;
  })();

  // Scale in: the newest replica leaves routing (DRAINING) while its answer is still being generated.
  expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { autoscalingPolicy: { minReplica: 1, maxReplica: 1 } })).status).toBe(
    200,
  );
  await waitFor(
    'the newest replica to drain',
    async () => (await liveReplicaRows(t.sql, id)).find((r) => r.id === victim.id)?.state === 'DRAINING',
  ).catch(async (error: Error) => {
    // What the controller had written, should the drain never be seen.
    const replicas = await t.sql`SELECT id, state, version_index, last_error FROM replicas WHERE endpoint_id = ${id}`;
    const versions = await t.sql`SELECT version_index, rollout_state FROM endpoint_versions WHERE endpoint_id = ${id}`;
    const state = { ended, status: await statusOf(t.sql, id), replicas, versions };
    throw new Error(`${error.message}: ${JSON.stringify(state)}`);
  });
  // The endpoint counts one replica serving as soon as the other left routing, not when its answer ends.
  await waitFor('the counts to show one replica serving', async () => (await statusOf(t.sql, id)).curr === 1);
  // It left routing while its answer was still being generated, and its pod stays meanwhile.
  expect(kube.pod(NS, victimPod)?.metadata.deletionTimestamp).toBeUndefined();
  expect(ended, 'the answer was still being generated when the replica left routing').toBe(false);

  // From then on the gateway routes to the other replica only: its engine's own count takes every request.
  const before = await answeredBy(kept);
  for (let i = 0; i < 3; i++) {
    const chat = await alice.rest('POST', '/dedicated/v1/chat/completions', {
      model: id,
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: 2,
    });
    expect(chat.status).toBe(200);
  }
  expect(await answeredBy(kept)).toBe(before + 3);

  // The answer ends whole, then the pod goes.
  const text = await answer;
  expect(text).toMatch(/"finish_reason":"length"/);
  expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  await waitFor('the drained pod to be gone', async () => kube.pod(NS, victimPod) === undefined, 60_000);
  // Its row is STOPPED once the gateway's watch has seen the pod go (a moment after the API server removed it).
  await waitFor('the drained replica stopped', async () => (await liveReplicaRows(t.sql, id)).length === 1, 10_000);
  expect((await liveReplicaRows(t.sql, id)).map((r) => [r.id, r.state])).toEqual([[kept.id, 'READY']]);
  expect(livePodsOf(id)).toHaveLength(1);
  expect(await statusOf(t.sql, id)).toMatchObject({ status: 'RUNNING', curr: 1 });
  await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
}, 240_000);
