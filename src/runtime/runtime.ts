/**
 * Where replicas run. The seam is level-triggered: the controller asks a
 * runtime to place a replica (`ensure`, which answers once it is placed,
 * never after a download or an engine's load), reads what the runtime sees
 * of it on each pass (`observe`: its step, address, failure code and
 * reason), and stops it; it never spawns processes or creates pods itself,
 * and no call it makes waits for a replica to start. The local runtime (child processes
 * on this machine) is the default; the Kubernetes runtime places each replica
 * in a pod. Both implement this shape, and the controller, the router and the
 * autoscaler work alike whichever runs.
 *
 * A replica is referred to by a `ReplicaRef`: its id, its endpoint, and a
 * locator that only the runtime reads (a process id, a pod's name). Placement
 * (which machine, which GPUs: `admit`, then `ensure`) and the model's
 * provisioning (`ModelSteps`: downloaded to this machine's cache before the
 * engine is spawned, or fetched in the pod) happen behind this seam; the
 * controller reads the phases and reasons the runtime reports, and never
 * counts GPUs or downloads a model itself.
 */
import type { GpuType, InstanceOption } from '../domain/instance-catalog.js';
import type { EndpointErrorCode } from '../domain/lifecycle.js';
import type { Queryable } from '../storage/database.js';

/** What one replica's engine needs to start. */
export interface ReplicaLaunch {
  replicaId: string;
  endpointId: string;
  versionIndex?: number;
  /** Local model file (GGUF) when one was downloaded to this machine; null when the runtime (or the engine) fetches the model. */
  modelPath: string | null;
  /** The hub repository (or registry artifact) and its pinned revision. */
  modelRepo: string;
  modelRevision: string | null;
  /** The file within the repository, its digest and size, when resolved: what a runtime that downloads the model fetches. */
  modelFile?: { path: string; sha256: string | null; size: number } | undefined;
  gpuType: GpuType;
  numGpu: number;
  maxBatchSize: number;
  /** Tokens of context per sequence: the endpoint's max_token_count. */
  contextSize: number;
  maxInputLength: number;
  addSpecialTokens: boolean;
  skipSpecialTokens: boolean;
}

/** What a replica's model step gives its launch: the model, where it is, and the token limits that follow it. */
export type LaunchModel = Pick<ReplicaLaunch, 'modelPath' | 'modelRepo' | 'modelRevision' | 'modelFile' | 'contextSize' | 'maxInputLength'>;

/**
 * A replica's model step, which the runtime runs where its replicas' models are provisioned. Each step resolves
 * the version's model (the hub's metadata, the registry's), reports each retry of a hub call, and answers the
 * launch's model; `download` also downloads it into this machine's cache and checks it against the version's
 * settings (the built-in engine's GGUF), writing the download's progress to the endpoint as it goes.
 */
export interface ModelSteps {
  /** Resolved, not downloaded: for a runtime that fetches the model where the replica runs (a pod's init container). */
  resolve(): Promise<LaunchModel>;
  /**
   * Resolved, downloaded to this machine and checked: for a runtime whose engines read this machine's disk.
   * `onDownloadStart` is called when bytes begin to move (never for a cached file). Aborted by `signal` (the
   * replica stopped: what the download wrote resumes later). Null when the replica is no longer wanted (its row
   * ended meanwhile): nothing is started.
   */
  download(signal: AbortSignal, onDownloadStart: () => void): Promise<LaunchModel | null>;
}

/** A replica to place whose model step has not run yet: the runtime runs it (`model`) as it provisions models. */
export type PendingLaunch = Omit<ReplicaLaunch, keyof LaunchModel> & { model: ModelSteps };

/** A pending launch without its model step: what is known of the replica before its model is. */
export function withoutModelSteps(launch: PendingLaunch): Omit<ReplicaLaunch, keyof LaunchModel> {
  const { model: _steps, ...replica } = launch;
  return replica;
}

/**
 * A replica as the controller refers to it. The locator is the runtime's own
 * (opaque to everyone else): the local runtime's process id, a pod's name.
 */
export interface ReplicaRef {
  replicaId: string;
  /** The endpoint it serves: what the runtime names when it tells of a change (`onChange`). */
  endpointId?: string;
  /** Base URL of its OpenAI-compatible server, e.g. http://127.0.0.1:41234; null until it is known. */
  address: string | null;
  locator: string | null;
  /** The machine (or pool) the replica was placed in. */
  node: string;
  /** The engine's token, sent as a bearer token on every call (engines started before tokens have none). */
  token?: string;
}

/** The engine's own account of its load, from GET /health. */
export interface EngineHealth {
  status: string;
  active: number;
  queued: number;
  maxBatchSize?: number;
  /** Sequences the engine decodes at once, when fewer than maxBatchSize (the built-in engine: at most 256). */
  sequences?: number;
  totalRequests?: number;
  lastRequestAt?: string | null;
  /** The built-in engine: the llama.cpp backend it runs on ('cpu' also when a GPU was wanted and none was usable). */
  backend?: 'cuda' | 'vulkan' | 'metal' | 'cpu';
  /** The built-in engine: started without --cpu. `gpuWanted && backend === 'cpu'`: it wanted a GPU and serves on the CPU. */
  gpuWanted?: boolean;
  /** The built-in engine: layers on the GPU (0 on the CPU), of totalLayers (the GGUF's block_count + the output layer). */
  gpuLayers?: number;
  totalLayers?: number;
  /** The built-in engine: the GPU devices llama.cpp sees (empty on the CPU). */
  gpuDevices?: string[];
}

/** A failure to start, with the code the endpoint reports. */
export class ReplicaStartError extends Error {
  constructor(
    readonly code: EndpointErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ReplicaStartError';
  }
}

/** An engine log this runtime cannot read from here; the message says why, in words a user can act on. */
export class EngineLogUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EngineLogUnavailable';
  }
}

/**
 * What the runtime knows of a replica now: its engine runs ('alive'), it has
 * ended ('dead', with why when the runtime knows: an OOM kill is reported
 * apart), or the runtime cannot tell yet ('unknown': its cache has not synced,
 * or the replica runs where this runtime cannot see). Nothing is done to a
 * replica whose liveness is unknown. `disrupted`: the replica did not fail, the
 * cluster took it away (an eviction, a preemption, a node drained or lost, a
 * delete the gateway did not ask for): it is replaced, and it is no death for
 * the crash policy. `evictedByNode`: its node evicted it under its own pressure
 * (memory, disk), which the replica may have caused: its replacement waits a
 * back-off, as a death's does, so that a replica that fills its node is not
 * started again at once, forever.
 */
export type Liveness =
  | { kind: 'alive' }
  | { kind: 'unknown' }
  | { kind: 'dead'; code?: EndpointErrorCode; reason?: string; disrupted?: boolean; evictedByNode?: boolean };

/**
 * A step of a start the runtime reports: the first replica's steps are the endpoint's phases. RESOLVING_MODEL (the
 * model's source resolved, or its file found in this machine's cache) shows as DOWNLOADING_MODEL on a first start,
 * while a wake keeps ENGINE_INITIALIZING unless bytes move.
 */
export interface StartProgress {
  phase: 'REQUESTING_VIRTUAL_MACHINE' | 'RESOLVING_MODEL' | 'DOWNLOADING_MODEL' | 'ENGINE_INITIALIZING';
  /** Why it waits, in words a user can act on (the scheduler's message, for one). */
  reason?: string;
}

/**
 * What the runtime sees of a placed replica now: still starting (the step it is at, and why it waits), ready to
 * serve (its engine answers its health check, at `address`), ended ('dead': a failed start or a crash, with the
 * endpoint's error code and the reason when the runtime knows them), or not known ('unknown': a cache not synced,
 * another machine's replica). Nothing is done to a replica whose state is unknown.
 */
export type ReplicaObservation =
  | { state: 'unknown' }
  | ({ state: 'starting' } & StartProgress & Placed)
  | ({ state: 'ready'; address: string } & Placed)
  | {
      state: 'dead';
      code?: EndpointErrorCode;
      reason?: string;
      /** The error that ended a start in the runtime's own step (a model that failed to download), as it was thrown. */
      cause?: unknown;
      /** The cluster took it away (see Liveness): its start is not a failure, a later pass starts another. */
      disrupted?: boolean;
      evictedByNode?: boolean;
    };

/**
 * Where a replica placed without a locator (its model step ran first) was started: its locator and, once known,
 * its address, for the controller to record in the replica's row.
 */
interface Placed {
  locator?: string;
  address?: string;
}

/**
 * The runtime's own control plane could not be reached (a Kubernetes API server down, answering 5xx or 429): like a
 * database outage, this is not the endpoint's failure. A replica already placed is left for the next pass to follow.
 */
export class RuntimeUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RuntimeUnavailableError';
  }
}

/**
 * How many of the replicas asked for may be placed now, and the pool they go to; when fewer than asked, why the others
 * wait (in words a user can act on).
 */
export interface Admission {
  admitted: number;
  node: string;
  /** Set when fewer were admitted than asked. */
  reason?: string;
}

export interface Runtime {
  readonly name: string;
  /** The pool this runtime places replicas in (the local runtime: this machine's hostname). */
  readonly node: string;
  /**
   * Where another gateway can adopt this runtime's replicas, when one can: gateways of the same value can (the
   * Kubernetes runtime: its cluster's API server and namespace), and hand endpoints over to each other (see
   * src/controller/lease-share.ts). Absent: none can while this process runs (the local runtime: an engine is a child
   * of the gateway that started it, which alone sees it exit).
   */
  readonly adoptablePool?: string;
  /**
   * Follows only the replicas of these shards (src/domain/shards.ts) from now on: the gateways of an adoptable pool
   * divide its shards (lease-share.ts), each taking the endpoints of its own, and tell the runtime which shards hold
   * the endpoints they hold; an endpoint of a shard not followed here is "unknown" to it. Until called, every shard
   * is followed. Absent: the runtime follows what this process placed (the local runtime), and endpoints are shared
   * by count.
   */
  watchShards?(shards: ReadonlySet<number>): void;
  /** GPUs (or CPU-backed slots) of each kind this runtime offers in its pool now. */
  capacity(): Partial<Record<GpuType, number>>;
  /**
   * Room for up to `count` more replicas of `option`, asked inside the transaction that then writes their rows (`tx`).
   * The local runtime counts this machine's GPUs (or CPU slots) against the live replicas on it, for every gateway
   * that shares the machine; without room the start waits, with the reason. A runtime without `admit` admits every
   * replica, in its pool (`node`), and their rows are written in one statement: the Kubernetes runtime, whose
   * cluster's scheduler places each Pod (a Pod no node can take yet is observed waiting for one,
   * REQUESTING_VIRTUAL_MACHINE with the scheduler's reason, while a cluster autoscaler adds a node).
   */
  admit?(tx: Queryable, option: InstanceOption, count: number): Promise<Admission>;
  /**
   * Places the replica (a process spawned, a pod created) and answers as soon as it is placed: it never waits for
   * a download or for the engine to load; `observe` follows it from there. A pending launch's model step runs as
   * the runtime provisions models: the Kubernetes runtime resolves the model before it creates the pod, whose init
   * container downloads it; the local runtime downloads it in its own background, then spawns the engine (the ref
   * it answers has no locator until then). Idempotent: a replica id already placed is answered as it is, never
   * placed twice. Throws ReplicaStartError when the replica cannot be placed as asked (a model step's error as it
   * was thrown), RuntimeUnavailableError when the runtime's control plane cannot be reached.
   */
  ensure(launch: ReplicaLaunch | PendingLaunch): Promise<ReplicaRef>;
  /**
   * A starting replica whose row records no locator, though this runtime may have placed it: `ensure` answered and
   * the write of its answer failed (the database away for a moment, a connection broken), or the gateway stopped
   * between the two. Answers the replica as `ensure` did (its locator, its engine's token) when this runtime finds it
   * placed, from its own state (the Kubernetes runtime: its Pod in the informer's cache, by its deterministic name or
   * its replica label, never a list; the local runtime: a replica this gateway process placed and has not stopped, its
   * engine's pid once spawned, no locator but its token while its model step runs), so that the controller records it
   * and follows its start rather than stopping it unseen and placing another. Undefined when it finds none: never
   * placed, gone, being deleted, placed by another process of the local runtime, or not known yet (a cache not synced).
   * Throws RuntimeUnavailableError when its control plane cannot be reached. Absent: the runtime finds no replica by
   * its id alone.
   */
  adopt?(ref: ReplicaRef & { endpointId: string }): Promise<ReplicaRef | undefined>;
  /**
   * What the runtime sees of a placed replica now, from its own state (an informer's cache, the processes it
   * follows): no call to anything. A replica placed by another process (a gateway that stopped) is followed from
   * its first observation.
   */
  observe(ref: ReplicaRef): ReplicaObservation;
  /** Tells `listener` of each change the runtime sees in a replica of an endpoint (its next pass reads it at once). */
  onChange(listener: (endpointId: string) => void): void;
  /** Stops gracefully (in-flight requests drain), then forcefully after `graceMs`. */
  stop(ref: ReplicaRef, graceMs: number): Promise<void>;
  liveness(ref: ReplicaRef): Liveness;
  health(ref: ReplicaRef, timeoutMs?: number): Promise<EngineHealth | undefined>;
  /** The last lines the replica wrote, for diagnosing a failure (never shown to users). */
  logTail(ref: Pick<ReplicaRef, 'replicaId' | 'locator'>): Promise<string>;
  /**
   * The engine's log: its last `tailLines` lines (at most), as the engine wrote them. Throws
   * EngineLogUnavailable when this runtime cannot read it here (another machine's replica, a pod gone).
   */
  readLog(ref: Pick<ReplicaRef, 'replicaId' | 'locator' | 'node'>, options: { tailLines: number }): Promise<string>;
  /**
   * The log's last `tailLines` lines (none by default), then what the engine writes from then on, in chunks of
   * whole lines, with no gap between the two, until `signal` aborts (or the log ends: a pod's, with its container).
   * Throws EngineLogUnavailable when it answers, never from the iterable, where the log cannot be followed.
   */
  followLog(
    ref: Pick<ReplicaRef, 'replicaId' | 'locator' | 'node'>,
    signal: AbortSignal,
    options?: { tailLines?: number },
  ): Promise<AsyncIterable<string>>;
  /**
   * Stops replicas of this runtime's pool that no live replica row owns (not in what `live` answers); answers their
   * ids. What runs is read before `live` is asked: a replica's row is written before it is placed, so one placed by
   * another gateway meanwhile has its row in the answer and is not taken for an orphan.
   */
  reapOrphans(live: () => Promise<ReadonlySet<string>>): Promise<string[]>;
  /** The endpoint was deleted: what the runtime keeps for it (a Kubernetes Secret) goes, and anything of it left behind. */
  forgetEndpoint?(endpointId: string): Promise<void>;
  /** Releases what the runtime holds (watches, timers); replicas keep running. */
  close?(): Promise<void>;
}
