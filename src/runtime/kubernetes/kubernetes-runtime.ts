/**
 * The Kubernetes runtime (RUNTIME=kubernetes): each replica is one pod in
 * the configured namespace (pod-spec.ts), created through the official
 * client. It watches rather than polls: one pod informer (our label
 * selector) and one node informer keep a cache that every question is
 * answered from, restarted with back-off when a watch fails (a 410 Gone
 * relists). Until the pod cache has synced, a replica's liveness is
 * "unknown" and the controller does nothing to it.
 *
 * Placement is the cluster's: every replica is admitted and its pod created,
 * and the scheduler places it (a pod no node can take yet waits, with the
 * scheduler's reason, while a cluster autoscaler adds a node). Capacity, for
 * display, is the nodes' allocatable `nvidia.com/gpu` by GPU kind (the kind's
 * node selector) of nodes that are Ready and schedulable. The model is fetched
 * in the pod (its init container), so the gateway only resolves it. The
 * gateway dials the pods' IPs.
 */
import { DEFAULTS } from '../../defaults.js';
import { KubeConfig, makeInformer, type CoreV1Api, type V1Node, type V1Pod } from '@kubernetes/client-node';
import type { GpuType } from '../../domain/instance-catalog.js';
import { GPU_TYPES } from '../../domain/instance-catalog.js';
import { Nudge } from '../../util/nudge.js';
import { sharedEngineClient, type EngineClient } from '../../engine-client/engine-client.js';
import {
  RuntimeUnavailableError,
  type EngineHealth,
  type Liveness,
  type PendingLaunch,
  type ReplicaLaunch,
  type ReplicaObservation,
  withoutModelSteps,
  type ReplicaRef,
  type Runtime,
} from '../runtime.js';
import { disruption, viewPod } from './pod-status.js';
import { LABELS, podName, replicaPod } from './pod-spec.js';
import { pooledCoreApi } from './api-client.js';
import { apiFailure } from './api-failure.js';
import { UncertainCreates } from './uncertain-creates.js';
import { PodLogs } from './pod-logs.js';
import { EndpointSecrets, isStatus } from './endpoint-secrets.js';
import type { KubernetesSettings } from './settings.js';
import { StepDeadlines } from './step-deadlines.js';
import { Watched, watchPath } from './watched.js';
import { PodWatches } from './pod-watches.js';

export interface KubernetesRuntimeOptions {
  settings: KubernetesSettings;
  /** @default loaded from KUBECONFIG or the in-cluster service account */
  kubeConfig?: KubeConfig;
  /** HF_ENDPOINT and HF_TOKEN, for the pods' model fetcher. */
  hubEndpoint: string;
  hubToken?: string;
  /** WANDB_BASE_URL and WANDB_API_KEY, for the pods' model fetcher of W&B registry artifacts. */
  wandbBaseUrl?: string;
  wandbApiKey?: string;
  /** ENGINE_COMMAND: an external engine in the image instead of the built-in one. */
  engineTemplate?: string;
  threads?: number;
  /** How long an engine, once its container runs, may take to become ready. @default 300000 */
  startTimeoutMs?: number;
  log: (message: string, error?: unknown) => void;
  /** The client its health checks go through. @default the process's (sharedEngineClient) */
  engines?: EngineClient;
}

/** The engine's address at a pod's IP: an IPv6 one (a single-stack IPv6 cluster's, EKS's) in brackets, as URLs write it. */
export const engineAddress = (podIP: string, port: number) => `http://${podIP.includes(':') ? `[${podIP}]` : podIP}:${port}`;

/** How long a pod created here may stay out of the informer's cache before it counts as gone. */
const UNSEEN_MS = 60_000;

export class KubernetesRuntime implements Runtime {
  readonly name = 'kubernetes';
  readonly node: string;
  readonly namespace: string;
  readonly adoptablePool: string;
  private readonly api: CoreV1Api;
  private readonly createPod: (namespace: string, pod: V1Pod) => Promise<void>;
  private readonly closeApi: () => void;
  private readonly pods: PodWatches;
  private readonly nodes: Watched<V1Node>;
  private readonly secrets: EndpointSecrets;
  private readonly uncertain: UncertainCreates;
  private readonly logs: PodLogs;
  /** Stops waiting for a pod's removal, by pod name. */
  private readonly waiting = new Map<string, Nudge>();
  /** The starting pods' step deadlines: see `observe`. */
  private readonly deadlines: StepDeadlines;
  /** Pods this runtime created that its informer has not shown yet, since when (by pod name): not gone, just not seen. */
  private readonly unseen = new Map<string, number>();
  private listener: ((endpointId: string) => void) | undefined;
  /** Each pod's view (`viewPod`) as its last watch event showed it, by pod name: an event that leaves it alone is not told. */
  private readonly views = new Map<string, string>();

  constructor(private readonly options: KubernetesRuntimeOptions) {
    const kc = options.kubeConfig ?? defaultKubeConfig();
    this.namespace = options.settings.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
    this.node = `kubernetes/${this.namespace}`;
    this.adoptablePool = `kubernetes:${kc.getCurrentCluster()?.server ?? ''}/${this.namespace}`;
    this.deadlines = new StepDeadlines(options.settings, options.startTimeoutMs ?? DEFAULTS.replicaStartTimeoutMs, options.log);
    // One keep-alive connection pool for every call (makeApiClient's clients open a connection per call).
    const pooled = pooledCoreApi(kc);
    this.api = pooled.api;
    this.createPod = pooled.createPod;
    this.closeApi = pooled.close;
    const podPath = `/api/v1/namespaces/${this.namespace}/pods`;
    this.pods = new PodWatches({
      namespace: this.namespace,
      make: (selector) =>
        makeInformer<V1Pod>(
          kc,
          watchPath(podPath),
          () => this.api.listNamespacedPod({ namespace: this.namespace, labelSelector: selector }),
          selector,
        ),
      log: options.log,
      onChange: (pod, verb) => this.podChanged(pod, verb),
      // A shard's watch synced (taken over, listed again): its endpoints are told once more, their pods now known (the
      // list's events came before, while the shard was still "unknown" to a pass).
      onSynced: (pods) => {
        const endpoints = new Set(pods.map((pod) => pod.metadata?.labels?.[LABELS.endpoint]));
        for (const endpointId of endpoints) if (endpointId) this.listener?.(endpointId);
      },
      // A shard handed over: its pods are followed by the gateway that holds them now.
      onDrop: (pods) => {
        for (const pod of pods) {
          const name = pod.metadata?.name ?? '';
          this.views.delete(name);
          this.deadlines.forget(name);
        }
      },
    });
    const nodeInformer = () => makeInformer<V1Node>(kc, watchPath('/api/v1/nodes'), () => this.api.listNode());
    this.nodes = new Watched(nodeInformer, 'node', options.log, () => {});
    this.secrets = new EndpointSecrets(this.api, this.namespace, { hubToken: options.hubToken, wandbApiKey: options.wandbApiKey });
    this.uncertain = new UncertainCreates(this.api, this.namespace, options.log);
    this.logs = new PodLogs(this.api, this.namespace, () => options.kubeConfig ?? defaultKubeConfig());
  }

  private podChanged(pod: V1Pod, verb: 'add' | 'update' | 'delete'): void {
    const name = pod.metadata?.name ?? '';
    this.uncertain.seen(pod, verb);
    if (verb === 'delete') this.deadlines.forget(name);
    this.waiting.get(name)?.poke();
    this.unseen.delete(name);
    // A change the controller cannot see (a condition's timestamp, an IP before readiness) asks for no pass.
    const view = verb === 'delete' ? undefined : JSON.stringify(viewPod(pod));
    if (view !== undefined && this.views.get(name) === view) return;
    if (view === undefined) this.views.delete(name);
    else this.views.set(name, view);
    const endpointId = pod.metadata?.labels?.[LABELS.endpoint];
    if (endpointId) this.listener?.(endpointId);
  }

  /**
   * Watches the pods of these shards alone from now on (src/domain/shards.ts): the controller's, those of the
   * endpoints it holds. Until called, every shard is watched.
   */
  watchShards(shards: ReadonlySet<number>): void {
    this.pods.watch(shards);
  }

  /** Starts the watches and waits (at most `timeoutMs`) for their first lists; until then liveness is unknown. */
  async open(timeoutMs = 30_000): Promise<void> {
    const first = Promise.all([this.pods.run(), this.nodes.run()]);
    await Promise.race([first, new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
  }

  async close(): Promise<void> {
    await Promise.all([this.pods.stop(), this.nodes.stop()]);
    this.closeApi();
  }

  /** Whether both caches hold a complete, current view. */
  get synced(): boolean {
    return this.pods.synced() && this.nodes.synced;
  }

  capacity(): Partial<Record<GpuType, number>> {
    const capacity: Partial<Record<GpuType, number>> = {};
    for (const node of this.nodes.informer.list()) {
      if (node.spec?.unschedulable) continue;
      if (node.status?.conditions?.find((c) => c.type === 'Ready')?.status !== 'True') continue;
      const gpus = Number(node.status?.allocatable?.['nvidia.com/gpu'] ?? 0);
      if (!Number.isFinite(gpus) || gpus <= 0) continue;
      const labels = node.metadata?.labels ?? {};
      for (const kind of GPU_TYPES) {
        const selector = this.options.settings.gpuPlacement[kind].nodeSelector;
        if (Object.entries(selector).every(([key, value]) => labels[key] === value)) capacity[kind] = (capacity[kind] ?? 0) + gpus;
      }
    }
    return capacity;
  }

  onChange(listener: (endpointId: string) => void): void {
    this.listener = listener;
  }

  /**
   * Creates the replica's pod (its endpoint's Secret first) and answers at once: the scheduler, the model's
   * download and the engine's load are observed through the informer from then on. A pod created before for the
   * same replica (a 409) is answered as it is, never a second.
   */
  async ensure(pending: ReplicaLaunch | PendingLaunch): Promise<ReplicaRef> {
    // The model is resolved here (its pinned commit and file); the pod's init container downloads it where it runs.
    const launch = 'model' in pending ? { ...withoutModelSteps(pending), ...(await pending.model.resolve()) } : pending;
    const name = podName(launch.replicaId);
    let asked = false;
    try {
      const owner = await this.secrets.ensure(launch.endpointId);
      const pod = replicaPod(launch, {
        settings: this.options.settings,
        namespace: this.namespace,
        owner: { name: owner.name, uid: owner.uid },
        hubEndpoint: this.options.hubEndpoint,
        hasHubToken: owner.hasHubToken,
        ...(this.options.wandbBaseUrl ? { wandbBaseUrl: this.options.wandbBaseUrl } : {}),
        hasWandbKey: owner.hasWandbKey,
        ...(this.options.engineTemplate ? { engineTemplate: this.options.engineTemplate } : {}),
        ...(this.options.threads ? { threads: this.options.threads } : {}),
      });
      try {
        asked = true;
        await this.createPod(this.namespace, pod);
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
        const existing = await this.api.readNamespacedPod({ name, namespace: this.namespace });
        if (existing.metadata?.labels?.[LABELS.replica] !== launch.replicaId) throw error;
      }
      if (!this.pods.get(name, launch.endpointId)) this.unseen.set(name, Date.now());
      return {
        replicaId: launch.replicaId,
        endpointId: launch.endpointId,
        address: null,
        locator: name,
        node: this.node,
        token: owner.token,
      };
    } catch (error) {
      const failure = apiFailure(error);
      // An outage once the create was sent: the pod may exist, with no replica to follow it.
      if (asked && failure instanceof RuntimeUnavailableError) this.uncertain.add(name);
      throw failure;
    }
  }

  /**
   * The replica's pod, when it exists and is not being deleted (see Runtime.adopt): in the informer's cache by its
   * name or its replica label, or created here a moment ago (its watch event not in yet); with its endpoint's token
   * (the Secret, read once per gateway).
   */
  async adopt(ref: ReplicaRef & { endpointId: string }): Promise<ReplicaRef | undefined> {
    if (!this.pods.synced(ref.endpointId) || this.elsewhere(ref)) return undefined;
    const named = podName(ref.replicaId);
    const pod = this.pods.get(named, ref.endpointId) ?? this.pods.findReplica(ref.replicaId, ref.endpointId);
    const created = this.unseen.get(named);
    const locator = pod ? pod.metadata?.name : created !== undefined && Date.now() - created < UNSEEN_MS ? named : undefined;
    if (!locator || pod?.metadata?.deletionTimestamp) return undefined;
    const owner = await this.secrets.ensure(ref.endpointId).catch((error: unknown) => Promise.reject(apiFailure(error)));
    return { replicaId: ref.replicaId, endpointId: ref.endpointId, address: null, locator, node: this.node, token: owner.token };
  }

  /**
   * The replica's pod as the informer last saw it (pod-status.ts), with its step's deadlines (step-deadlines.ts)
   * counted from when the pod began its step (its creation; its engine's start), or else when this runtime first saw
   * it there: unschedulable past the scheduling deadline, an engine not ready within the start timeout, or a step
   * the kubelet retries past the image pull deadline, it is reported dead.
   */
  observe(ref: ReplicaRef): ReplicaObservation {
    if (!this.pods.synced(ref.endpointId) || this.elsewhere(ref)) return { state: 'unknown' };
    const name = ref.locator ?? podName(ref.replicaId);
    const pod = this.pods.get(name, ref.endpointId);
    const view = pod ? viewPod(pod) : undefined;
    if (view?.kind !== 'progress') this.deadlines.forget(name);
    if (!view) {
      // Created here a moment ago, its watch event not in yet: it waits for the scheduler (for a minute at most).
      const created = this.unseen.get(name);
      if (created !== undefined && Date.now() - created < UNSEEN_MS) return { state: 'starting', phase: 'REQUESTING_VIRTUAL_MACHINE' };
      this.unseen.delete(name);
      return { state: 'dead', reason: "the replica's pod is gone", disrupted: true };
    }
    if (view.kind === 'ready') return { state: 'ready', address: engineAddress(view.podIP, this.options.settings.enginePort) };
    if (view.kind === 'failed') {
      // The cluster's own words are the operator's to read: the user sees the reason alone.
      if (view.detail) this.options.log(`pod ${name}: ${view.reason}: ${view.detail}`);
      return { state: 'dead', code: view.code, reason: view.reason };
    }
    if (view.kind === 'deleting') return { state: 'dead', reason: "the replica's pod was deleted", disrupted: true };
    if (view.kind === 'disrupted') return { state: 'dead', reason: view.reason, disrupted: true, evictedByNode: view.byNode };
    return this.deadlines.observe(name, view);
  }

  async stop(ref: ReplicaRef, graceMs: number): Promise<void> {
    const name = ref.locator ?? podName(ref.replicaId);
    this.deadlines.forget(name);
    this.unseen.delete(name);
    // Already being deleted (a drain's eviction, another gateway's stop, this one's): its grace is not cut short, and
    // it is not waited for (the scheduler counts its GPUs held until the kubelet has ended it).
    const cached = this.pods.synced(ref.endpointId) ? this.pods.get(name, ref.endpointId) : undefined;
    if (cached?.metadata?.deletionTimestamp) return;
    // Marked for disruption and still running (a node shutting down, an eviction about to delete it): deleted with its
    // own grace, so its answers in flight may finish, and not waited for.
    const disrupting =
      cached !== undefined && disruption(cached) !== undefined && !['Failed', 'Succeeded'].includes(cached.status?.phase ?? '');
    try {
      // At least a second: a grace of 0 is a force delete, which removes the pod from the API before the kubelet has
      // ended its processes, so that the scheduler counts their GPUs free while they still hold them.
      const gracePeriodSeconds = disrupting ? undefined : Math.max(1, Math.ceil(graceMs / 1000));
      await this.api.deleteNamespacedPod({ name, namespace: this.namespace, gracePeriodSeconds });
      if (disrupting) return;
    } catch (error) {
      if (isStatus(error, 404)) return;
      throw error;
    }
    // Gone once the kubelet has ended its processes (the informer sees the deletion).
    const nudge = new Nudge();
    this.waiting.set(name, nudge);
    try {
      const deadline = Date.now() + graceMs + 30_000;
      while (Date.now() < deadline && this.pods.synced(ref.endpointId) && this.pods.get(name, ref.endpointId)) {
        await nudge.wait(Math.min(1000, Math.max(0, deadline - Date.now())));
      }
    } finally {
      this.waiting.delete(name);
    }
  }

  liveness(ref: ReplicaRef): Liveness {
    if (!this.pods.synced(ref.endpointId) || this.elsewhere(ref)) return { kind: 'unknown' };
    const pod = this.pods.get(ref.locator ?? podName(ref.replicaId), ref.endpointId);
    // A pod does not vanish when its engine fails (restartPolicy Never keeps the failed pod): only a delete does.
    if (!pod) return { kind: 'dead', reason: 'its pod is gone', disrupted: true };
    const view = viewPod(pod);
    if (view.kind === 'failed') return { kind: 'dead', code: view.code, reason: view.reason };
    if (view.kind === 'deleting') return { kind: 'dead', reason: 'its pod is being deleted', disrupted: true };
    if (view.kind === 'disrupted') return { kind: 'dead', reason: view.reason, disrupted: true, evictedByNode: view.byNode };
    return { kind: 'alive' };
  }

  /**
   * Whether the replica runs in another namespace than this runtime's (a gateway of another pool placed it): its pod
   * is not in this runtime's cache, which tells nothing of it (as a local runtime knows nothing of another machine's).
   */
  private elsewhere(ref: Pick<ReplicaRef, 'node'>): boolean {
    return ref.node !== this.node;
  }

  health(ref: ReplicaRef, timeoutMs?: number): Promise<EngineHealth | undefined> {
    return (this.options.engines ?? sharedEngineClient()).health<EngineHealth>(ref, timeoutMs);
  }

  logTail(ref: Pick<ReplicaRef, 'replicaId' | 'locator'>): Promise<string> {
    return this.logs.tail(ref);
  }

  /** The engine container's log, as the kubelet keeps it (gone with the pod). */
  readLog(ref: Pick<ReplicaRef, 'replicaId' | 'locator'>, options: { tailLines: number }): Promise<string> {
    return this.logs.read(ref, options);
  }

  followLog(
    ref: Pick<ReplicaRef, 'replicaId' | 'locator'>,
    signal: AbortSignal,
    options?: { tailLines?: number },
  ): Promise<AsyncIterable<string>> {
    return this.logs.follow(ref, signal, options);
  }

  async reapOrphans(live: () => Promise<ReadonlySet<string>>): Promise<string[]> {
    // The pods of the watches synced now, each a complete view of its shard: another gateway reaps the other shards'.
    const running = this.pods.listSynced().filter((pod) => !pod.metadata?.deletionTimestamp);
    const keep = await live();
    const orphans = running.filter((pod) => !keep.has(pod.metadata?.labels?.[LABELS.replica] ?? ''));
    await Promise.all(
      orphans.map((pod) =>
        this.api.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: this.namespace, gracePeriodSeconds: 2 }).catch((error) => {
          if (!isStatus(error, 404)) this.options.log(`deleting the orphaned pod ${pod.metadata!.name!} failed`, error);
        }),
      ),
    );
    return orphans.map((pod) => pod.metadata?.labels?.[LABELS.replica] ?? pod.metadata!.name!);
  }

  /** The endpoint is gone: its Secret is deleted, and with it (garbage collection) any pod of it left behind. */
  async forgetEndpoint(endpointId: string): Promise<void> {
    await this.secrets.remove(endpointId);
  }
}

function defaultKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}
