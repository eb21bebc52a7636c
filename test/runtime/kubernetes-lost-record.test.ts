/**
 * A replica's Pod created, then the write of where it runs lost: the controller creates the Pod, then records its
 * name (the replica's locator) and the engine's token in the replica's row; when that write fails (PostgreSQL away
 * for a moment, a connection broken) the Pod runs and the row says nothing of it. The next pass (this gateway's, or
 * the one that takes the endpoint over) must follow that Pod, found in its informer's cache by the replica's id, and
 * record it once the database is back: no second Pod, no Pod deleted, no list call. (It used to stop the replica as
 * abandoned, let the orphan reaper delete its Pod, and create another.) And the other way round: a scale-in's Pod
 * deleted, then the record of its stop lost: the next pass records it, and creates or deletes nothing else.
 *
 * The write is lost in PostgreSQL itself: a trigger on the replicas table ends its own session (pg_terminate_backend,
 * as an administrator's or a failover's would) inside any update that gives a row its first locator, while the test
 * keeps it armed. The controller, the KubernetesRuntime and the services are the real ones, against the stand-in API
 * server in its simulated mode (its kubelet marks Pods ready) and the small engine that answers every Pod IP.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Controller } from '../../src/controller/controller.js';
import { EngineClient } from '../../src/engine-client/engine-client.js';
import { ModelCache } from '../../src/models/model-cache.js';
import { ModelStore } from '../../src/models/model-store.js';
import { KubernetesRuntime } from '../../src/runtime/kubernetes/kubernetes-runtime.js';
import { podName } from '../../src/runtime/kubernetes/pod-spec.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { createServices, type Services } from '../../src/services/index.js';
import type { Principal } from '../../src/services/principal.js';
import { connectDatabase, type Sql } from '../../src/storage/database.js';
import { TINY_REPO, waitFor } from '../support/app.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createBody, seedPrincipal } from '../support/gateway.js';
import { startSimCluster, type SimCluster } from '../support/kube/sim-fleet.js';
import { lists } from '../support/kube/sim-observe.js';
import { placementRows } from '../support/placement-rows.js';

const NS = 'default';

let cluster: SimCluster;
let db: TestDatabase;
/** The test's own connection: arms the fault and reads what the controller wrote. */
let observer: Sql;
let cacheDir: string;
let engines: EngineClient;
let services: Services;
let principal: Principal;
let projectId: string;
const logged: string[] = [];
/** The gateways started here (a controller over its own runtime), stopped when the file ends. */
const gateways: { controller: Controller; runtime: KubernetesRuntime }[] = [];

/**
 * Ends the session of any update that gives a replica's row its first locator ('placement'), or that records a
 * draining replica stopped ('stop'), while that kind is armed; counts each cut.
 */
const FAULT = `
  CREATE TABLE test_cuts_armed (kind text);
  CREATE SEQUENCE test_cuts;
  CREATE FUNCTION test_cut() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF EXISTS (SELECT 1 FROM test_cuts_armed WHERE kind = TG_ARGV[0]) THEN
      PERFORM nextval('test_cuts');
      PERFORM pg_terminate_backend(pg_backend_pid());
      PERFORM pg_sleep(30); -- the termination ends the statement here, before anything commits
    END IF;
    RETURN NEW;
  END $$;
  CREATE TRIGGER test_cut_placement BEFORE UPDATE ON replicas FOR EACH ROW
    WHEN (OLD.locator IS NULL AND NEW.locator IS NOT NULL) EXECUTE FUNCTION test_cut('placement');
  CREATE TRIGGER test_cut_stop BEFORE UPDATE ON replicas FOR EACH ROW
    WHEN (OLD.state = 'DRAINING' AND NEW.state = 'STOPPED') EXECUTE FUNCTION test_cut('stop');`;

const arm = async (kind: 'placement' | 'stop' = 'placement') => void (await observer`INSERT INTO test_cuts_armed VALUES (${kind})`);
const disarm = async () => void (await observer`DELETE FROM test_cuts_armed`);
const cuts = async () => {
  const [row] = await observer<{ n: number }[]>`SELECT CASE WHEN is_called THEN last_value ELSE 0 END::int AS n FROM test_cuts`;
  return row!.n;
};

async function startGateway(): Promise<{ controller: Controller; runtime: KubernetesRuntime }> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(cluster.kube.writeKubeconfig(NS));
  const settings = { ENGINE_IMAGE: 'sim:1', KUBERNETES_NAMESPACE: NS, KUBERNETES_ENGINE_PORT: String(cluster.engine.port) };
  const runtime = new KubernetesRuntime({
    settings: readKubernetesSettings(settings),
    kubeConfig,
    hubEndpoint: cluster.hub.url,
    engines,
    log: (message, error) => logged.push(`[kubernetes] ${message} ${error ?? ''}`),
  });
  await runtime.open();
  const controller = new Controller({
    sql: db.sql,
    runtime,
    models: new ModelStore({ cache: new ModelCache({ dir: cacheDir }), hubEndpoint: cluster.hub.url, allowExternalFormats: false }),
    builtInEngine: true,
    intervalMs: 200,
    engines,
    log: (message, error) => logged.push(`[controller] ${message} ${error ?? ''}`),
  });
  const gateway = { controller, runtime };
  gateways.push(gateway);
  return gateway;
}

async function stopGateway(gateway: { controller: Controller; runtime: KubernetesRuntime }): Promise<void> {
  await gateway.controller.stop();
  await gateway.runtime.close();
  gateways.splice(gateways.indexOf(gateway), 1);
}

beforeAll(async () => {
  cluster = await startSimCluster(2);
  db = await createTestDatabase();
  observer = connectDatabase(db.dbUrl, { max: 1 });
  await observer.unsafe(FAULT);
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kube-lost-record-'));
  engines = new EngineClient();
  services = createServices(db.sql, { onEndpointChange: (id) => gateways.forEach((g) => g.controller.poke(id)) });
  ({ principal, projectId } = await seedPrincipal(db.sql, services, 'lost-record'));
}, 120_000);

afterAll(async () => {
  for (const gateway of [...gateways]) await stopGateway(gateway);
  await engines?.close();
  await observer?.end({ timeout: 5 });
  await db?.close();
  await cluster?.hub.close();
  if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

async function createEndpoint(name: string): Promise<string> {
  const body = createBody(projectId, { name, hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
  const created = await services.endpoints.create(principal, body);
  if (created.type === 'error') throw new Error(created.error.message);
  return created.value.id;
}

const replicaRows = (endpointId: string) => placementRows(observer, endpointId);

/** The endpoint's one replica READY, recorded at its Pod, and the endpoint RUNNING. */
async function expectServingFromItsFirstPod(endpointId: string): Promise<void> {
  await waitFor(
    'the endpoint RUNNING with its replica READY',
    async () => {
      const [endpoint] = await observer<{ status: string }[]>`SELECT status FROM endpoints WHERE id = ${endpointId}`;
      const rows = await replicaRows(endpointId);
      return endpoint?.status === 'RUNNING' && rows.some((r) => r.state === 'READY');
    },
    60_000,
  ).catch((error: unknown) => {
    throw new Error(`${String(error)}; the gateway logged:\n${logged.slice(-15).join('\n')}`);
  });
  const rows = await replicaRows(endpointId);
  // One replica ever: the first, never stopped and replaced.
  expect(rows).toEqual([{ id: rows[0]!.id, state: 'READY', locator: podName(rows[0]!.id), has_token: true, last_error: null }]);
  const live = (await cluster.kube.pods(NS)).filter(
    (p) => (p.metadata as { labels?: Record<string, string> }).labels?.['dedicated-endpoints.io/endpoint'] === endpointId,
  );
  expect(live.map((p) => [p.metadata.name, Boolean((p.metadata as { deletionTimestamp?: string }).deletionTimestamp)])).toEqual([
    [podName(rows[0]!.id), false],
  ]);
}

test("the write of a Pod's name fails: the next pass follows that Pod and records it once the database is back", async () => {
  const gateway = await startGateway();
  await gateway.controller.start();
  await cluster.kube.resetCounts();
  const before = await cuts();
  await arm();
  const id = await createEndpoint('lost-once');
  // The placement's write cut, then the next pass's (the database still refuses it): the Pod keeps running meanwhile.
  await waitFor('two writes of the locator cut', async () => (await cuts()) >= before + 2, 60_000);
  let requests = await cluster.kube.requests();
  expect(requests['POST /api/v1/namespaces/{ns}/pods']).toBe(1);
  expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}'] ?? 0).toBe(0);
  const [replica] = await replicaRows(id);
  expect(replica).toMatchObject({ state: 'STARTING', locator: null });

  await disarm();
  await expectServingFromItsFirstPod(id);
  requests = await cluster.kube.requests();
  expect(requests['POST /api/v1/namespaces/{ns}/pods']).toBe(1);
  expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}'] ?? 0).toBe(0);
  expect(lists(requests)).toEqual([]);
  await stopGateway(gateway);
}, 120_000);

test('the gateway stops before it could record its Pod: the gateway that takes the endpoint over follows that Pod', async () => {
  const first = await startGateway();
  await first.controller.start();
  const before = await cuts();
  await arm();
  const id = await createEndpoint('lost-then-taken-over');
  await waitFor('the write of the locator cut', async () => (await cuts()) > before, 60_000);
  await stopGateway(first);
  const [replica] = await replicaRows(id);
  expect(replica).toMatchObject({ state: 'STARTING', locator: null, has_token: false });

  // Another gateway, with a cache of its own (its first list), takes the endpoint over; the database is back.
  const next = await startGateway();
  await cluster.kube.resetCounts();
  await disarm();
  await next.controller.start();
  await expectServingFromItsFirstPod(id);
  const requests = await cluster.kube.requests();
  expect(requests['POST /api/v1/namespaces/{ns}/pods'] ?? 0).toBe(0);
  expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}'] ?? 0).toBe(0);
  expect(lists(requests)).toEqual([]);
}, 120_000);

test("a scale-in's record fails after its Pod was deleted: the next pass records the replica stopped, nothing else is done", async () => {
  const gateway = await startGateway();
  await gateway.controller.start();
  const body = createBody(projectId, { name: 'scaled-in', hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 2, maxReplica: 2 } });
  const created = await services.endpoints.create(principal, body);
  if (created.type === 'error') throw new Error(created.error.message);
  const id = created.value.id;
  await waitFor('two replicas READY', async () => (await replicaRows(id)).filter((r) => r.state === 'READY').length === 2, 60_000);
  const podsBefore = (await replicaRows(id)).map((r) => r.locator);
  const before = await cuts();
  await cluster.kube.resetCounts();
  await arm('stop');
  const updated = await services.endpoints.update(principal, id, { autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
  if (updated.type === 'error') throw new Error(updated.error.message);
  await waitFor('the write of the stop cut twice', async () => (await cuts()) >= before + 2, 60_000);
  await disarm();
  await waitFor(
    'one replica READY, the other STOPPED',
    async () => {
      const rows = await replicaRows(id);
      return rows.length === 2 && rows.filter((r) => r.state === 'READY').length === 1 && rows.some((r) => r.state === 'STOPPED');
    },
    60_000,
  );
  const requests = await cluster.kube.requests();
  // The scale-in's delete, and one per pass that met the outage (each finds the Pod gone: a 404); no Pod created, no list.
  expect(requests['DELETE /api/v1/namespaces/{ns}/pods/{name}']).toBeGreaterThanOrEqual(1);
  expect(requests['POST /api/v1/namespaces/{ns}/pods'] ?? 0).toBe(0);
  expect(lists(requests)).toEqual([]);
  const ready = (await replicaRows(id)).find((r) => r.state === 'READY')!;
  const live = (await cluster.kube.pods(NS)).filter(
    (p) =>
      (p.metadata as { labels?: Record<string, string> }).labels?.['dedicated-endpoints.io/endpoint'] === id &&
      !(p.metadata as { deletionTimestamp?: string }).deletionTimestamp,
  );
  // The replica that serves on is one of the two, in its own Pod.
  expect(podsBefore).toContain(ready.locator);
  expect(live.map((p) => p.metadata.name)).toEqual([ready.locator]);
  await stopGateway(gateway);
}, 120_000);
