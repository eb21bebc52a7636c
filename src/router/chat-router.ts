/**
 * How a chat request reaches a replica. The router checks the request, finds
 * the endpoint (the caller's teams only), holds the request while the
 * endpoint starts (waking a sleeping one), admits it within replicas x
 * max_batch_size (queued fairly between API keys, or refused at once with 429
 * when it could not start in time: see admission.ts), picks the least-loaded
 * ready replica, and opens the upstream request over a keep-alive connection.
 * The surfaces (REST and GraphQL) then relay the answer as it streams. Each
 * process publishes how many requests wait in its queues (see
 * queue-depths.ts), for the autoscaler.
 *
 * The parts: serving-view.ts (the cached endpoints and ready replicas),
 * serving-wait.ts (holding a request until the endpoint serves),
 * admission.ts (the slots and the fair queue), upstream.ts (balancing and
 * the upstream request), relay.ts (the answer back to the client).
 */
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { GenerationRequest } from '../domain/chat-request.js';
import type { OpenAIError } from '../domain/openai-errors.js';
import type { Result } from '../domain/result.js';
import type { Services } from '../services/index.js';
import type { Principal } from '../services/principal.js';
import type { Sql } from '../storage/database.js';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { isUnavailable } from '../domain/lifecycle.js';
import { EndpointGate, QueueClosedError, QueueRefusedError, QueueTimeoutError } from './admission.js';
import { CHAT_KIND, type InferenceKind } from './inference-kinds.js';
import { ContentCapture } from './content-capture.js';
import { once } from './once.js';
import { checkAgainstSpec, checkPromptTokens, mayBreakTokenLimits } from './pre-admission.js';
import { QueueDepthPublisher } from './queue-depths.js';
import type { RequestRecorder } from './request-recorder.js';
import {
  ambiguousModel,
  clientClosed,
  endpointUnavailable,
  modelNotFound,
  modelRequired,
  noReplicaAnswered,
  refused,
  waitedTooLong,
} from './route-errors.js';
import { ServingView } from './serving-view.js';
import { ServingWait } from './serving-wait.js';
import { TokenCallLimit } from './token-calls.js';
import { Upstream } from './upstream.js';

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
  request: GenerationRequest;
  upstream: http.IncomingMessage;
  /** When the gateway received the request. */
  startedAt: number;
  queuedMs: number;
  /** Set only when the serving version logs content (enable_content_logging): the relay hands it the answer. */
  capture?: ContentCapture;
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

export type RouteResult = Result<RoutedRequest, OpenAIError>;

/** A ready replica of a serving endpoint, and the keep-alive agent to call it with. */
export interface ServingReplica {
  endpoint: EndpointRecord;
  replica: ReplicaRecord;
  agent: http.Agent;
}

export class ChatRouter {
  private readonly gates = new Map<string, EndpointGate>();
  /** Tokenize and detokenize calls at once per endpoint (see token-calls.ts). */
  readonly tokenCalls = new TokenCallLimit();
  private readonly view: ServingView;
  private readonly serving: ServingWait;
  private readonly upstream = new Upstream();
  private readonly depths: QueueDepthPublisher;
  private readonly queueTimeoutMs: number;
  private readonly maxQueuePerEndpoint: number;
  private readonly maxQueuePerKey: number;
  private readonly refresher: NodeJS.Timeout;
  private readonly stopFollowingChanges: () => void;

  constructor(
    sql: Sql,
    private readonly services: Services,
    private readonly recorder: RequestRecorder,
    options: RouterOptions = {},
  ) {
    this.queueTimeoutMs = options.queueTimeoutMs ?? 30_000;
    this.maxQueuePerEndpoint = options.maxQueuePerEndpoint ?? 256;
    this.maxQueuePerKey = options.maxQueuePerKey ?? 64;
    const replicaCacheMs = options.replicaCacheMs ?? 500;
    this.view = new ServingView(
      services.chatAccess,
      replicaCacheMs,
      (id) => this.gates.get(id)?.pump(),
      // Requests queued for an endpoint that stopped serving (terminated, failed) are answered as soon as it is seen.
      (endpoint) => {
        if (isUnavailable(endpoint.status)) this.gates.get(endpoint.id)?.closeQueue(new QueueClosedError(endpointUnavailable(endpoint)));
      },
    );
    this.serving = new ServingWait(sql, services.chatAccess, {
      timeoutMs: options.wakeTimeoutMs ?? 120_000,
      pollMs: options.wakePollMs,
      endpoint: (principal, id) => this.endpointFor(principal, id, true),
      hasReplica: async (endpoint, fresh) => (await this.view.readyReplicas(endpoint, fresh)).length > 0,
      onAnnounced: (endpointId) => this.view.announced(endpointId),
    });
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
    this.upstream.close();
    this.serving.close();
  }

  private async refreshQueued(): Promise<void> {
    const waiting = [...this.gates.entries()].filter(([, gate]) => gate.queued > 0).map(([id]) => id);
    if (waiting.length > 0) await this.view.refreshReplicas(waiting);
  }

  /** Routes a generation request of `kind` (a chat completion unless said otherwise). */
  async route(principal: Principal, body: unknown, signal: AbortSignal, kind: InferenceKind = CHAT_KIND): Promise<RouteResult> {
    const startedAt = performance.now();
    const seen: { endpoint?: EndpointRecord } = {};
    const result = await this.routeRequest(principal, body, signal, startedAt, seen, kind);
    // A request refused once its endpoint was found counts in the endpoint's metrics (the request log keeps served ones).
    if (result.type === 'error' && seen.endpoint) this.recordRefusal(principal, seen.endpoint, body, result.error, startedAt);
    return result;
  }

  private recordRefusal(principal: Principal, endpoint: EndpointRecord, body: unknown, error: OpenAIError, startedAt: number): void {
    const durationMs = performance.now() - startedAt;
    this.recorder.record({
      endpointId: endpoint.id,
      replicaId: null,
      teamId: endpoint.teamId,
      userId: principal.user.id,
      stream: (body as { stream?: unknown }).stream === true,
      httpStatus: error.status,
      promptTokens: null,
      completionTokens: null,
      ttftMs: null,
      durationMs,
      queuedMs: 0,
      finishReason: null,
      cancelled: error.code === 'client_closed',
      errorCode: error.code,
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
    const named = await this.endpointNamed(principal, (body as { model?: unknown }).model);
    if (named.type === 'error') return named;
    const found = named.value;
    seen.endpoint = found;
    // Before any wait (for a wake, or for a slot): what the spec alone refuses.
    const overSpec = checkAgainstSpec(request, found);
    if (overSpec) return fail(overSpec);
    this.recorder.seen(found.id);

    const ready = await this.serving.until(principal, found, signal);
    if ('status' in ready) return fail(ready);
    const { endpoint } = ready;

    const gate = this.gateFor(endpoint.id);
    // Requests are shared fairly between API keys (see admission.ts).
    const key = principal.keyId ?? `user:${principal.user.id}`;
    if (gate.busy) {
      // A request that would wait has a prompt that might break the limits counted first, so a bad one is refused
      // at once (400), not after the queue; any other that will not be queued learns it at once, with no round trip.
      const prompt = kind.prompt(request, endpoint.id);
      const counter = mayBreakTokenLimits(request, prompt, endpoint)
        ? this.upstream.pick(this.view.cachedReplicas(endpoint.id)?.replicas ?? [], new Set())
        : undefined;
      if (counter) {
        const overLimits = await checkPromptTokens(this.upstream.agent, counter, endpoint, request, prompt, signal);
        if (overLimits) return fail(overLimits);
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
    return this.dispatch(principal, endpoint, { kind, request, body: body as Record<string, unknown> }, signal, {
      startedAt,
      queuedMs,
      release,
    });
  }

  /**
   * Sends an admitted request to the least-loaded replica. One that refuses
   * the connection (it just stopped or died) is skipped, and the endpoint is
   * looked at afresh: a sleeping endpoint is woken and awaited like at first.
   */
  private async dispatch(
    principal: Principal,
    endpoint: EndpointRecord,
    call: { kind: InferenceKind; request: GenerationRequest; body: Record<string, unknown> },
    signal: AbortSignal,
    admitted: { startedAt: number; queuedMs: number; release: () => void },
  ): Promise<RouteResult> {
    const { startedAt, queuedMs, release } = admitted;
    const { kind, request, body } = call;
    const tried = new Set<string>();
    for (let attempt = 0; attempt < 3; attempt++) {
      let replica = this.upstream.pick(this.view.cachedReplicas(endpoint.id)?.replicas ?? [], tried);
      if (!replica) {
        const again = await this.serving.until(principal, endpoint, signal, true);
        if ('status' in again) {
          release();
          return fail(again);
        }
        replica = this.upstream.pick(this.view.cachedReplicas(endpoint.id)?.replicas ?? [], tried);
      }
      if (!replica) break;
      tried.add(replica.id);
      const done = this.upstream.begin(replica.id);
      try {
        const upstream = await this.upstream.send(replica, kind.enginePath, request, body, signal);
        // Content is captured only when the version serving it (the endpoint's current one) has content logging on.
        const { current } = endpoint;
        const capture =
          current.spec.advanced.enableContentLogging && replica.versionIndex === current.versionIndex
            ? new ContentCapture(kind.loggedInput(request), replica.versionIndex)
            : undefined;
        const finish: RoutedRequest['finish'] = (outcome) => {
          done();
          release();
          this.recorder.record({
            endpointId: endpoint.id,
            replicaId: replica.id,
            teamId: endpoint.teamId,
            userId: principal.user.id,
            stream: request.stream,
            httpStatus: upstream.statusCode ?? 502,
            durationMs: performance.now() - startedAt,
            queuedMs,
            startedAt: new Date(Date.now() - (performance.now() - startedAt)),
            ...outcome,
            ...(capture ? { content: capture } : {}),
          });
        };
        const routed: RoutedRequest = { endpoint, replica, request, upstream, startedAt, queuedMs, finish: once(finish) };
        if (capture) routed.capture = capture;
        return { type: 'ok', value: routed };
      } catch {
        done();
        if (signal.aborted) {
          release();
          return fail(clientClosed());
        }
        this.view.forget(endpoint.id);
      }
    }
    release();
    return fail(noReplicaAnswered(endpoint.id));
  }

  /**
   * The endpoint `model` names (one of the caller's), once it serves, and its
   * least-loaded ready replica: for calls that take no generation slot
   * (tokenize, detokenize). A sleeping endpoint is woken and awaited, as for
   * a chat request.
   */
  async replicaFor(principal: Principal, model: unknown, signal: AbortSignal): Promise<Result<ServingReplica, OpenAIError>> {
    const named = await this.endpointNamed(principal, model);
    if (named.type === 'error') return named;
    const found = named.value;
    const ready = await this.serving.until(principal, found, signal);
    if ('status' in ready) return fail(ready);
    const replica = this.upstream.pick(this.view.cachedReplicas(found.id)?.replicas ?? [], new Set());
    if (!replica) return fail(noReplicaAnswered(found.id));
    return { type: 'ok', value: { endpoint: ready.endpoint, replica, agent: this.upstream.agent } };
  }

  /** The caller's endpoint `model` names (by id, or by a name only one of theirs has), or why there is none. */
  private async endpointNamed(principal: Principal, model: unknown): Promise<Result<EndpointRecord, OpenAIError>> {
    if (typeof model !== 'string' || model === '') return fail(modelRequired());
    const named = await this.modelNamed(principal, model);
    if (named && typeof named !== 'string') return fail(named);
    const found = await this.endpointFor(principal, named ?? model, false);
    return found ? { type: 'ok', value: found } : fail(modelNotFound(model));
  }

  /**
   * A `model` that is not an endpoint id may name one of the caller's
   * endpoints: its id when the name is unique, an error listing the ids when
   * it is not, undefined otherwise (the id path answers model_not_found).
   */
  private async modelNamed(principal: Principal, model: string): Promise<string | OpenAIError | undefined> {
    if (/^ep_[0-9a-z]+$/.test(model)) return undefined;
    const ids = await this.services.chatAccess.endpointIdsNamed(principal, model);
    if (ids.length <= 1) return ids[0];
    return ambiguousModel(model, ids);
  }

  /** The endpoint, if the caller may use it; cached records serve the hot path (see serving-view.ts). */
  private async endpointFor(principal: Principal, id: string, fresh: boolean): Promise<EndpointRecord | undefined> {
    return this.services.chatAccess.usableBy(principal, await this.view.endpoint(id, fresh));
  }

  private gateFor(endpointId: string): EndpointGate {
    let gate = this.gates.get(endpointId);
    if (!gate) {
      gate = new EndpointGate(
        () => {
          const entry = this.view.cachedReplicas(endpointId);
          return entry ? entry.replicas.length * entry.maxBatchSize : 0;
        },
        { timeoutMs: this.queueTimeoutMs, maxQueue: this.maxQueuePerEndpoint, maxPerKey: this.maxQueuePerKey },
        // Replicas being added (the controller wants more than are ready): their slots are counted as coming.
        () => {
          const entry = this.view.cachedReplicas(endpointId);
          const desired = this.view.cachedEndpoint(endpointId)?.desiredReplicaCnt ?? 0;
          return entry ? Math.max(0, desired - entry.replicas.length) * entry.maxBatchSize : 0;
        },
        () => this.depths.changedAt(endpointId),
        // The endpoint at its largest: before any hold is measured, one round of its slots may queue.
        () => {
          const spec = this.view.cachedEndpoint(endpointId)?.current.spec;
          return spec ? spec.autoscaling.maxReplica * spec.advanced.maxBatchSize : 0;
        },
      );
      this.gates.set(endpointId, gate);
    }
    return gate;
  }
}

function fail(error: OpenAIError): { type: 'error'; error: OpenAIError } {
  return { type: 'error', error };
}
