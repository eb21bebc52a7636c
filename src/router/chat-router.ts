/**
 * How a chat request reaches a replica. The router checks the request, finds
 * the endpoint (the caller's teams only), holds the request while the
 * endpoint starts (waking a sleeping one), admits it within replicas x
 * max_batch_size (queued fairly between API keys, or refused at once with 429
 * when it could not start in time: see admission.ts), picks the least-loaded
 * ready replica, and opens the upstream request over a keep-alive connection.
 * The surfaces (REST and GraphQL) then relay the answer as it streams. Each
 * process publishes how many requests wait in its queues (see
 * queue-depth-repository.ts), for the autoscaler.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { parseChatRequest, type ChatRequest } from '../domain/chat-request.js';
import type { EndpointStatus } from '../domain/lifecycle.js';
import type { Services } from '../services/index.js';
import { canAccessTeam, type Principal } from '../services/principal.js';
import type { Sql } from '../storage/database.js';
import { findEndpoints, type EndpointRecord } from '../storage/endpoints-repository.js';
import {
  forgetQueueDepths,
  publishQueueDepths,
  QUEUE_DEPTH_PUBLISH_MS,
  QUEUE_DEPTH_REFRESH_MS,
  QUEUE_DEPTH_STALE_MS,
} from '../storage/queue-depth-repository.js';
import { readyReplicas, type ReplicaRecord } from '../storage/replicas-repository.js';
import { Nudge } from '../util/nudge.js';
import { EndpointGate, QueueRefusedError, QueueTimeoutError } from './admission.js';
import { once } from './once.js';
import { openAIError, type OpenAIError } from '../domain/openai-errors.js';
import { checkAgainstSpec, checkPromptTokens } from './pre-admission.js';
import type { RequestRecorder } from './request-recorder.js';

export interface RouterOptions {
  /** How long a request may wait for a sleeping or starting endpoint to serve. @default 120000 */
  wakeTimeoutMs?: number;
  /** How long a request may wait for a free slot. @default 30000 */
  queueTimeoutMs?: number;
  /** This process in the published queue depths (the app passes its controller's lease owner). @default a random id */
  processId?: string;
  /** Requests queued at most per endpoint in this process; past it, 429 at once. @default 256 */
  maxQueuePerEndpoint?: number;
  /** Requests queued at most per API key and endpoint in this process; past it, 429 at once. @default 64 */
  maxQueuePerKey?: number;
  /**
   * How long the endpoint and its ready replicas are reused as read. Past
   * that, requests keep using them while one background read refreshes them
   * (none waits on it), for up to ten times as long. @default 500
   */
  replicaCacheMs?: number;
  /**
   * A request held for a waking endpoint looks again at each of the
   * endpoint's events, and otherwise after this long (a fallback for missed
   * announcements). @default 100 ms, then 50 ms more per look, up to 500 ms
   */
  wakePollMs?: number;
}

/** An admitted request with its upstream answer's head received. */
export interface RoutedRequest {
  endpoint: EndpointRecord;
  replica: ReplicaRecord;
  request: ChatRequest;
  upstream: http.IncomingMessage;
  /** When the gateway received the request. */
  startedAt: number;
  queuedMs: number;
  /** Frees the slot and records the outcome; call exactly once, when the answer ended or was abandoned. */
  finish(outcome: {
    promptTokens: number | null;
    completionTokens: number | null;
    ttftMs: number | null;
    finishReason: string | null;
    cancelled: boolean;
    /** Set when the replica, not the client, ended the answer early. */
    errorCode?: string | null;
  }): void;
}

export type RouteResult = { type: 'ok'; value: RoutedRequest } | { type: 'error'; error: OpenAIError };

const UNAVAILABLE: readonly EndpointStatus[] = ['FAILED', 'TERMINATED', 'TERMINATING'];

export class ChatRouter {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, scheduling: 'lifo' });
  private readonly gates = new Map<string, EndpointGate>();
  private readonly replicaCache = new Map<string, { at: number; replicas: ReplicaRecord[]; maxBatchSize: number }>();
  private readonly endpointCache = new Map<string, { at: number; endpoint: EndpointRecord }>();
  /** Reads in flight, by what they read: concurrent requests share them. */
  private readonly refreshing = new Map<string, Promise<unknown>>();
  /** Requests in flight per replica, through this process: the load the picker balances. */
  private readonly inFlight = new Map<string, number>();
  private readonly wakeTimeoutMs: number;
  private readonly queueTimeoutMs: number;
  private readonly maxQueuePerEndpoint: number;
  private readonly maxQueuePerKey: number;
  /** This process, in the published queue depths. */
  private readonly processId: string;
  /** Endpoints whose queued count changed since it was last published. */
  private readonly depthChanged = new Set<string>();
  /** What was last published per endpoint, and when. */
  private readonly depthPublished = new Map<string, { queued: number; at: number }>();
  private publishing = false;
  private readonly publisher: NodeJS.Timeout;
  private readonly replicaCacheMs: number;
  private readonly wakePollMs: number | undefined;
  private readonly refresher: NodeJS.Timeout;
  /** Requests waiting for an endpoint to serve, by endpoint: poked when one of its events is announced. */
  private readonly changeWatchers = new Map<string, Set<Nudge>>();
  /** The LISTEN on endpoint events, opened when a request first waits for an endpoint; false where it failed. */
  private listening: Promise<boolean> | undefined;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly services: Services,
    private readonly recorder: RequestRecorder,
    options: RouterOptions = {},
  ) {
    this.wakeTimeoutMs = options.wakeTimeoutMs ?? 120_000;
    this.queueTimeoutMs = options.queueTimeoutMs ?? 30_000;
    this.processId = options.processId ?? `gw-${process.pid}-${randomUUID()}`;
    this.maxQueuePerEndpoint = options.maxQueuePerEndpoint ?? 256;
    this.maxQueuePerKey = options.maxQueuePerKey ?? 64;
    this.replicaCacheMs = options.replicaCacheMs ?? 500;
    this.wakePollMs = options.wakePollMs;
    // Requests waiting for a slot are admitted as soon as replicas are added.
    this.refresher = setInterval(() => void this.refreshQueued(), this.replicaCacheMs);
    this.refresher.unref();
    // The queued counts, for the controllers' autoscaling (which sees every process's).
    this.publisher = setInterval(() => void this.publishDepths(), QUEUE_DEPTH_PUBLISH_MS);
    this.publisher.unref();
  }

  close(): void {
    clearInterval(this.refresher);
    clearInterval(this.publisher);
    if (this.depthPublished.size > 0) void forgetQueueDepths(this.sql, this.processId).catch(() => {});
    this.agent.destroy();
    void this.unlisten?.().catch(() => {});
  }

  /**
   * Watches an endpoint's events (any gateway's writes are announced by
   * NOTIFY, see src/live/event-hub.ts), so that a request waiting for the
   * endpoint to serve looks again as soon as its status changes instead of
   * at its next poll. Resolves once the LISTEN is in place (or failed: the
   * polling alone then finds the endpoint serving).
   */
  private async watchChanges(endpointId: string): Promise<Nudge> {
    this.listening ??= this.sql
      .listen('endpoint_events', (payload) => {
        const endpointId = payload.split(':')[1];
        const watchers = endpointId ? this.changeWatchers.get(endpointId) : undefined;
        if (watchers) for (const watcher of watchers) watcher.poke();
      })
      .then(
        (listening) => {
          this.unlisten = () => listening.unlisten();
          return true;
        },
        () => {
          this.listening = undefined; // the next waiting request tries again
          return false;
        },
      );
    const watcher = new Nudge();
    let set = this.changeWatchers.get(endpointId);
    if (!set) this.changeWatchers.set(endpointId, (set = new Set()));
    set.add(watcher);
    await this.listening;
    return watcher;
  }

  private unwatchChanges(endpointId: string, watcher: Nudge): void {
    const set = this.changeWatchers.get(endpointId);
    set?.delete(watcher);
    if (set?.size === 0) this.changeWatchers.delete(endpointId);
  }

  /**
   * Publishes this process's queued counts: those that changed since the
   * last publication, and those not zero once they near staleness.
   */
  private async publishDepths(): Promise<void> {
    if (this.publishing) return;
    const now = performance.now();
    const depths = new Map<string, number>();
    for (const id of this.depthChanged) depths.set(id, this.gates.get(id)?.queued ?? 0);
    for (const [id, last] of this.depthPublished) {
      if (last.queued > 0 && now - last.at >= QUEUE_DEPTH_REFRESH_MS) depths.set(id, this.gates.get(id)?.queued ?? 0);
    }
    if (depths.size === 0) return;
    this.depthChanged.clear();
    this.publishing = true;
    try {
      await publishQueueDepths(this.sql, this.processId, depths, QUEUE_DEPTH_STALE_MS);
      for (const [id, queued] of depths) this.depthPublished.set(id, { queued, at: now });
    } catch {
      for (const id of depths.keys()) this.depthChanged.add(id); // the next tick tries again
    } finally {
      this.publishing = false;
    }
  }

  private async refreshQueued(): Promise<void> {
    const waiting = [...this.gates.entries()].filter(([, gate]) => gate.queued > 0).map(([id]) => id);
    if (waiting.length === 0) return;
    const replicas = await readyReplicas(this.sql, waiting).catch(() => undefined);
    if (!replicas) return;
    for (const id of waiting) {
      const entry = this.replicaCache.get(id);
      if (entry) this.replicaCache.set(id, { ...entry, at: performance.now(), replicas: replicas.filter((r) => r.endpointId === id) });
      this.gates.get(id)?.pump();
    }
  }

  async route(principal: Principal, body: unknown, signal: AbortSignal): Promise<RouteResult> {
    const startedAt = performance.now();
    const parsed = parseChatRequest(body);
    if (!parsed.ok) {
      const e = parsed.error;
      return fail(openAIError(e.status, e.type === 'not_found_error' ? 'not_found_error' : e.type, e.message, e.code, e.param));
    }
    const model = (body as { model?: unknown }).model;
    if (typeof model !== 'string' || model === '') {
      return fail(
        openAIError(400, 'invalid_request_error', 'model is required: pass the endpoint id', 'missing_required_parameter', 'model'),
      );
    }
    const found = await this.endpointFor(principal, model, false);
    if (!found) return fail(modelNotFound(model));
    // Before any wait (for a wake, or for a slot): what the spec alone refuses.
    const overSpec = checkAgainstSpec(parsed.request, found);
    if (overSpec) return fail(overSpec);
    this.recorder.seen(model);

    const ready = await this.waitUntilServing(principal, found, signal);
    if ('status' in ready) return fail(ready);
    const { endpoint } = ready;

    const gate = this.gateFor(endpoint.id);
    // Requests are shared fairly between API keys (see admission.ts).
    const key = principal.keyId ?? `user:${principal.user.id}`;
    // A request that would wait for a slot has its prompt counted first, so a bad one is refused at once (400), not after the queue.
    const counter = gate.busy ? this.pick(endpoint.id, new Set()) : undefined;
    if (counter) {
      const overLimits = await checkPromptTokens(this.agent, counter, endpoint, parsed.request, signal);
      if (overLimits) return fail(overLimits);
    }
    let release: () => void;
    const queueStart = performance.now();
    try {
      release = await gate.acquire(key, signal);
    } catch (error) {
      if (error instanceof QueueRefusedError) {
        const { message, code, retryAfterS } = error.refusal;
        return fail(
          openAIError(429, 'rate_limit_error', `endpoint '${endpoint.id}': ${message}; retry in ${retryAfterS} s`, code, null, retryAfterS),
        );
      }
      if (error instanceof QueueTimeoutError) {
        const next = gate.decide(key);
        const retryAfterS = next.kind === 'refuse' ? next.retryAfterS : 1;
        return fail(
          openAIError(
            429,
            'rate_limit_error',
            `endpoint '${endpoint.id}' is at capacity: the request waited ${Math.round(this.queueTimeoutMs / 1000)} s for a free slot`,
            'queue_full',
            null,
            retryAfterS,
          ),
        );
      }
      return fail(openAIError(499, 'invalid_request_error', 'the client closed the request', 'client_closed'));
    }
    const queuedMs = performance.now() - queueStart;

    // Try the least-loaded replica. One that refuses the connection (it just
    // stopped or died) is skipped, and the endpoint is looked at afresh: a
    // sleeping endpoint is woken and awaited like at first.
    const tried = new Set<string>();
    for (let attempt = 0; attempt < 3; attempt++) {
      let replica = this.pick(endpoint.id, tried);
      if (!replica && attempt > 0) {
        const again = await this.waitUntilServing(principal, endpoint, signal, true);
        if ('status' in again) {
          release();
          return fail(again);
        }
        replica = this.pick(endpoint.id, tried);
      }
      if (!replica) break;
      tried.add(replica.id);
      this.inFlight.set(replica.id, (this.inFlight.get(replica.id) ?? 0) + 1);
      try {
        const upstream = await this.send(replica, parsed.request, body as Record<string, unknown>, signal);
        const finish: RoutedRequest['finish'] = (outcome) => {
          this.inFlight.set(replica.id, (this.inFlight.get(replica.id) ?? 1) - 1);
          release();
          this.recorder.record({
            endpointId: endpoint.id,
            replicaId: replica.id,
            teamId: endpoint.teamId,
            userId: principal.user.id,
            stream: parsed.request.stream,
            httpStatus: upstream.statusCode ?? 502,
            durationMs: performance.now() - startedAt,
            queuedMs,
            startedAt: new Date(Date.now() - (performance.now() - startedAt)),
            ...outcome,
          });
        };
        return { type: 'ok', value: { endpoint, replica, request: parsed.request, upstream, startedAt, queuedMs, finish: once(finish) } };
      } catch (error) {
        this.inFlight.set(replica.id, (this.inFlight.get(replica.id) ?? 1) - 1);
        if (signal.aborted) {
          release();
          return fail(openAIError(499, 'invalid_request_error', 'the client closed the request', 'client_closed'));
        }
        this.replicaCache.delete(endpoint.id);
        this.endpointCache.delete(endpoint.id);
      }
    }
    release();
    return fail(
      openAIError(503, 'server_error', `no replica of endpoint '${endpoint.id}' answered; try again`, 'replica_unavailable', null, 2),
    );
  }

  /**
   * Holds the request until the endpoint has a ready replica: a sleeping one
   * is woken, a starting one awaited. A failed or terminated endpoint is
   * refused at once; past the wait, the answer is 503 with Retry-After.
   */
  private async waitUntilServing(
    principal: Principal,
    first: EndpointRecord,
    signal: AbortSignal,
    fresh = false,
  ): Promise<{ endpoint: EndpointRecord } | OpenAIError> {
    const deadline = performance.now() + this.wakeTimeoutMs;
    let endpoint = first;
    if (fresh) {
      const current = await this.endpointFor(principal, first.id, true);
      if (!current) return modelNotFound(first.id);
      endpoint = current;
    }
    // Opened once the endpoint is found not serving: its events end each wait early.
    let changes: Nudge | undefined;
    try {
      for (let poll = 0; ; poll++) {
        const replicas = await this.readyReplicasOf(endpoint, fresh || poll > 0);
        if (replicas.length > 0) return { endpoint };
        if (UNAVAILABLE.includes(endpoint.status)) {
          const why = endpoint.errorCode ? ` (${endpoint.errorCode})` : '';
          return openAIError(
            409,
            'invalid_request_error',
            `endpoint '${endpoint.id}' is ${endpoint.status}${why} and serves no requests: restart it`,
            'endpoint_not_running',
            'model',
          );
        }
        let waitMs = this.wakePollMs ?? Math.min(100 + poll * 50, 500);
        if (!changes) {
          changes = await this.watchChanges(endpoint.id);
          // A change between the look above and the watch would go unseen: look again at once, unless this request wakes it.
          if (endpoint.status !== 'SLEEPING') waitMs = 0;
        }
        if (endpoint.status === 'SLEEPING') await this.services.endpoints.act(principal, endpoint.id, 'wake');
        if (performance.now() > deadline) {
          return openAIError(
            503,
            'server_error',
            `endpoint '${endpoint.id}' is ${endpoint.status} and not serving yet; retry shortly`,
            'endpoint_not_ready',
            null,
            10,
          );
        }
        // Until the endpoint's next event, or the next poll (a fallback: announcements can be missed while LISTEN reconnects).
        if (waitMs > 0) await changes.wait(waitMs, signal);
        if (signal.aborted) return openAIError(499, 'invalid_request_error', 'the client closed the request', 'client_closed');
        const refreshed = await this.endpointFor(principal, endpoint.id, true);
        if (!refreshed) return modelNotFound(endpoint.id);
        endpoint = refreshed;
      }
    } finally {
      if (changes) this.unwatchChanges(endpoint.id, changes);
    }
  }

  /**
   * The endpoint, if the caller may use it. Records are reused for as long as
   * the replica list, so that a request on the hot path costs no statement.
   */
  private async endpointFor(principal: Principal, id: string, fresh: boolean): Promise<EndpointRecord | undefined> {
    const cached = this.endpointCache.get(id);
    const age = fresh ? 'expired' : this.ageOf(cached?.at);
    if (age === 'stale') this.loadEndpoint(id).catch(() => {});
    const endpoint = age === 'expired' ? await this.loadEndpoint(id, !fresh) : cached!.endpoint;
    return endpoint && canAccessTeam(principal, endpoint.teamId) ? endpoint : undefined;
  }

  private loadEndpoint(id: string, shared = true): Promise<EndpointRecord | undefined> {
    const load = async () => {
      const [endpoint] = await findEndpoints(this.sql, [id]);
      if (endpoint) this.endpointCache.set(id, { at: performance.now(), endpoint });
      else this.endpointCache.delete(id);
      return endpoint;
    };
    return shared ? this.singleFlight(`endpoint:${id}`, load) : load();
  }

  private async readyReplicasOf(endpoint: EndpointRecord, fresh: boolean): Promise<ReplicaRecord[]> {
    const cached = this.replicaCache.get(endpoint.id);
    const age = fresh ? 'expired' : this.ageOf(cached?.at);
    if (age === 'stale') this.loadReplicas(endpoint).catch(() => {});
    return age === 'expired' ? this.loadReplicas(endpoint, !fresh) : cached!.replicas;
  }

  private loadReplicas(endpoint: EndpointRecord, shared = true): Promise<ReplicaRecord[]> {
    const load = async () => {
      const replicas = await readyReplicas(this.sql, [endpoint.id]);
      this.replicaCache.set(endpoint.id, { at: performance.now(), replicas, maxBatchSize: endpoint.current.spec.advanced.maxBatchSize });
      this.gates.get(endpoint.id)?.pump();
      return replicas;
    };
    return shared ? this.singleFlight(`replicas:${endpoint.id}`, load) : load();
  }

  /**
   * How a cached read from `at` may serve a request on the hot path: `fresh`
   * for `replicaCacheMs`, as it is; then `stale` for up to ten times as long,
   * used while one background read refreshes it (so that no request waits on
   * it); then, or with nothing cached, `expired`: the request waits for a read.
   */
  private ageOf(at: number | undefined): 'fresh' | 'stale' | 'expired' {
    if (at === undefined) return 'expired';
    const age = performance.now() - at;
    return age < this.replicaCacheMs ? 'fresh' : age < this.replicaCacheMs * 10 ? 'stale' : 'expired';
  }

  /** Concurrent reads of one thing share one statement. */
  private singleFlight<T>(key: string, load: () => Promise<T>): Promise<T> {
    let running = this.refreshing.get(key) as Promise<T> | undefined;
    if (!running) {
      running = load().finally(() => this.refreshing.delete(key));
      this.refreshing.set(key, running);
    }
    return running;
  }

  private gateFor(endpointId: string): EndpointGate {
    let gate = this.gates.get(endpointId);
    if (!gate) {
      gate = new EndpointGate(
        () => {
          const entry = this.replicaCache.get(endpointId);
          return entry ? entry.replicas.length * entry.maxBatchSize : 0;
        },
        { timeoutMs: this.queueTimeoutMs, maxQueue: this.maxQueuePerEndpoint, maxPerKey: this.maxQueuePerKey },
        // Replicas being added (the controller wants more than are ready): their slots are counted as coming.
        () => {
          const entry = this.replicaCache.get(endpointId);
          const desired = this.endpointCache.get(endpointId)?.endpoint.desiredReplicaCnt ?? 0;
          return entry ? Math.max(0, desired - entry.replicas.length) * entry.maxBatchSize : 0;
        },
        () => this.depthChanged.add(endpointId),
      );
      this.gates.set(endpointId, gate);
    }
    return gate;
  }

  private pick(endpointId: string, skip: ReadonlySet<string>): ReplicaRecord | undefined {
    const replicas = (this.replicaCache.get(endpointId)?.replicas ?? []).filter((r) => !skip.has(r.id));
    let best: ReplicaRecord | undefined;
    for (const replica of replicas) {
      if (!best || (this.inFlight.get(replica.id) ?? 0) < (this.inFlight.get(best.id) ?? 0)) best = replica;
    }
    return best;
  }

  /** Opens the upstream request; resolves with the answer's head. The body streams on. */
  private send(
    replica: ReplicaRecord,
    request: ChatRequest,
    body: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<http.IncomingMessage> {
    // Usage is always asked for, to record token counts; the relay drops it if the client did not ask.
    const upstreamBody = request.stream
      ? { ...body, stream_options: { ...(body.stream_options as object | undefined), include_usage: true } }
      : body;
    const payload = JSON.stringify(upstreamBody);
    return new Promise((resolve, reject) => {
      const req = http.request(`${replica.address}/v1/chat/completions`, {
        method: 'POST',
        agent: this.agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        signal,
      });
      req.once('response', resolve);
      req.once('error', reject);
      req.setNoDelay(true);
      req.end(payload);
    });
  }
}

function modelNotFound(model: string): OpenAIError {
  return openAIError(
    404,
    'not_found_error',
    `The model '${model}' does not exist or you do not have access to it.`,
    'model_not_found',
    'model',
  );
}

function fail(error: OpenAIError): RouteResult {
  return { type: 'error', error };
}
