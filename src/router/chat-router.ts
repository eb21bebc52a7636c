/**
 * How a chat request reaches a replica: the inference core. The router
 * checks the request, finds the endpoint (the caller's teams only), holds the
 * request while the endpoint starts (waking a sleeping one), admits it within
 * replicas x max_batch_size (queued fairly between API keys, or refused at
 * once as overloaded when it could not start in time: see admission.ts),
 * picks the least-loaded ready replica, and opens the upstream request over a
 * keep-alive connection. It knows no transport: `answer` gives a typed
 * outcome (a failure of the error model, src/domain/errors.ts; a whole
 * answer; or a stream), which the surfaces (REST and GraphQL) put in their
 * shape, relaying the answer as it streams. Each process publishes how many
 * requests wait in its queues (see queue-depths.ts), for the autoscaler.
 *
 * The parts: serving-view.ts (the cached endpoints and ready replicas),
 * endpoint-lookup.ts (the endpoint a request names), serving-wait.ts
 * (holding a request until the endpoint serves), admission.ts and
 * endpoint-gates.ts (the slots and the fair queue), dispatch.ts (sending
 * an admitted request to a replica), upstream.ts (balancing and the upstream
 * request), relay.ts (the answer back to the client).
 */
import { DEFAULTS } from '../defaults.js';
import { randomUUID } from 'node:crypto';
import type { EndpointRecord } from '../domain/endpoint.js';
import { isUnavailable } from '../domain/lifecycle.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { codeOf, httpStatusOf, type Failure } from '../domain/errors.js';
import { fail, type Result } from '../domain/result.js';
import type { Services } from '../services/index.js';
import type { Principal } from '../services/principal.js';
import type { Sql } from '../storage/database.js';
import { QueueClosedError, QueueRefusedError, QueueTimeoutError } from './admission.js';
import { Dispatcher, type RoutedRequest, type RouteResult } from './dispatch.js';
import { EndpointGates } from './endpoint-gates.js';
import { EndpointLookup } from './endpoint-lookup.js';
import { CHAT_KIND, type InferenceKind } from './inference-kinds.js';
import { checkAgainstSpec, checkPromptTokens, mayBreakTokenLimits } from './pre-admission.js';
import { QueueDepthPublisher } from './queue-depths.js';
import type { RequestRecorder } from './request-recorder.js';
import { clientClosed, endpointUnavailable, noReplicaAnswered, refused, waitedTooLong } from './route-errors.js';
import { ServingView } from './serving-view.js';
import { ServingWait } from './serving-wait.js';
import { TokenCallLimit } from './token-calls.js';
import { Upstream } from './upstream.js';
import type { EngineClient } from '../engine-client/engine-client.js';
import { DrainWaits } from './drain-waits.js';

export interface RouterOptions {
  /** How long a request may wait for a sleeping or starting endpoint to serve. @default 120000 */
  wakeTimeoutMs?: number;
  /** How long a request may wait for a free slot. @default 30000 */
  queueTimeoutMs?: number;
  /** This process in the published queue depths (the app passes its controller's lease owner). @default a random id */
  processId?: string;
  /** Requests queued at most per endpoint in this process; past it, refused at once. @default 256 */
  maxQueuePerEndpoint?: number;
  /** Requests queued at most per API key and endpoint in this process; past it, refused at once. @default 64 */
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

/**
 * What a generation request comes to:
 * - `failure`: refused or failed before any answer (the error model, src/domain/errors.ts);
 * - `whole`: one JSON document to read (`collectBody`): the answer, or the replica's own error answer
 *   (its status on `routed.upstream`), passed on as it is where the surface speaks the engine's shape;
 * - `stream`: the answer's events as they come (`pipeStream` byte for byte, `relayStream` parsed).
 */
export type Outcome =
  { kind: 'failure'; failure: Failure } | { kind: 'whole'; routed: RoutedRequest } | { kind: 'stream'; routed: RoutedRequest };

/** A ready replica of a serving endpoint, and the engine client to call it with. */
export interface ServingReplica {
  endpoint: EndpointRecord;
  replica: ReplicaRecord;
  engines: EngineClient;
}

export class ChatRouter {
  /** Tokenize and detokenize calls at once per endpoint (see token-calls.ts). */
  readonly tokenCalls = new TokenCallLimit();
  /** The counts of long prompts at a busy endpoint before they wait (their own places: the token routes keep theirs). */
  private readonly promptCounts = new TokenCallLimit();
  private readonly view: ServingView;
  private readonly gates: EndpointGates;
  private readonly lookup: EndpointLookup;
  private readonly serving: ServingWait;
  private readonly upstream: Upstream;
  private readonly dispatcher: Dispatcher;
  private readonly depths: QueueDepthPublisher;
  private readonly queueTimeoutMs: number;
  /** The waits of its requests (for a slot, for a wake) that the gateway's drain answers before its bound. */
  readonly drainWaits = new DrainWaits();
  private readonly refresher: NodeJS.Timeout;
  private readonly stopFollowingChanges: () => void;

  constructor(
    sql: Sql,
    services: Services,
    private readonly recorder: RequestRecorder,
    engines: EngineClient,
    options: RouterOptions = {},
  ) {
    this.upstream = new Upstream(engines);
    this.queueTimeoutMs = options.queueTimeoutMs ?? DEFAULTS.queueTimeoutMs;
    const replicaCacheMs = options.replicaCacheMs ?? DEFAULTS.replicaCacheMs;
    this.view = new ServingView(
      services.chatAccess,
      replicaCacheMs,
      (id) => this.gates.get(id)?.pump(),
      // Requests queued for an endpoint that stopped serving (terminated, failed) are answered as soon as it is seen.
      (endpoint) => {
        if (isUnavailable(endpoint.status)) this.gates.get(endpoint.id)?.closeQueue(new QueueClosedError(endpointUnavailable(endpoint)));
      },
    );
    this.gates = new EndpointGates(
      this.view,
      {
        timeoutMs: this.queueTimeoutMs,
        maxQueue: options.maxQueuePerEndpoint ?? DEFAULTS.queueMaxPerEndpoint,
        maxPerKey: options.maxQueuePerKey ?? DEFAULTS.queueMaxPerKey,
      },
      (id) => this.depths.changedAt(id),
      this.drainWaits,
    );
    this.lookup = new EndpointLookup(services.chatAccess, this.view);
    this.serving = new ServingWait(sql, services.chatAccess, {
      timeoutMs: options.wakeTimeoutMs ?? DEFAULTS.wakeTimeoutMs,
      pollMs: options.wakePollMs,
      maxWaiting: options.maxQueuePerEndpoint ?? DEFAULTS.queueMaxPerEndpoint,
      endpoint: (principal, id) => this.lookup.usable(principal, id, true),
      hasReplica: async (endpoint, fresh) => (await this.view.readyReplicas(endpoint, fresh)).length > 0,
      onAnnounced: (endpointId) => this.view.announced(endpointId),
      drain: this.drainWaits,
    });
    this.dispatcher = new Dispatcher(this.view, this.serving, this.upstream, recorder);
    // Every endpoint event keeps the view current (and warm for an endpoint that starts serving); this process's own
    // changes are seen before their announcement, so that a request sent after a terminate returned is refused.
    void this.serving.listen();
    this.stopFollowingChanges = services.endpoints.onChange((id) => this.view.changedHere(id));
    // The queued counts, for the controllers' autoscaling (which sees every process's).
    this.depths = new QueueDepthPublisher(
      services.chatAccess,
      options.processId ?? `gw-${process.pid}-${randomUUID()}`,
      (id) => this.gates.get(id)?.queued ?? 0,
    );
    // Requests waiting for a slot are admitted as soon as replicas are added.
    this.refresher = setInterval(() => void this.refreshQueued(), replicaCacheMs);
    this.refresher.unref();
  }

  close(): void {
    this.stopFollowingChanges();
    clearInterval(this.refresher);
    this.depths.close();
    this.serving.close();
  }

  private async refreshQueued(): Promise<void> {
    const waiting = this.gates.waiting();
    if (waiting.length > 0) await this.view.refreshReplicas(waiting);
  }

  /**
   * The core's entry: a validated, admitted, dispatched request of `kind` (a
   * chat completion unless said otherwise), as one of its typed outcomes.
   * The surfaces (REST, GraphQL) only put an outcome in their own shape.
   */
  async answer(principal: Principal, body: unknown, signal: AbortSignal, kind: InferenceKind = CHAT_KIND): Promise<Outcome> {
    const routed = await this.route(principal, body, signal, kind);
    if (routed.type === 'error') return { kind: 'failure', failure: routed.error };
    const { request, upstream } = routed.value;
    return { kind: request.stream && upstream.status === 200 ? 'stream' : 'whole', routed: routed.value };
  }

  /** Routes a generation request of `kind`: the upstream answer's head received, or why not. */
  async route(principal: Principal, body: unknown, signal: AbortSignal, kind: InferenceKind = CHAT_KIND): Promise<RouteResult> {
    const startedAt = performance.now();
    const seen: { endpoint?: EndpointRecord } = {};
    const result = await this.routeRequest(principal, body, signal, startedAt, seen, kind);
    // A request refused once its endpoint was found counts in the endpoint's metrics (the request log keeps served ones).
    if (result.type === 'error' && seen.endpoint) this.recordRefusal(principal, seen.endpoint, body, result.error, startedAt);
    return result;
  }

  private recordRefusal(principal: Principal, endpoint: EndpointRecord, body: unknown, failure: Failure, startedAt: number): void {
    const durationMs = performance.now() - startedAt;
    this.recorder.record({
      endpointId: endpoint.id,
      replicaId: null,
      teamId: endpoint.teamId,
      userId: principal.user.id,
      stream: (body as { stream?: unknown }).stream === true,
      httpStatus: httpStatusOf(failure),
      promptTokens: null,
      completionTokens: null,
      ttftMs: null,
      durationMs,
      queuedMs: 0,
      finishReason: null,
      cancelled: failure.kind === 'cancelled',
      errorCode: codeOf(failure),
      startedAt: new Date(Date.now() - durationMs),
      refused: true,
    });
  }

  private async routeRequest(
    principal: Principal,
    body: unknown,
    signal: AbortSignal,
    startedAt: number,
    seen: { endpoint?: EndpointRecord },
    kind: InferenceKind,
  ): Promise<RouteResult> {
    const parsed = kind.parse(body);
    if (parsed.type === 'error') return fail(parsed.error);
    const request = parsed.value;
    const { model } = body as { model?: unknown };
    const named = await this.lookup.named(principal, model);
    if (named.type === 'error') return named;
    const found = named.value;
    seen.endpoint = found;
    // Before any wait (for a wake, or for a slot): what the spec alone refuses.
    const overSpec = checkAgainstSpec(request, found);
    if (overSpec) return fail(overSpec);
    this.recorder.seen(found.id);

    const ready = await this.serving.until(principal, found, signal);
    if ('kind' in ready) return fail(ready);
    const { endpoint } = ready;

    const gate = this.gates.for(endpoint.id);
    // Requests are shared fairly between API keys (see admission.ts).
    const key = principal.keyId ?? `user:${principal.user.id}`;
    if (gate.busy) {
      // A request that would wait has a prompt that might break the limits counted first, so a bad one is refused at
      // once (its 400, not the queue's 429). The count runs on a busy replica's event loop: at most 4 at once per
      // endpoint, so that a flood of long prompts cannot stall its streams (none free: it goes on unchecked, and the
      // engine refuses it when it runs).
      const prompt = kind.prompt(request, endpoint.id);
      const counter = mayBreakTokenLimits(request, prompt, endpoint)
        ? this.upstream.pick(this.view.cachedReplicas(endpoint.id)?.replicas ?? [], new Set())
        : undefined;
      const leave = counter ? this.promptCounts.enter(endpoint.id) : undefined;
      if (leave) {
        try {
          const overLimits = await checkPromptTokens(this.upstream.engines, counter!, endpoint, request, prompt, signal);
          if (overLimits) return fail(overLimits);
        } finally {
          leave();
        }
      }
    }
    // A request that is not to be queued is answered here, without a rejected promise (a burst's refusals stay cheap).
    const decision = gate.decide(key);
    if (decision.kind === 'refuse') return fail(refused(endpoint.id, decision));
    let release: () => void;
    const queueStart = performance.now();
    try {
      release = await gate.acquire(key, signal);
    } catch (error) {
      if (error instanceof QueueRefusedError) return fail(refused(endpoint.id, error.refusal));
      if (error instanceof QueueClosedError) return fail(error.refusal);
      if (error instanceof QueueTimeoutError) {
        const next = gate.decide(key);
        return fail(waitedTooLong(endpoint.id, this.queueTimeoutMs, next.kind === 'refuse' ? next.retryAfterS : 1));
      }
      return fail(clientClosed());
    }
    const queuedMs = performance.now() - queueStart;
    // Served as the caller is now: a key revoked, or a membership removed, while it waited in the queue acts no more.
    let caller: Result<Principal, Failure>;
    try {
      caller = await this.lookup.stillUsable(principal, endpoint);
    } catch (error) {
      // The database is away (the caller's key read afresh): the slot goes back with the failure.
      release();
      throw error;
    }
    if (caller.type === 'error') {
      release();
      return caller;
    }
    return this.dispatcher.dispatch(
      caller.value,
      endpoint,
      { kind, request, model: typeof model === 'string' ? model : undefined },
      signal,
      {
        startedAt,
        queuedMs,
        release,
      },
    );
  }

  /**
   * The endpoint `model` names (one of the caller's), once it serves, and its
   * least-loaded ready replica: for calls that take no generation slot
   * (tokenize, detokenize). A sleeping endpoint is woken and awaited, as for
   * a chat request.
   */
  async replicaFor(principal: Principal, model: unknown, signal: AbortSignal): Promise<Result<ServingReplica, Failure>> {
    const named = await this.lookup.named(principal, model);
    if (named.type === 'error') return named;
    const found = named.value;
    const ready = await this.serving.until(principal, found, signal);
    if ('kind' in ready) return fail(ready);
    const replica = this.upstream.pick(this.view.cachedReplicas(found.id)?.replicas ?? [], new Set());
    if (!replica) return fail(noReplicaAnswered(found.id));
    return { type: 'ok', value: { endpoint: ready.endpoint, replica, engines: this.upstream.engines } };
  }
}
