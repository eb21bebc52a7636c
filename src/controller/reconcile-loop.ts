/**
 * The reconcile loop and its leases: a lease row per endpoint makes exactly
 * one process act on an endpoint at a time; a process that dies loses its
 * leases when they expire, and another adopts its endpoints. Every interval
 * the loop runs a pass over every endpoint to reconcile that had none within
 * the interval (and renews this process's leases, a third of their TTL
 * apart); a poke runs a pass at once, over the endpoints poked alone when it
 * names them.
 *
 * An endpoint whose last pass found it at rest (nothing to do until
 * something changes: see the controller's `reconcile`) is passed over every
 * `restIntervalMs` instead, as long as the interval's listing shows it
 * unchanged (its row, its replicas' counts) and no request queued for it: an
 * idle endpoint's engines are asked for their health, and its idle timers
 * read, at that pace.
 *
 * Several gateways share the endpoints (lease-share.ts): each renews its
 * membership with its leases, takes no more than its share, and hands the
 * excess back when the others can adopt it. Where the runtime follows replicas
 * by shard (the Kubernetes runtime), the share is a set of shards: the pool's
 * members divide the shards (src/domain/shards.ts), each takes the endpoints
 * of its own and hands back those of others', and its runtime watches only the
 * pods of the shards whose endpoints it holds or may take.
 */
import { DEFAULTS } from '../defaults.js';
import type { Sql } from '../storage/database.js';
import { endpointsToReconcile, settled } from '../storage/pass-reads.js';
import { QUEUE_DEPTH_STALE_MS } from '../storage/queue-depth-repository.js';
import { acquireLeases, countMembers, heartbeat, releaseLeases, releaseSomeLeases, type Members } from '../storage/leases-repository.js';
import { Nudge } from '../util/nudge.js';
import { assignShards, SHARD_COUNT, shardOf } from '../domain/shards.js';
import { leaseShare } from './lease-share.js';
import { LaneQueue } from './lane-queue.js';
import { StaleError } from './endpoint-writes.js';

export interface ReconcileLoopOptions {
  sql: Sql;
  /** This process, as lease holder. */
  owner: string;
  /** Where this process's runtime places replicas (see lease-share.ts). @default 'default' */
  pool?: string;
  /** The replicas' pool its runtime follows (Runtime.node), recorded with its membership: see `away` below. */
  node?: string;
  intervalMs: number;
  leaseTtlMs: number;
  /**
   * Endpoints this process no longer holds (handed over, its lease lost to another, deleted and cleaned up), none with
   * a pass running: what the controller keeps in memory for them goes.
   */
  forget?: (endpointIds: string[]) => void;
  /**
   * Present when the runtime follows replicas by shard (Runtime.watchShards): the pool's gateways divide its shards
   * (src/domain/shards.ts), each takes the endpoints of its own shards alone, and this is told the shards of the
   * endpoints this process holds or may take, whenever they change. Absent: endpoints are shared by count.
   */
  watchShards?: (shards: ReadonlySet<number>) => void;
  /** Whether a step of the endpoint's starts runs in this process (a warm-up): it is not handed over meanwhile. */
  busy?: (endpointId: string) => boolean;
  /** One pass over one endpoint whose lease this process holds; the endpoint's stamp as read when it found it at rest. */
  reconcile: (endpointId: string) => Promise<string | undefined | void>;
  /** How often an endpoint at rest, unchanged and with no request queued, is passed over. @default 10 x intervalMs */
  restIntervalMs?: number;
  /**
   * Passes that run at once; the others wait their turn (their leases held), so that a thousand endpoints' passes
   * do not queue a thousand statements before the lease renewal on the database's connections. @default 16
   */
  concurrency?: number;
  log: (message: string, error?: unknown) => void;
}

export class ReconcileLoop {
  /** Endpoints with a reconcile pass running in this process. */
  private readonly running = new Map<string, Promise<void>>();
  private stopped = false;
  private ticking: Promise<void> | undefined;
  /** Ends the wait between ticks; a poke during a tick makes the next tick start at once. */
  private readonly nudge = new Nudge();
  /** Endpoints poked since the last tick began: the next tick reconciles these alone, unless a full pass is due. */
  private readonly poked = new Set<string>();
  /** Of those, the ones poked by a user's action (an API write), whose passes go first. */
  private readonly asked = new Set<string>();
  /** A poke without an endpoint: the next tick is a full pass. */
  private fullPassAsked = false;
  /** When each endpoint's last pass was queued (its tick's performance.now()): a due full pass skips those within the interval. */
  private readonly lastPassAt = new Map<string, number>();
  /** Endpoints whose last pass found them at rest: the stamp that pass read, and that pass's tick. */
  private readonly atRest = new Map<string, { stamp: string; at: number }>();
  private readonly queue: LaneQueue;
  private readonly restIntervalMs: number;
  /** When the leases were last renewed (a tick's performance.now()). */
  private renewedAt = -Infinity;
  /** The leases this process holds (as of the last renewal, plus those taken since, less those handed back). */
  private held = new Set<string>();
  /** The other live members at the last renewal, and those of them placing replicas elsewhere. */
  private others = 0;
  private elsewhere = 0;
  /** The endpoints to reconcile at the last listing. */
  private endpoints = 0;
  /** The other live members of this process's pool, by name, at the last count. */
  private peers: string[] = [];
  /** With shards (`watchShards`): the shards this process holds among its pool's members, as of the last count. */
  private owned: Set<number> | undefined;
  /** The shards last told to `watchShards` (sorted, joined), so that an unchanged set is not told again. */
  private followed = '';
  /** Replicas' pools (`node`) that live gateways of other pools dividing shards follow, as of the last count. */
  private followedElsewhere: string[] = [];
  /** Of the members of other pools, those that might take what this process hands back (Members.takersElsewhere). */
  private takersElsewhere = 0;
  /**
   * With shards: the endpoints of the last listing whose live replicas all run in a pool that a live gateway of
   * another pool follows (another namespace's installation on this database): only that pool's gateways can watch,
   * drain and stop those replicas, so this process does not take them, and hands back those it holds.
   */
  private away = new Set<string>();

  constructor(private readonly options: ReconcileLoopOptions) {
    this.queue = new LaneQueue(options.concurrency ?? 16, 3);
    this.restIntervalMs = options.restIntervalMs ?? DEFAULTS.restIntervals * options.intervalMs;
  }

  start(): void {
    void this.loop();
  }

  /**
   * Asks for a pass now: of that endpoint alone when one is named, else of all. `heldOnly`: only when this process
   * holds the endpoint's lease (a change another gateway's pass reads, or the next interval's when nobody holds it).
   * `internal`: a change of the controller's own (a start step that ended, a Pod that changed), whose pass waits for
   * those a user's action asked for.
   */
  poke(endpointId?: string, { heldOnly = false, internal = false } = {}): void {
    if (heldOnly && endpointId !== undefined && !this.held.has(endpointId)) return;
    if (endpointId === undefined) this.fullPassAsked = true;
    else {
      this.poked.add(endpointId);
      if (!internal) this.asked.add(endpointId);
    }
    this.nudge.poke();
  }

  /** Whether this process holds the endpoint's lease (as of its last renewal, and the leases taken since). */
  holds(endpointId: string): boolean {
    return this.held.has(endpointId);
  }

  /** Stops the loop, waits for passes in flight, and releases the leases. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.nudge.poke();
    await this.ticking;
    await Promise.allSettled([...this.running.values()]);
    await releaseLeases(this.options.sql, this.options.owner).catch(() => {});
  }

  /**
   * A full pass (every endpoint, lease renewal) every interval; between
   * them, a poke reconciles just the endpoints poked, so that a burst of API
   * writes does not make a pass over every endpoint for each.
   */
  private async loop(): Promise<void> {
    let nextFullPass = 0;
    while (!this.stopped) {
      this.nudge.clear();
      const now = performance.now();
      const asked = this.fullPassAsked;
      const full = asked || now >= nextFullPass;
      if (full) {
        this.fullPassAsked = false;
        nextFullPass = now + this.options.intervalMs;
      }
      this.ticking = this.tick(full ? (asked ? 'all' : 'due') : 'poked', now).catch((error: unknown) =>
        this.options.log('tick failed', error),
      );
      await this.ticking;
      // A poke during the tick may concern an endpoint the tick had already passed: the wait then ends at once.
      if (!this.stopped) await this.nudge.wait(Math.max(0, nextFullPass - performance.now()));
    }
  }

  /**
   * Passes over the endpoints poked, and on a full tick over every endpoint to reconcile: all of them when a full
   * pass was asked for, else ('due') those that had no pass within the interval (a poke's pass reconciles the
   * endpoint whole) and are not resting (at rest when last passed, unchanged since, within the rest interval).
   * `at`: when the tick began, recorded as the time of the passes it queues.
   */
  private async tick(which: 'poked' | 'due' | 'all', at: number): Promise<void> {
    const { sql, owner, leaseTtlMs } = this.options;
    const poked = new Set(this.poked);
    const asked = new Set(this.asked);
    this.poked.clear();
    this.asked.clear();
    let ids: Iterable<string> = poked;
    let recent = (_id: string) => false;
    const stamps = new Map<string, string>();
    if (which !== 'poked') {
      // A third of the TTL apart, not every interval: each renewal rewrites every lease row this process holds (a
      // thousand endpoints' rows twice a second, else); a pass renews its own endpoint's lease as it takes it.
      // The other gateways are counted each interval: one that stops or dies no longer bounds this one's share.
      const pool = this.options.pool ?? 'default';
      const renewing = at - this.renewedAt >= leaseTtlMs / 3;
      let members: Members;
      if (renewing) {
        const beat = await heartbeat(sql, owner, pool, leaseTtlMs, this.options.node);
        // Leases lost meanwhile (expired, taken by another gateway) are forgotten (those with a pass running, after it).
        const lost = [...this.held].filter((id) => !beat.held.has(id));
        // Taken again later, such an endpoint's first pass is a first look again.
        for (const id of lost) this.lastPassAt.delete(id);
        this.forget(lost);
        this.held = beat.held;
        this.renewedAt = at;
        members = beat;
      } else members = await countMembers(sql, owner, pool, leaseTtlMs, this.options.node);
      ({
        others: this.others,
        elsewhere: this.elsewhere,
        peers: this.peers,
        followedElsewhere: this.followedElsewhere,
        takersElsewhere: this.takersElsewhere,
      } = members);
      if (this.options.watchShards) this.owned = assignShards(this.peers, owner);
      // With shards, the endpoints of the shards it follows alone: the others' are theirs to list.
      const following = this.shardsToFollow();
      const awayNodes = this.options.watchShards ? this.followedElsewhere.filter((node) => node !== this.options.node) : [];
      const listed = await endpointsToReconcile(sql, QUEUE_DEPTH_STALE_MS, following && [...following], awayNodes);
      this.away = new Set(listed.filter((e) => e.away).map((e) => e.id));
      this.endpoints = listed.length;
      ids = listed.map((e) => e.id);
      for (const e of listed) stamps.set(e.id, e.stamp);
      // A lease kept on an endpoint no longer listed (deleted and cleaned up) is no share of the work: it goes now (a
      // renewal would otherwise bring it back, to be dropped and forgotten again).
      const unlisted = [...this.held].filter((id) => !stamps.has(id));
      for (const id of unlisted) this.held.delete(id);
      this.forget(unlisted);
      await releaseSomeLeases(sql, owner, unlisted);
      // Endpoints whose replicas all run where a live gateway of another pool follows them (`away`): handed back to it.
      const leaving = [...this.held].filter((id) => this.away.has(id) && !this.running.has(id) && !this.options.busy?.(id));
      if (leaving.length > 0) {
        await this.letGo(leaving);
        this.options.log(`handed ${leaving.length} endpoint(s) back to the gateway(s) of another pool that follow their replicas`);
      }
      const idle = new Set(listed.filter((e) => e.queued === 0).map((e) => e.id));
      // Full ticks are an interval apart at least: the last one's passes are never "recent" for this one.
      const since = at - this.options.intervalMs;
      const resting = (id: string) => {
        const rest = this.atRest.get(id);
        return rest !== undefined && rest.stamp === stamps.get(id) && idle.has(id) && at - rest.at < this.restIntervalMs;
      };
      if (which === 'due') recent = (id) => !poked.has(id) && ((this.lastPassAt.get(id) ?? -Infinity) > since || resting(id));
      // What is no longer listed (deleted, cleaned up) is forgotten.
      for (const id of this.lastPassAt.keys()) if (!stamps.has(id)) this.lastPassAt.delete(id);
      for (const id of this.atRest.keys()) if (!stamps.has(id)) this.atRest.delete(id);
      if (renewing) await this.handBack(stamps, idle, poked);
      this.followShards();
    }
    const free: string[] = [];
    for (const id of ids) {
      if (!this.running.has(id)) {
        if (!recent(id)) free.push(id);
      }
      // Its pass waits still (it is made urgent: it will read the change), or may have read the endpoint before the
      // change: then one more pass follows it.
      else if (poked.has(id) && !this.queue.hurry(id, laneOf(asked.has(id), true))) {
        this.poked.add(id);
        if (asked.has(id)) this.asked.add(id);
      }
    }
    if (this.stopped) return;
    // One statement takes every lease to be had (not one round trip per endpoint), up to this process's share: with
    // shards, every one of its own shards' endpoints, and none of the others' but those it holds still (renewed, and
    // passed over, until they are handed back).
    const { owned } = this;
    const wanted = owned ? free.filter((id) => (owned.has(shardOf(id)) || this.held.has(id)) && !this.away.has(id)) : free;
    const { take } = owned ? { take: null } : this.share();
    for (const id of await acquireLeases(sql, wanted, owner, leaseTtlMs, take)) {
      this.held.add(id);
      if (this.stopped || this.running.has(id)) continue;
      // A user's change goes first; then the controller's own changes and an endpoint's first pass since this process
      // took it (it has not been looked at: at a start, or a takeover, each waits for one); then the interval's.
      const lane = laneOf(asked.has(id), poked.has(id) || !this.lastPassAt.has(id));
      this.lastPassAt.set(id, at);
      const pass = this.queue
        .add(id, lane, () => this.options.reconcile(id))
        .then(
          (stamp) => void (typeof stamp === 'string' ? this.atRest.set(id, { stamp, at }) : this.atRest.delete(id)),
          (error: unknown) => {
            this.atRest.delete(id);
            if (!(error instanceof StaleError)) this.options.log(`reconciling ${id} failed`, error);
          },
        )
        .finally(() => {
          this.running.delete(id);
          // No longer held (lost, handed over, cleaned up while the pass ran): forgotten now that it ended.
          if (!this.held.has(id)) this.options.forget?.([id]);
          if (this.poked.has(id)) this.nudge.poke();
        });
      this.running.set(id, pass);
    }
  }

  private forget(ids: string[]): void {
    const idle = ids.filter((id) => !this.running.has(id));
    if (idle.length > 0) this.options.forget?.(idle);
  }

  /**
   * Tells the runtime the shards to follow (with shards): its own, where it takes endpoints, and those of the
   * endpoints it holds still (another gateway's shard now, not handed over yet: see `handBack`).
   */
  private followShards(): void {
    const shards = this.shardsToFollow();
    if (!shards || !this.options.watchShards) return;
    const key = [...shards].sort((a, b) => a - b).join(',');
    if (key === this.followed) return;
    this.followed = key;
    this.options.watchShards(shards);
  }

  /** With shards: its own, and those of the endpoints it holds still. */
  private shardsToFollow(): Set<number> | undefined {
    if (!this.owned) return undefined;
    const shards = new Set(this.owned);
    for (const id of this.held) shards.add(shardOf(id));
    return shards;
  }

  private share() {
    return leaseShare({ endpoints: this.endpoints, others: this.others, elsewhere: this.elsewhere, held: this.held.size });
  }

  /**
   * Hands back the leases this process holds past its share (lease-share.ts), of settled endpoints only (by the
   * listing's `stamps`: no replica starting or draining), with no request queued (`idle`), no pass running or asked
   * for (`poked`) and no start step running (`busy`: a warm-up's last writes), those at rest first: another member
   * takes them on its next pass.
   */
  private async handBack(stamps: ReadonlyMap<string, string>, idle: ReadonlySet<string>, poked: ReadonlySet<string>): Promise<void> {
    // With shards: every endpoint of a shard another member holds now, unless a member of another pool that might take
    // them is live (one that could not adopt the replicas, or that shares by count; not another installation's, which
    // takes no endpoint whose replicas run here); else the excess over this process's share.
    const { owned } = this;
    const release = owned ? (this.takersElsewhere === 0 ? Infinity : 0) : this.share().release;
    if (release === 0) return;
    const candidates = [...this.held].filter((id) => {
      if (owned?.has(shardOf(id))) return false;
      const stamp = stamps.get(id);
      const quiet = !this.running.has(id) && !poked.has(id) && !this.poked.has(id) && !this.options.busy?.(id);
      return stamp !== undefined && settled(stamp) && idle.has(id) && quiet;
    });
    const resting = (id: string) => this.atRest.get(id)?.stamp === stamps.get(id);
    candidates.sort((a, b) => Number(resting(b)) - Number(resting(a)));
    const ids = candidates.slice(0, release);
    if (ids.length === 0) return;
    await this.letGo(ids);
    this.options.log(
      owned
        ? `handed ${ids.length} endpoint(s) over to the other gateway(s) of the pool, whose shards they are now (this one holds ${owned.size} of ${SHARD_COUNT} shards)`
        : `handed ${ids.length} endpoint(s) over to the ${this.others} other gateway(s) (this one's share: ${this.share().share})`,
    );
  }

  /** Hands these leases back (another gateway takes them on its next pass), and forgets what this process kept of them. */
  private async letGo(ids: string[]): Promise<void> {
    await releaseSomeLeases(this.options.sql, this.options.owner, ids);
    for (const id of ids) {
      this.held.delete(id);
      this.atRest.delete(id);
      this.lastPassAt.delete(id);
    }
    this.forget(ids);
  }
}

/** A pass's lane (LaneQueue): a user's change first, then the controller's changes and first looks, then the interval's. */
function laneOf(asked: boolean, urgent: boolean): number {
  return asked ? 0 : urgent ? 1 : 2;
}
