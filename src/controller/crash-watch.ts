/**
 * Watching an endpoint's replicas, wherever the runtime placed them (the
 * lease holder watches them all; a replica whose liveness the runtime cannot
 * tell is left alone): a dead engine's replica is marked FAILED, a replica
 * left DRAINING by a process that died is stopped, one left STARTING is kept
 * for its start to be resumed when it runs what the endpoint wants (else
 * stopped), and the crash
 * policy (crash-policy.ts) decides whether a dead engine is replaced now,
 * after a back-off, or whether the endpoint fails.
 */
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { RuntimeUnavailableError, type EngineHealth, type ReplicaRef, type Runtime } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import { KEEP_DESIRED } from '../storage/endpoints-repository.js';
import { failuresSince } from '../storage/replicas-repository.js';
import type { StatementBatches } from '../storage/statement-batches.js';
import { CRASH_COUNT_RESETS, decideAfterDeaths, restartDelayMs, type CrashPolicy, type RecentDeaths } from './crash-policy.js';
import type { EndpointWrites } from './endpoint-writes.js';
import { refOf, type ReplicaStopper } from './replica-stopper.js';

/** The last error of a replica whose engine died while it ran (a death, as the crash policy counts them). */
export const ENGINE_EXITED = 'the engine process exited';
/** How the last error of a replica the cluster took away begins (no death: see Liveness). */
export const DISRUPTED = 'disrupted';
/**
 * Whether a replica left STARTING by a process that stopped is taken over where it is (its start resumed) rather
 * than stopped: it was placed (the runtime knows where), and it runs the version the endpoint wants, running.
 */
export function resumable(endpoint: EndpointRecord, replica: ReplicaRecord): boolean {
  return replica.locator !== null && stillWanted(endpoint, replica);
}

/** Whether the endpoint still wants this starting replica (running, of its current version), placed or not. */
function stillWanted(endpoint: EndpointRecord, replica: ReplicaRecord): boolean {
  return (
    replica.state === 'STARTING' &&
    !endpoint.deleted &&
    endpoint.desiredState === 'RUNNING' &&
    replica.versionIndex === endpoint.current.versionIndex
  );
}

/** How long one health check of a serving engine may take before it counts as unanswered. */
const HEALTH_TIMEOUT_MS = 2000;

export class CrashWatch {
  /** Serving replicas of this node whose engine has not answered its health checks, since when. */
  private readonly unanswered = new Map<string, { endpointId: string; since: number }>();
  /** This pass's health answers, by endpoint then replica id, for the autoscaler to read instead of asking again (`takeHealth`). */
  private readonly answers = new Map<string, Map<string, EngineHealth | undefined>>();
  /** Abandoned replicas whose liveness this runtime has not been able to tell, since when (policy.unknownMs). */
  private readonly unknownSince = new Map<string, { endpointId: string; since: number }>();
  /** When each endpoint's replicas were evicted by their nodes, within the crash window (`evictedByNode`). */
  private readonly evictions = new Map<string, number[]>();
  /**
   * Each serving replica's last health answer and when it was asked, by endpoint then replica id: a pass that comes
   * sooner than `healthFreshMs` reads it.
   */
  private readonly lastHealth = new Map<string, Map<string, { at: number; health: EngineHealth | undefined }>>();

  constructor(
    private readonly sql: Sql,
    /** The replicas' moves go through it (with the other moves of the same turn). */
    private readonly batches: StatementBatches,
    private readonly runtime: Runtime,
    private readonly writes: EndpointWrites,
    private readonly stopper: ReplicaStopper,
    private readonly policy: CrashPolicy,
    /**
     * The starts this process drives (replica-starter.ts): whether it is starting the replica right now (any other
     * STARTING replica was abandoned), and following from now on one adopted before its engine was placed.
     */
    private readonly starts: { isStarting(replicaId: string): boolean; follow(replicaId: string, endpointId: string): void },
    private readonly log: (message: string, error?: unknown) => void,
    /**
     * How long a health answer stands for the passes that follow it: the passes a burst of changes brings (each pod
     * event, each step that ends pokes its endpoint) read it rather than asking every serving engine again.
     */
    private readonly healthFreshMs = 0,
    /** How long a drain that a gateway which stopped had begun may take here (the controller's drain timeout). */
    private readonly drainMs = 0,
  ) {}

  /**
   * The endpoint's live replicas (`replicas`, as the pass read them), after
   * dead ones are marked FAILED and ones left STARTING or DRAINING by a
   * process that died are stopped; 'failed' when its replicas keep dying and
   * the endpoint was marked FAILED.
   */
  async observe(endpoint: EndpointRecord, replicas: readonly ReplicaRecord[]): Promise<ReplicaRecord[] | 'failed'> {
    const live: ReplicaRecord[] = [];
    let died = 0;
    let disrupted = 0;
    let placementUnknown = false;
    const hung = await this.hungReplicas(endpoint.id, replicas);
    /** Drains that a gateway which stopped had begun (a sleep's, a scale-in's, a rollout's). */
    const drains: ReplicaRecord[] = [];
    // Forget the endpoint's replicas whose liveness was unknown and that are no longer live (stopped meanwhile).
    for (const [id, entry] of this.unknownSince)
      if (entry.endpointId === endpoint.id && !replicas.some((r) => r.id === id)) this.unknownSince.delete(id);
    for (const replica of replicas) {
      const ref = refOf(replica);
      if (replica.runtime !== this.runtime.name) {
        live.push(replica); // another runtime's replica (a gateway configured otherwise watches it)
        continue;
      }
      const abandoned = (replica.state === 'STARTING' && !this.starts.isStarting(replica.id)) || replica.state === 'DRAINING';
      if (abandoned) {
        // Placed, though its row never recorded where (the write after its placement failed): followed where it runs.
        if (replica.state === 'STARTING' && replica.locator === null) {
          const placed = await this.placedUnrecorded(endpoint, replica);
          if (placed === 'unknown') {
            live.push(replica); // the runtime's control plane cannot be reached: nothing is done to it
            continue;
          }
          if (placed !== undefined) {
            if (placed !== 'stopped') live.push(placed);
            this.unknownSince.delete(replica.id);
            continue;
          }
        }
        const liveness = this.runtime.liveness(ref);
        let lastError = 'abandoned by a gateway that stopped';
        if (liveness.kind === 'unknown') {
          // Another machine's engine, or a cache not synced yet: nothing is known to act on, for a while.
          const { since } = this.unknownSince.get(replica.id) ?? { since: Date.now() };
          this.unknownSince.set(replica.id, { endpointId: endpoint.id, since });
          if (Date.now() - since < this.policy.unknownMs) {
            live.push(replica);
            continue;
          }
          lastError = `given up: the ${this.runtime.name} runtime could not tell for ${Math.round((Date.now() - since) / 1000)} s whether it runs`;
          this.log(`replica ${replica.id} of ${endpoint.id}: ${lastError}`);
        } else this.unknownSince.delete(replica.id);
        if (liveness.kind === 'alive' && resumable(endpoint, replica)) {
          live.push(replica); // placed and running: this pass follows its start rather than starting another
          continue;
        }
        if (liveness.kind === 'alive' && replica.state === 'DRAINING') {
          // Its drain was under way when the gateway that began it stopped: finished below, with the others'.
          drains.push(replica);
          this.unknownSince.delete(replica.id);
          continue;
        }
        // A replica abandoned before its engine was placed has no locator in its row, but it may run: it is reaped below.
        if (replica.locator === null) placementUnknown = true;
        else await this.runtime.stop(ref, 0);
        await this.batches.markReplica(replica.id, { state: 'STOPPED', lastError });
        this.unknownSince.delete(replica.id);
        continue;
      }
      if (replica.state === 'READY' && hung.has(replica.id)) {
        // Alive but not answering (stopped, deadlocked): its requests would wait forever. Killed, it is a death (counted
        // here: once killed, a pod is gone as a disrupted one is). Its last output is read before it goes with its pod.
        const tail = await this.runtime.logTail(ref);
        this.log(
          `replica ${replica.id} of ${endpoint.id} answered no health check for ${this.policy.hangMs} ms: killing it; last output:\n${tail.slice(-2000)}`,
        );
        await this.runtime.stop(ref, 0);
        this.unanswered.delete(replica.id);
        if (await this.batches.markReplica(replica.id, { state: 'FAILED', lastError: ENGINE_EXITED })) died++;
        continue;
      }
      const liveness = replica.state === 'READY' ? this.runtime.liveness(ref) : undefined;
      if (liveness?.kind === 'dead' && liveness.disrupted) {
        // Taken away by the cluster (a drain, an eviction, a preemption): out of routing now, replaced by the scaling
        // that follows, and no death for the crash policy. A pod still terminating finishes its answers in its grace.
        const reason = liveness.reason ?? 'the cluster took it away';
        this.log(`replica ${replica.id} of ${endpoint.id} was disrupted (${reason}): it is replaced`);
        if (await this.batches.markReplica(replica.id, { state: 'STOPPED', lastError: `${DISRUPTED}: ${reason}` })) disrupted++;
        if (liveness.evictedByNode) this.evictedByNode(endpoint.id);
        await this.runtime.stop(ref, 0);
        continue;
      }
      if (liveness?.kind === 'dead') {
        const tail = await this.runtime.logTail(ref);
        this.log(
          `replica ${replica.id} of ${endpoint.id} died${liveness.reason ? ` (${liveness.reason})` : ''}; last output:\n${tail.slice(-2000)}`,
        );
        if (await this.batches.markReplica(replica.id, { state: 'FAILED', lastError: ENGINE_EXITED })) died++;
        // What the runtime keeps of it goes (a failed pod's object; a process's state file).
        await this.runtime.stop(ref, 0);
        continue;
      }
      live.push(replica);
    }
    if (drains.length > 0) {
      // Their answers in flight (other gateways' too) finish here, together, as they would have there; an endpoint
      // being terminated or deleted wants them stopped at once.
      const ending = endpoint.deleted || endpoint.desiredState === 'TERMINATED' || endpoint.desiredState === 'DELETED';
      await this.stopper.stopAll(drains, ending ? 0 : this.drainMs);
    }
    if (placementUnknown) await this.stopper.reapOrphans();
    if (died === 0) {
      if (disrupted > 0) await this.writes.refreshCounts(endpoint.id, KEEP_DESIRED, 'controller:replica-disrupted');
      return live;
    }

    await this.writes.refreshCounts(endpoint.id, KEEP_DESIRED, 'controller:replica-died');
    if (
      endpoint.desiredState === 'RUNNING' &&
      decideAfterDeaths(this.policy, await this.recentDeaths(endpoint.id), Date.now()).kind === 'fail'
    ) {
      await this.stopper.stopAll(live, 0);
      await this.writes.refreshCounts(endpoint.id, 0, 'controller:crash-loop');
      await this.writes.transition(
        endpoint.id,
        endpoint,
        { type: 'crash-loop' },
        {
          // Of the version read: an update since starts its own replicas.
          ofVersion: endpoint.current.versionIndex,
          cause: 'controller:crash-loop',
          detail: { message: `the engine exited ${this.policy.failures} times within ${Math.round(this.policy.windowMs / 1000)} seconds` },
        },
      );
      return 'failed';
    }
    return live;
  }

  /**
   * A starting replica whose row records no locator that the runtime finds placed (Runtime.adopt): the write after its
   * placement failed (a database outage, a connection broken) or its gateway stopped between the two. One the
   * endpoint still wants is recorded where it runs, and its start followed (answered, for the pass); else it is stopped
   * (`'stopped'`). Never stopped unseen and placed again. `'unknown'`: the runtime's control plane could not be
   * reached (it is left as it is); undefined: none found, or the runtime cannot look (the caller judges it).
   */
  private async placedUnrecorded(
    endpoint: EndpointRecord,
    replica: ReplicaRecord,
  ): Promise<ReplicaRecord | 'stopped' | 'unknown' | undefined> {
    let found: ReplicaRef | undefined;
    try {
      found = await this.runtime.adopt?.({ ...refOf(replica), endpointId: replica.endpointId });
    } catch (error) {
      if (error instanceof RuntimeUnavailableError) return 'unknown';
      this.log(`replica ${replica.id} of ${endpoint.id}: looking for its placement failed`, error);
    }
    // Found with neither a locator nor its engine's token: nothing to record (the caller judges it).
    if (!found || (!found.locator && !found.token)) return undefined;
    const recorded: ReplicaRecord = { ...replica, locator: found.locator, address: found.address, token: found.token ?? replica.token };
    if (stillWanted(endpoint, recorded)) {
      this.log(
        `replica ${replica.id} of ${endpoint.id} runs (${found.locator ?? 'its model step'}) but its row recorded no placement: recorded, and followed`,
      );
      const move = {
        state: 'STARTING' as const,
        ...(found.locator ? { locator: found.locator } : {}),
        ...(found.token ? { token: found.token } : {}),
      };
      if (await this.batches.markReplica(replica.id, move)) {
        // Placed, its engine not yet (a local model step): its row is as a placement's write leaves it, and this process
        // follows its start as the placement would have (the row records the engine once it runs).
        if (!found.locator) this.starts.follow(replica.id, endpoint.id);
        return recorded;
      }
    } else await this.batches.markReplica(replica.id, { state: 'STOPPED', lastError: 'abandoned by a gateway that stopped' });
    // No longer wanted (or its row ended meanwhile): what was placed goes.
    await this.runtime.stop(found, 0);
    return 'stopped';
  }

  /** Serving replicas whose engine, alive, has answered no health check for the policy's hangMs. */
  private async hungReplicas(endpointId: string, replicas: readonly ReplicaRecord[]): Promise<Set<string>> {
    const serving = replicas.filter(
      (r) => r.runtime === this.runtime.name && r.state === 'READY' && this.runtime.liveness(refOf(r)).kind === 'alive',
    );
    const asked = Date.now();
    const previous = this.lastHealth.get(endpointId);
    const latest = new Map<string, { at: number; health: EngineHealth | undefined }>();
    const answers = await Promise.all(
      serving.map(async (r) => {
        const last = previous?.get(r.id);
        const answer =
          last && asked - last.at < this.healthFreshMs
            ? last
            : { at: asked, health: await this.runtime.health(refOf(r), HEALTH_TIMEOUT_MS) };
        latest.set(r.id, answer);
        return answer.health;
      }),
    );
    // Only the replicas that serve now are kept (the others' answers go with them).
    if (latest.size > 0) this.lastHealth.set(endpointId, latest);
    else this.lastHealth.delete(endpointId);
    this.answers.set(endpointId, new Map(serving.map((r, i) => [r.id, answers[i]])));
    const now = Date.now();
    const silent = new Set(serving.filter((_, i) => answers[i] === undefined).map((r) => r.id));
    // Forget the endpoint's replicas that answered, or no longer serve.
    for (const [id, entry] of this.unanswered) if (entry.endpointId === endpointId && !silent.has(id)) this.unanswered.delete(id);
    const hung = new Set<string>();
    for (const id of silent) {
      const entry = this.unanswered.get(id) ?? { endpointId, since: now };
      this.unanswered.set(id, entry);
      if (now - entry.since >= this.policy.hangMs) hung.add(id);
    }
    return hung;
  }

  /**
   * The health a serving replica answered in this pass's checks (`{ health: undefined }`: it did not answer), once:
   * undefined when it was not checked. One health call per replica and pass, whoever reads it.
   */
  takeHealth(endpointId: string, replicaId: string): { health: EngineHealth | undefined } | undefined {
    const answers = this.answers.get(endpointId);
    if (!answers?.has(replicaId)) return undefined;
    const health = answers.get(replicaId);
    answers.delete(replicaId);
    return { health };
  }

  /** This process no longer holds the endpoint (handed over, lost, deleted): what it kept for it goes. */
  forget(endpointId: string): void {
    this.answers.delete(endpointId);
    this.lastHealth.delete(endpointId);
    this.evictions.delete(endpointId);
    for (const map of [this.unanswered, this.unknownSince])
      for (const [id, entry] of map) if (entry.endpointId === endpointId) map.delete(id);
  }

  /**
   * Whether a replacement for an engine that died must wait out its back-off
   * (the next pass after it starts it). Only a serving endpoint's replacements
   * wait: a start, wake or restart asked for by a user goes at once.
   */
  async backingOff(endpoint: EndpointRecord): Promise<boolean> {
    if (this.evictionWait(endpoint.id)) return true;
    if (endpoint.status !== 'RUNNING' && endpoint.status !== 'UPDATING') return false;
    const decision = decideAfterDeaths(this.policy, await this.recentDeaths(endpoint.id), Date.now());
    return decision.kind === 'wait';
  }

  /**
   * A replica of the endpoint was evicted by its node under the node's own pressure (memory, disk), which it may have
   * brought on: the next start waits the crash policy's back-off for the evictions within its window (1 s, 2 s, …
   * up to its maximum), though none counts as a death, so one that fills its node is not started again at once,
   * forever. Kept by this process (a takeover starts the count again).
   */
  evictedByNode(endpointId: string): void {
    const since = Date.now() - this.policy.windowMs;
    const times = (this.evictions.get(endpointId) ?? []).filter((at) => at > since);
    times.push(Date.now());
    this.evictions.set(endpointId, times);
  }

  private evictionWait(endpointId: string): boolean {
    const times = this.evictions.get(endpointId);
    if (!times?.length) return false;
    const last = times.at(-1)!;
    if (Date.now() < last + restartDelayMs(this.policy, times.length)) return true;
    if (last < Date.now() - this.policy.windowMs) this.evictions.delete(endpointId);
    return false;
  }

  /** Deaths of the endpoint's engines within the crash window, since the user last restarted it (or woke or updated it). */
  private recentDeaths(endpointId: string): Promise<RecentDeaths> {
    return failuresSince(this.sql, endpointId, new Date(Date.now() - this.policy.windowMs), ENGINE_EXITED, CRASH_COUNT_RESETS);
  }
}
