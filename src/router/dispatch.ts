/**
 * Sending an admitted request to a replica: the least-loaded ready one, with
 * another tried when one refuses the connection (it just stopped or died),
 * and the request's slot freed and its outcome recorded once its answer ends.
 */
import type { GenerationRequest } from '../domain/chat-request.js';
import type { EndpointRecord } from '../domain/endpoint.js';
import type { Failure } from '../domain/errors.js';
import type { ReplicaRecord } from '../domain/replica.js';
import { fail, type Result } from '../domain/result.js';
import type { Principal } from '../services/principal.js';
import { answerBytesLimit } from './answer-bounds.js';
import { ContentCapture } from './content-capture.js';
import type { InferenceKind } from './inference-kinds.js';
import { once } from './once.js';
import type { RequestRecorder } from './request-recorder.js';
import { clientClosed, noReplicaAnswered, replicaFailedWhileAnswering, requestBrokeReplicas } from './route-errors.js';
import { SUSPECT_LIMIT, SuspectRequests } from './suspect-requests.js';
import type { ServingView } from './serving-view.js';
import type { ServingWait } from './serving-wait.js';
import type { Upstream } from './upstream.js';
import { EngineUnreachableError, type EngineResponse } from '../engine-client/engine-client.js';

/** An admitted request with its upstream answer's head received. */
export interface RoutedRequest {
  endpoint: EndpointRecord;
  replica: ReplicaRecord;
  request: GenerationRequest;
  upstream: EngineResponse;
  /** When the gateway received the request. */
  startedAt: number;
  queuedMs: number;
  /** Set only when the serving version logs content (enable_content_logging): the relay hands it the answer. */
  capture?: ContentCapture;
  /** The most bytes its answer may take, read whole or as one event (answer-bounds.ts). @default ANSWER_MAX_BYTES */
  maxAnswerBytes?: number;
  /** How long the replica may send nothing once the answer's first token came (ENGINE_IDLE_TIMEOUT_MS; 0: no bound). @default 0 */
  idleTimeoutMs?: number;
  /** Frees the slot and records the outcome; call exactly once, when the answer ended or was abandoned. */
  finish(outcome: {
    promptTokens: number | null;
    completionTokens: number | null;
    ttftMs: number | null;
    finishReason: string | null;
    cancelled: boolean;
    /** Set when the replica, not the client, ended the answer early, or the answer ended in an error. */
    errorCode?: string | null;
    /** The status recorded instead of the replica's: an answer that ended in an error after its 200 (502). */
    httpStatus?: number;
  }): void;
}

export type RouteResult = Result<RoutedRequest, Failure>;

/** What is sent: the request of its kind, as parsed, and the model the client named. */
export interface DispatchedCall {
  kind: InferenceKind;
  request: GenerationRequest;
  model: string | undefined;
}

/** How the request was admitted: when it arrived, how long it queued, and how its slot is freed. */
export interface Admission {
  startedAt: number;
  queuedMs: number;
  release: () => void;
}

export class Dispatcher {
  constructor(
    private readonly view: ServingView,
    private readonly serving: ServingWait,
    private readonly upstream: Upstream,
    private readonly recorder: RequestRecorder,
    private readonly suspects = new SuspectRequests(),
  ) {}

  /**
   * Sends an admitted request to the least-loaded replica. One that refuses
   * the connection (it just stopped or died) is skipped, and the endpoint is
   * looked at afresh: a sleeping endpoint is woken and awaited like at first.
   * Whatever it throws (the database away while the endpoint is looked at
   * afresh), the slot goes back first: else it would stay taken for as long
   * as the process lives, and the endpoint's queue fill up.
   */
  async dispatch(
    principal: Principal,
    endpoint: EndpointRecord,
    call: DispatchedCall,
    signal: AbortSignal,
    admitted: Admission,
  ): Promise<RouteResult> {
    try {
      return await this.send(principal, endpoint, call, signal, admitted);
    } catch (error) {
      admitted.release(); // idempotent: a path that released already is not released twice
      throw error;
    }
  }

  private async send(
    principal: Principal,
    endpoint: EndpointRecord,
    call: DispatchedCall,
    signal: AbortSignal,
    admitted: Admission,
  ): Promise<RouteResult> {
    const { startedAt, queuedMs, release } = admitted;
    const { kind, request, model } = call;
    const tried = new Set<string>();
    const body = kind.engineBody(request, model);
    if (this.suspects.refused(endpoint.id, body)) {
      release();
      return fail(requestBrokeReplicas(endpoint.id));
    }
    for (let attempt = 0; attempt < 3; attempt++) {
      let replica = this.upstream.pick(this.view.cachedReplicas(endpoint.id)?.replicas ?? [], tried);
      if (!replica) {
        const again = await this.serving.until(principal, endpoint, signal, true);
        if ('kind' in again) {
          release();
          return fail(again);
        }
        replica = this.upstream.pick(this.view.cachedReplicas(endpoint.id)?.replicas ?? [], tried);
      }
      if (!replica) break;
      tried.add(replica.id);
      const done = this.upstream.begin(replica.id);
      try {
        const upstream = await this.upstream.send(replica, kind.enginePath, { ...body }, signal);
        if (upstream.status === 503) {
          // The replica is stopping (its engine takes no new work, or gave up work its drain could not finish): nothing
          // was sent to the client, so the next replica is tried, as after a refused connection.
          upstream.body.destroy();
          throw new Error('the replica answered 503');
        }
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
            httpStatus: upstream.status,
            durationMs: performance.now() - startedAt,
            queuedMs,
            startedAt: new Date(Date.now() - (performance.now() - startedAt)),
            ...outcome,
            ...(capture ? { content: capture } : {}),
          });
        };
        const routed: RoutedRequest = {
          endpoint,
          replica,
          request,
          upstream,
          startedAt,
          queuedMs,
          finish: once(finish),
          maxAnswerBytes: answerBytesLimit(request, current.spec.advanced.maxTokenCount),
          idleTimeoutMs: this.upstream.engines.idleTimeoutMs,
        };
        if (capture) routed.capture = capture;
        return { type: 'ok', value: routed };
      } catch (error) {
        done();
        if (signal.aborted) {
          release();
          return fail(clientClosed());
        }
        this.view.forget(endpoint.id);
        // The replica's connection broke after the request went out: the request may be what broke it (a prompt that
        // crashes the engine). Tried on the next replica once; not after it broke two (see suspect-requests.ts).
        if (
          error instanceof EngineUnreachableError &&
          error.mayHaveArrived &&
          this.suspects.broke(endpoint.id, body, replica.id) >= SUSPECT_LIMIT
        ) {
          release();
          return fail(replicaFailedWhileAnswering(endpoint.id));
        }
      }
    }
    release();
    return fail(noReplicaAnswered(endpoint.id));
  }
}
