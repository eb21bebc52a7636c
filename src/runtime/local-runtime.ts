/**
 * The default runtime: each replica is a child process on this machine,
 * running the built-in engine (or ENGINE_COMMAND) on a free loopback port.
 * Replicas are started detached, with their output in a log file, so that
 * they outlive a gateway restart and the next gateway can adopt them; a
 * small state file per replica lets it find (and reap) them.
 */
import { DEFAULTS } from '../defaults.js';
import { withoutGatewaySecrets } from '../config.js';
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { GpuType, InstanceOption } from '../domain/instance-catalog.js';
import type { Queryable } from '../storage/database.js';
import { admitOnMachine } from './machine-capacity.js';
import { reportedError } from './engine-report.js';
import { freePort } from '../storage/embedded-postgres.js';
import { engineCommand } from './engine-command.js';
import { sharedEngineClient, type EngineClient } from '../engine-client/engine-client.js';
import { followLogFile, localLogFile, readLogFile, readLogTail, watchForProtocolLine } from './engine-log-files.js';
import { Nudge } from '../util/nudge.js';
import {
  pidOf,
  readStateFiles,
  replicaProcessAlive,
  signalGroup,
  spawnDetached,
  type RecordedEngine,
  type StateFile,
} from './local-processes.js';

export { SPAWN_LINE_PREFIX, type RecordedEngine } from './local-processes.js';
import type { Inventory } from './gpu-inventory.js';
import {
  ReplicaStartError,
  type Admission,
  type EngineHealth,
  type Liveness,
  type PendingLaunch,
  type ReplicaLaunch,
  type ReplicaObservation,
  withoutModelSteps,
  type ReplicaRef,
  type Runtime,
} from './runtime.js';

export interface LocalRuntimeOptions {
  /** Directory for replica state files and logs. */
  dir: string;
  inventory: Inventory;
  /** Run the built-in engine on CPU only (no GPU was detected). */
  cpuOnly: boolean;
  /** ENGINE_COMMAND, when set. */
  engineTemplate?: string;
  /** How the built-in engine is run: the program and its first arguments. @default its source through tsx (engine-bundle.ts SOURCE_ENTRY; the app passes a bundle) */
  engineEntry?: readonly string[];
  threads?: number;
  /** How long a starting engine may take to answer its health check. @default 300000 */
  startTimeoutMs?: number;
  /** The pause before the next health check of a starting engine, after `elapsedMs` of waiting. @default healthPollDelay */
  healthPollDelay?: (elapsedMs: number) => number;
  /** Extra environment for engine processes. */
  env?: Record<string, string>;
  /** An engine that no request reaches for this long (no gateway polls it) drains and exits. @default never */
  engineIdleExitMs?: number;
  /** The client its health checks go through. @default the process's (sharedEngineClient) */
  engines?: EngineClient;
}

/** A replica whose start this runtime follows: what `observe` answers for it, and how its following ends. */
interface Followed {
  ref: ReplicaRef;
  observation: ReplicaObservation;
  abort: AbortController;
}

/**
 * How long to wait before the next health check of a starting engine, after
 * `elapsedMs` of waiting: every 20 ms for the first 2 s (a small model's
 * engine is ready within seconds, and until it listens each check is one
 * refused loopback connection), then backing off linearly to 150 ms at 5 s.
 * The built-in engine's ENGINE_READY line in its log cuts the wait short.
 */
export function healthPollDelay(elapsedMs: number): number {
  if (elapsedMs < 2000) return 20;
  return Math.min(150, Math.round(20 + ((elapsedMs - 2000) * 130) / 3000));
}

export class LocalRuntime implements Runtime {
  readonly name = 'local';
  readonly node = os.hostname();
  private readonly exited = new Map<number, number | null>();
  /** Replicas whose start this runtime follows (or followed: their last observation), by replica id. */
  private readonly followed = new Map<string, Followed>();
  private listener: ((endpointId: string) => void) | undefined;

  constructor(private readonly options: LocalRuntimeOptions) {}

  capacity(): Partial<Record<GpuType, number>> {
    return this.options.inventory;
  }

  admit(tx: Queryable, option: InstanceOption, count: number): Promise<Admission> {
    return admitOnMachine(tx, this.node, this.options.inventory, option, count);
  }

  private statePath(replicaId: string): string {
    return path.join(this.options.dir, `${replicaId}.json`);
  }

  private logPath(replicaId: string): string {
    return path.join(this.options.dir, `${replicaId}.log`);
  }

  onChange(listener: (endpointId: string) => void): void {
    this.listener = listener;
  }

  /**
   * Places the replica on this machine and answers at once. A pending launch's model step (the download into this
   * machine's cache, and its check) runs in this runtime's background, then the engine is spawned: until then the
   * ref has no locator, and `observe` tells the step (RESOLVING_MODEL, DOWNLOADING_MODEL), then the locator and
   * address it was spawned with. A launch whose model is known is spawned before `ensure` answers. Either way the
   * engine's load is followed in the background. A replica id this runtime already follows is answered as it is.
   */
  async ensure(launch: ReplicaLaunch | PendingLaunch): Promise<ReplicaRef> {
    const known = this.followed.get(launch.replicaId);
    if (known) return known.ref;
    // The engine answers only callers with this token (in its environment, not its arguments: `ps` shows those).
    const token = randomBytes(24).toString('base64url');
    const ref: ReplicaRef = {
      replicaId: launch.replicaId,
      endpointId: launch.endpointId,
      address: null,
      locator: null,
      node: this.node,
      token,
    };
    if (!('model' in launch)) {
      const spawned = await this.spawn(launch, ref);
      this.follow(this.entry(spawned.ref), spawned.nudge);
      return spawned.ref;
    }
    void this.provision(this.entry(ref, { state: 'starting', phase: 'RESOLVING_MODEL' }), launch);
    return ref;
  }

  /** Follows the replica from now on, as first observed (`follow` observes a spawned engine as it loads). */
  private entry(ref: ReplicaRef, observation: ReplicaObservation = { state: 'starting', phase: 'ENGINE_INITIALIZING' }): Followed {
    const entry: Followed = { ref, observation, abort: new AbortController() };
    this.followed.set(ref.replicaId, entry);
    return entry;
  }

  /** A followed replica's step changed: the endpoint's next pass reads it now. */
  private changed(entry: Followed, observation: ReplicaObservation): void {
    entry.observation = observation;
    if (!entry.abort.signal.aborted && entry.ref.endpointId) this.listener?.(entry.ref.endpointId);
  }

  /**
   * The model step, then the engine. Stopping the replica aborts the download (what it wrote resumes later); a
   * failure is observed as the replica's death, with the step's error as its cause (its code and advice kept).
   */
  private async provision(entry: Followed, launch: PendingLaunch): Promise<void> {
    const { signal } = entry.abort;
    try {
      const model = await launch.model.download(signal, () => this.changed(entry, { state: 'starting', phase: 'DOWNLOADING_MODEL' }));
      signal.throwIfAborted();
      if (model === null) {
        // No longer wanted (its row ended meanwhile): nothing is spawned.
        if (this.followed.get(entry.ref.replicaId) === entry) this.followed.delete(entry.ref.replicaId);
        return;
      }
      const spawned = await this.spawn({ ...withoutModelSteps(launch), ...model }, entry.ref);
      // Stopped while it was spawned: the engine goes too.
      if (signal.aborted) return void (await this.kill(spawned.ref, 0));
      entry.ref = spawned.ref;
      this.follow(entry, spawned.nudge);
    } catch (error) {
      if (signal.aborted) return;
      const code = error instanceof ReplicaStartError ? error.code : undefined;
      const reason = error instanceof Error ? error.message : String(error);
      this.changed(entry, { state: 'dead', ...(code ? { code } : {}), reason, cause: error });
    }
  }

  /** Spawns the engine detached, with its output in its log, and writes its state file; answers its ref and what wakes its health checks. */
  private async spawn(launch: ReplicaLaunch, placing: ReplicaRef): Promise<{ ref: ReplicaRef; nudge: Nudge }> {
    await mkdir(this.options.dir, { recursive: true });
    const port = await freePort();
    const command = engineCommand(launch, port, {
      ...(this.options.engineTemplate ? { template: this.options.engineTemplate } : {}),
      ...(this.options.threads ? { threads: this.options.threads } : {}),
      ...(this.options.engineEntry ? { entry: this.options.engineEntry } : {}),
      cpuOnly: this.options.cpuOnly,
    });
    const { child, pid } = await spawnDetached(command.file, command.args, this.logPath(launch.replicaId), {
      ...withoutGatewaySecrets(process.env),
      ...this.options.env,
      REPLICA_ID: launch.replicaId,
      ...(placing.token ? { ENGINE_TOKEN: placing.token } : {}),
      ...(this.options.engineIdleExitMs !== undefined ? { ENGINE_IDLE_EXIT_MS: String(this.options.engineIdleExitMs) } : {}),
    });
    // The wait for the health check ends early when the engine writes its protocol line or exits.
    const nudge = new Nudge();
    child.once('exit', (code) => {
      this.exited.set(pid, code);
      nudge.poke();
      // A serving engine that dies: its endpoint's next pass comes now (replaced sooner; see the crash watch).
      this.listener?.(launch.endpointId);
    });
    child.unref();
    const address = `http://127.0.0.1:${port}`;
    const ref: ReplicaRef = { ...placing, address, locator: String(pid) };
    const state: StateFile = { replicaId: launch.replicaId, endpointId: launch.endpointId, pid, address };
    try {
      await writeFile(this.statePath(launch.replicaId), JSON.stringify(state));
    } catch (error) {
      await this.kill(ref, 0);
      throw error;
    }
    return { ref, nudge };
  }

  /**
   * A replica this process placed whose row lost the write of it (Runtime.adopt), as followed here: its engine's pid and
   * address once spawned, else no locator while its model step runs (its token: the controller records that and follows
   * the start, and the row records the engine once it is spawned). A failed start too, as a failed Pod is: the
   * controller tells its failure. Undefined for one stopped, and for one another gateway process placed (its engine is
   * found by its state file).
   */
  async adopt(ref: ReplicaRef & { endpointId: string }): Promise<ReplicaRef | undefined> {
    const entry = ref.node === this.node ? this.followed.get(ref.replicaId) : undefined;
    if (!entry || entry.abort.signal.aborted) return undefined;
    return { ...entry.ref, endpointId: ref.endpointId };
  }

  /**
   * What this runtime sees of the replica: its start as followed here, or, for an engine a gateway that stopped
   * spawned (detached, it outlived it), a start followed from now on (its health checked until it answers).
   */
  observe(ref: ReplicaRef): ReplicaObservation {
    if (ref.node !== this.node) return { state: 'unknown' };
    const entry = this.followed.get(ref.replicaId) ?? (this.isAlive(ref) ? this.follow(this.entry(ref), new Nudge()) : undefined);
    if (!entry) return { state: 'dead', reason: this.exitReason(ref) };
    if (entry.observation.state === 'ready' && !this.isAlive(entry.ref)) return { state: 'dead', reason: this.exitReason(entry.ref) };
    return entry.observation;
  }

  private exitReason(ref: ReplicaRef): string {
    const pid = pidOf(ref);
    const code = pid === null ? undefined : this.exited.get(pid);
    return `the engine process exited${code === undefined ? '' : ` (exit code ${code ?? 'unknown'})`}`;
  }

  /** Checks the engine's health in the background until it answers (then 'ready') or fails (then 'dead', stopped). */
  private follow(entry: Followed, nudge: Nudge): Followed {
    const { ref } = entry;
    const placed = { locator: ref.locator!, address: ref.address! };
    this.changed(entry, { state: 'starting', phase: 'ENGINE_INITIALIZING', ...placed });
    const watcher = watchForProtocolLine(this.logPath(ref.replicaId), nudge);
    this.waitHealthy(ref, nudge, entry.abort.signal)
      .then(() => this.changed(entry, { state: 'ready', ...placed }))
      .catch(async (error: unknown) => {
        if (entry.abort.signal.aborted) return;
        const failure = error instanceof ReplicaStartError ? error : new ReplicaStartError('WORKLOAD_INIT_UNKNOWN_ERROR', String(error));
        await this.kill(ref, 0).catch(() => {});
        this.changed(entry, { state: 'dead', code: failure.code, reason: failure.message });
      })
      .finally(() => watcher.close());
    return entry;
  }

  /**
   * Checks the engine's health until it answers: every 20 ms at first, backing
   * off to 150 ms (healthPollDelay), and at once when `nudge` is poked (the
   * engine printed ENGINE_READY or ENGINE_ERROR, or exited). Before the
   * engine listens, each check is one refused loopback connection.
   */
  private async waitHealthy(handle: ReplicaRef, nudge: Nudge, abort?: AbortSignal): Promise<void> {
    const timeoutMs = this.options.startTimeoutMs ?? DEFAULTS.replicaStartTimeoutMs;
    const started = Date.now();
    const deadline = started + timeoutMs;
    while (Date.now() < deadline) {
      if (abort?.aborted) throw new ReplicaStartError('WORKLOAD_INIT_UNKNOWN_ERROR', 'the start was cancelled');
      if (!this.isAlive(handle)) throw await this.startFailure(handle);
      const health = await this.health(handle, 1000);
      if (health?.status === 'ok') return;
      const pause = (this.options.healthPollDelay ?? healthPollDelay)(Date.now() - started);
      await nudge.wait(Math.min(pause, Math.max(0, deadline - Date.now())), abort);
    }
    throw new ReplicaStartError(
      'WORKLOAD_INIT_GRPC_ERROR',
      `the engine did not answer its health check within ${Math.round(timeoutMs / 1000)} s`,
    );
  }

  /** Why a starting engine exited: its ENGINE_ERROR line when it wrote one. */
  private async startFailure(handle: ReplicaRef): Promise<ReplicaStartError> {
    // The exit event can trail the process's death by a moment; the log is complete by then.
    await sleep(50);
    // An unreadable line is treated like no line.
    const reported = reportedError(await this.logTail(handle));
    if (reported) return new ReplicaStartError(reported.code, reported.message ?? 'the engine failed to load the model');
    const code = this.exited.get(pidOf(handle) ?? 0);
    return new ReplicaStartError(
      'WORKLOAD_INIT_GRPC_ERROR',
      `the engine exited before answering its health check (exit code ${code ?? 'unknown'})`,
    );
  }

  async stop(handle: ReplicaRef, graceMs: number): Promise<void> {
    const entry = this.followed.get(handle.replicaId);
    entry?.abort.abort();
    this.followed.delete(handle.replicaId);
    // A row that has not recorded its engine yet (spawned after its model step): the engine as this runtime spawned it.
    await this.kill(handle.locator === null && entry?.ref.locator ? entry.ref : handle, graceMs);
  }

  /** Cuts the model steps under way (their replicas are left starting, for the next gateway to judge); engines keep running. */
  async close(): Promise<void> {
    for (const entry of this.followed.values()) if (entry.ref.locator === null) entry.abort.abort();
  }

  /** SIGTERM to the engine's process group, SIGKILL after `graceMs`; its state file goes. */
  private async kill(handle: ReplicaRef, graceMs: number): Promise<void> {
    const pid = pidOf(handle);
    if (pid !== null && this.isAlive(handle)) {
      signalGroup(pid, 'SIGTERM');
      const deadline = Date.now() + graceMs;
      while (this.isAlive(handle) && Date.now() < deadline) await sleep(50);
      if (this.isAlive(handle)) signalGroup(pid, 'SIGKILL');
      while (this.isAlive(handle)) await sleep(20);
    }
    await rm(this.statePath(handle.replicaId), { force: true });
  }

  /** Whether the replica's engine process runs on this machine (false for another machine's replica or an unknown pid). */
  isAlive(handle: Pick<ReplicaRef, 'replicaId' | 'locator' | 'node'>): boolean {
    const pid = pidOf(handle);
    if (pid === null || handle.node !== this.node) return false;
    if (this.exited.has(pid)) return false;
    return replicaProcessAlive(pid, handle.replicaId);
  }

  /** Another machine's replica is not this runtime's to judge: its own gateway watches it. */
  liveness(handle: ReplicaRef): Liveness {
    if (handle.node !== this.node) return { kind: 'unknown' };
    return this.isAlive(handle) ? { kind: 'alive' } : { kind: 'dead' };
  }

  health(handle: ReplicaRef, timeoutMs?: number): Promise<EngineHealth | undefined> {
    return (this.options.engines ?? sharedEngineClient()).health<EngineHealth>(handle, timeoutMs);
  }

  logTail(ref: Pick<ReplicaRef, 'replicaId'>): Promise<string> {
    return readLogTail(this.logPath(ref.replicaId));
  }

  /** The replica's log file (engine-log-files.ts); another machine's replica keeps its log there. */
  async readLog(ref: Pick<ReplicaRef, 'replicaId' | 'node'>, options: { tailLines: number }): Promise<string> {
    return readLogFile(localLogFile(this.options.dir, ref, this.node), options);
  }

  async followLog(
    ref: Pick<ReplicaRef, 'replicaId' | 'node'>,
    signal: AbortSignal,
    options?: { tailLines?: number },
  ): Promise<AsyncIterable<string>> {
    return followLogFile(localLogFile(this.options.dir, ref, this.node), signal, options);
  }

  /** The engines this runtime started and has not stopped, as its state files under `dir` record them (no database needed). */
  recorded(): Promise<RecordedEngine[]> {
    return readStateFiles(this.options.dir);
  }

  async reapOrphans(live: () => Promise<ReadonlySet<string>>): Promise<string[]> {
    const reaped: string[] = [];
    const recorded = await this.recorded();
    const keep = await live();
    for (const state of recorded) {
      if (keep.has(state.replicaId)) continue;
      await this.stop({ replicaId: state.replicaId, address: state.address, locator: String(state.pid), node: this.node }, 2000);
      reaped.push(state.replicaId);
    }
    return reaped;
  }
}
