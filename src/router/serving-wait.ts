/**
 * Holding a request until its endpoint serves: a sleeping endpoint is woken,
 * a starting one awaited; one that serves no requests (see lifecycle.ts) is
 * refused at once, and past the wait it is `unavailable`, with a time to retry after.
 *
 * A waiting request looks again at each of the endpoint's events (any
 * gateway's writes are announced by NOTIFY, see src/live/event-hub.ts), and
 * otherwise at a poll interval (a fallback: announcements can be missed
 * while LISTEN reconnects).
 *
 * While the gateway drains (drain-waits.ts), a request still held shortly
 * before the drain's bound is answered 503, to be retried on another gateway
 * (where it waits for the same endpoint), rather than cut at the bound.
 */
import { failureOfDomainError, type Failure } from '../domain/errors.js';
import { holdsNoReplicas, isServing, isUnavailable } from '../domain/lifecycle.js';
import type { ChatAccess } from '../services/chat-access.js';
import { currentPrincipal, type Principal } from '../services/principal.js';
import type { Sql } from '../storage/database.js';
import type { EndpointRecord } from '../domain/endpoint.js';
import { Nudge } from '../util/nudge.js';
import { gatewayDraining, type DrainWaits } from './drain-waits.js';
import {
  clientClosed,
  endpointHoldsNoReplicas,
  endpointNotReady,
  endpointUnavailable,
  modelNotFound,
  tooManyWaiting,
} from './route-errors.js';

export interface ServingWaitOptions {
  /** How long a request may wait for a sleeping or starting endpoint to serve. */
  timeoutMs: number;
  /** The poll interval; by default 100 ms, then 50 ms more per look, up to 500 ms. */
  pollMs: number | undefined;
  /** The most requests that may wait for one endpoint to serve (in this process); more are refused at once (429). */
  maxWaiting: number;
  /** The endpoint, if the caller may use it (read afresh). */
  endpoint: (principal: Principal, id: string) => Promise<EndpointRecord | undefined>;
  /** Whether the endpoint has a ready replica (`fresh`: read afresh). */
  hasReplica: (endpoint: EndpointRecord, fresh: boolean) => Promise<boolean>;
  /**
   * Called with the endpoint's id for each of its announced events, and with
   * undefined when the LISTEN was (re-)established (events may have been missed).
   */
  onAnnounced?: (endpointId: string | undefined) => void;
  /** The waits its gateway's drain answers before its bound (drain-waits.ts). */
  drain?: DrainWaits;
}

export type ServingOutcome = { endpoint: EndpointRecord } | Failure;

export class ServingWait {
  /** Requests waiting for an endpoint to serve, by endpoint: poked when one of its events is announced. */
  private readonly watchers = new Map<string, Set<Nudge>>();
  /** The LISTEN on endpoint events, opened when a request first waits; false where it failed. */
  private listening: Promise<boolean> | undefined;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly access: ChatAccess,
    private readonly options: ServingWaitOptions,
  ) {}

  private closed = false;

  close(): void {
    this.closed = true;
    void this.unlisten?.().catch(() => {});
  }

  /** Resolves once `first` (read afresh with `fresh`) has a ready replica, or with the error to answer. */
  async until(principal: Principal, first: EndpointRecord, signal: AbortSignal, fresh = false): Promise<ServingOutcome> {
    const deadline = performance.now() + this.options.timeoutMs;
    let endpoint = first;
    if (fresh) {
      const current = await this.options.endpoint(principal, first.id);
      if (!current) return modelNotFound(first.id);
      endpoint = current;
    }
    // Opened once the endpoint is found not serving: its events end each wait early.
    let changes: Nudge | undefined;
    // The gateway's drain, when it is about to end, ends the wait too: `drained` is then what to answer.
    const drain = this.options.drain;
    let drained: Failure | undefined;
    let leaveDrain: (() => void) | undefined;
    try {
      for (let poll = 0; ; poll++) {
        // Before its replicas: a TERMINATING endpoint's replicas may still be draining, and take nothing new.
        if (isUnavailable(endpoint.status)) {
          return endpointUnavailable(endpoint);
        }
        if (await this.options.hasReplica(endpoint, fresh || poll > 0)) return { endpoint };
        if (holdsNoReplicas(endpoint) && !isServing(endpoint.status)) {
          // A cached view may predate the update that raised the maximum: only what the database says is refused.
          const current = fresh || poll > 0 ? endpoint : await this.options.endpoint(principal, endpoint.id);
          if (!current) return modelNotFound(endpoint.id);
          endpoint = current;
          if (holdsNoReplicas(endpoint) && !isServing(endpoint.status)) {
            return endpointHoldsNoReplicas(endpoint.id);
          }
        }
        let waitMs = this.options.pollMs ?? Math.min(100 + poll * 50, 500);
        if (!changes) {
          // As many wait for it as its queue holds: more would only be refused once it serves (429), each polling
          // meanwhile; they are refused now.
          if ((this.watchers.get(endpoint.id)?.size ?? 0) >= this.options.maxWaiting) {
            return tooManyWaiting(endpoint.id, this.options.maxWaiting);
          }
          const watcher = (changes = await this.watch(endpoint.id));
          // A change between the look above and the watch would go unseen: look again at once, unless this request wakes it.
          if (endpoint.status !== 'SLEEPING') waitMs = 0;
          if (drain?.refused) return gatewayDraining();
          leaveDrain = drain?.enter((failure) => {
            drained = failure;
            watcher.poke();
          });
        }
        if (drained) return drained;
        if (endpoint.status === 'SLEEPING') await this.access.wake(principal, endpoint.id);
        if (performance.now() > deadline) {
          // Waiting for a machine takes minutes, not seconds: a client that retries sooner only waits again.
          return endpointNotReady(notServingYetMessage(endpoint), endpoint.phase === 'REQUESTING_VIRTUAL_MACHINE' ? 30 : 10);
        }
        if (waitMs > 0) await changes.wait(waitMs, signal);
        if (signal.aborted) return clientClosed();
        if (drained) return drained;
        // Looked at as the caller is now: a key revoked, or a membership removed, while it waited wakes nothing more.
        const now = await currentPrincipal(principal);
        if (now.type === 'error') return failureOfDomainError(now.error);
        principal = now.value;
        const refreshed = await this.options.endpoint(principal, endpoint.id);
        if (!refreshed) return modelNotFound(endpoint.id);
        endpoint = refreshed;
      }
    } finally {
      leaveDrain?.();
      if (changes) this.unwatch(endpoint.id, changes);
    }
  }

  /**
   * Opens the LISTEN on endpoint events (once; again after a failure).
   * Resolves with whether it is in place: where it failed, polling alone
   * finds an endpoint serving.
   */
  listen(): Promise<boolean> {
    this.listening ??= this.sql
      .listen(
        'endpoint_events',
        (payload) => {
          const id = payload.split(':')[1];
          if (!id) return;
          this.options.onAnnounced?.(id);
          const watchers = this.watchers.get(id);
          if (watchers) for (const watcher of watchers) watcher.poke();
        },
        () => this.options.onAnnounced?.(undefined),
      )
      .then(
        (listening) => {
          this.unlisten = () => listening.unlisten();
          if (this.closed) void this.unlisten().catch(() => {});
          return !this.closed;
        },
        () => {
          this.listening = undefined; // the next waiting request tries again
          return false;
        },
      );
    return this.listening;
  }

  /** Resolves once the LISTEN is in place (or failed: the polling alone then finds the endpoint serving). */
  private async watch(endpointId: string): Promise<Nudge> {
    const watcher = new Nudge();
    let set = this.watchers.get(endpointId);
    if (!set) this.watchers.set(endpointId, (set = new Set()));
    set.add(watcher);
    await this.listen();
    return watcher;
  }

  private unwatch(endpointId: string, watcher: Nudge): void {
    const set = this.watchers.get(endpointId);
    set?.delete(watcher);
    if (set?.size === 0) this.watchers.delete(endpointId);
  }
}

/** The message of a request whose wait ran out: what the endpoint waits for, when it waits for a machine. */
export function notServingYetMessage(endpoint: Pick<EndpointRecord, 'id' | 'status' | 'phase' | 'waitReason'>): string {
  if (endpoint.phase === 'REQUESTING_VIRTUAL_MACHINE') {
    const why = endpoint.waitReason ? `: ${endpoint.waitReason}` : '';
    return `endpoint '${endpoint.id}' is ${endpoint.status} and waiting for a machine${why}; it serves once one is free, retry later`;
  }
  return `endpoint '${endpoint.id}' is ${endpoint.status} and not serving yet; retry shortly`;
}
