/**
 * An endpoint's replicas, engine logs and event history over REST (extensions
 * to the contract's routes): `GET …/{id}/replicas`, `GET …/{id}/logs`
 * (`?replica=&tail=`; `follow=true` streams, as text or as SSE when the
 * client accepts `text/event-stream`) and `GET …/{id}/events`, paged like
 * `…/{id}/version`. Access is the endpoint's.
 */
import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EndpointEventRecord } from '../../domain/endpoint.js';
import { FailureError, invalidInputError } from '../../domain/errors.js';
import type { Services } from '../../services/index.js';
import type { ReplicaList, ReplicaView } from '../../services/replica-service.js';
import type { AccessWatch } from '../../live/access-watch.js';
import type { SubscriptionQuota } from '../../live/subscription-quota.js';
import { DEFAULTS } from '../../defaults.js';
import { stallGuard } from '../../util/stall-guard.js';
import { authenticateRequest, credentialsOfRequest } from '../authenticate.js';
import { type Router, unwrap, type RouteRequest } from './router.js';

/** How often an SSE follow gets a keep-alive comment (proxies close a stream that says nothing for long). */
const KEEP_ALIVE_MS = 5000;

/** A replica as REST answers it: never its address, locator or token. */
export function replicaObject(r: ReplicaView) {
  const since =
    r.state === 'STOPPED' || r.state === 'FAILED'
      ? (r.stoppedAt ?? r.createdAt)
      : r.state === 'STARTING'
        ? r.createdAt
        : (r.readyAt ?? r.createdAt);
  return {
    replicaId: r.id,
    state: r.state,
    versionIndex: r.versionIndex,
    runtime: r.runtime,
    node: r.node,
    gpuType: r.gpuType,
    numGpu: r.numGpu,
    since: since.toISOString(),
    createdAt: r.createdAt.toISOString(),
    readyAt: r.readyAt?.toISOString() ?? null,
    endedAt: r.stoppedAt?.toISOString() ?? null,
    lastError: r.lastError,
  };
}

function replicasBody(list: ReplicaList) {
  const { windowSeconds, count, last } = list.failures;
  return { data: list.replicas.map(replicaObject), failures: { windowSeconds, count, last: last ? replicaObject(last) : null } };
}

/** An event as REST answers it (as GraphQL's EndpointEvent). */
export function eventObject(e: EndpointEventRecord) {
  return {
    eventId: e.id,
    type: e.type,
    status: e.status,
    phase: e.phase,
    errorCode: e.errorCode,
    versionIndex: e.versionIndex,
    replicas: e.type === 'REPLICAS_CHANGED' && e.detail ? e.detail : null,
    cause: e.cause,
    actorId: e.actorId,
    message: typeof e.detail?.message === 'string' ? e.detail.message : null,
    createdAt: e.createdAt.toISOString(),
  };
}

function booleanQuery(query: URLSearchParams, name: string): boolean {
  const raw = query.get(name);
  if (raw === null || raw === '' || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw invalidInputError([{ field: name, message: 'must be true or false' }]);
}

export function addReplicaRoutes(
  router: Router,
  services: Services,
  access?: AccessWatch,
  quota?: SubscriptionQuota,
  stallMs: number = DEFAULTS.streamStallTimeoutMs,
): void {
  const base = '/dedicated/beta/endpoint/:id';
  const principalOf = async (request: RouteRequest) => unwrap(await authenticateRequest(services, request.req));
  router
    .add('GET', `${base}/replicas`, async (request) => {
      const principal = await principalOf(request);
      return { status: 200, body: replicasBody(unwrap(await services.replicas.list(principal, request.params.id!))) };
    })
    .add('GET', `${base}/events`, async (request) => {
      const principal = await principalOf(request);
      const { query } = request;
      const page = unwrap(
        await services.replicas.events(principal, request.params.id!, {
          cursor: query.get('cursor'),
          limit: query.get('limit') ?? undefined,
          newestFirst: booleanQuery(query, 'newestFirst'),
        }),
      );
      return { status: 200, body: { data: page.items.map(eventObject), nextCursor: page.nextCursor } };
    })
    .add('GET', `${base}/logs`, async (request) => {
      // Taken before authenticating: an access change during it is seen by the watch (AccessWatch.open).
      const epoch = access?.epoch ?? 0;
      const principal = await principalOf(request);
      const { query, params } = request;
      const logRequest = { replica: query.get('replica'), tail: query.get('tail') ?? undefined };
      if (!booleanQuery(query, 'follow')) {
        const { replica, lines } = unwrap(await services.replicas.log(principal, params.id!, logRequest));
        return { status: 200, body: { endpointId: params.id!, replicaId: replica.id, lines } };
      }
      // A follow holds one of its user's subscription places (SSE and WebSocket subscriptions hold the others).
      const release = quota?.take(principal.user.id);
      if (quota && !release) throw new FailureError({ kind: 'overloaded', message: quota.refusal, retryAfter: 1 });
      const stop = new AbortController();
      // Watched like a subscription: a revoked key or a changed membership of the team it read ends it at once.
      const connection = access?.open(credentialsOfRequest(request.req), principal, epoch, () => stop.abort());
      const watched = connection?.subscription();
      const done = () => {
        connection?.close();
        release?.();
      };
      try {
        const { replica, chunks } = unwrap(
          await services.replicas.follow(watched?.principal ?? principal, params.id!, logRequest, stop.signal),
        );
        const lines = watched ? watched.watch(chunks) : chunks;
        return { status: 200, stream: (res) => streamLog(request.req, res, replica.id, lines, stop, stallMs).finally(done) };
      } catch (error) {
        done();
        throw error;
      }
    });
}

/**
 * Writes the followed log as it comes, until the client goes, the log ends, or the caller loses access (`chunks`
 * is then revoked by the access watch, and ends with an error). A client that reads slower than the log grows holds
 * the log's reading back (the next chunk is read once the socket has taken the last): nothing piles up here.
 */
export async function streamLog(
  req: IncomingMessage,
  res: ServerResponse,
  replicaId: string,
  chunks: AsyncIterable<string[]>,
  stop: AbortController,
  stallMs: number = DEFAULTS.streamStallTimeoutMs,
): Promise<void> {
  const sse = /\btext\/event-stream\b/.test(req.headers.accept ?? '');
  res.writeHead(200, {
    'content-type': sse ? 'text/event-stream; charset=utf-8' : 'text/plain; charset=utf-8',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
    'x-replica-id': replicaId,
  });
  res.flushHeaders();
  const end = () => stop.abort();
  res.once('close', end);
  // Gone while the follow opened: its close has passed, and the log's next line may be far off.
  if (res.destroyed) end();
  const keepAlive = sse ? setInterval(() => void (res.destroyed || res.write(': keep-alive\n\n')), KEEP_ALIVE_MS) : undefined;
  // A client that takes nothing for stallMs is cut (its close aborts `stop`): its subscription place goes back.
  const stall = stallGuard(res, stallMs);
  try {
    for await (const lines of chunks) {
      if (res.destroyed) break;
      const text = sse ? lines.map((line) => `data: ${line.replace(/\r/g, '')}\n\n`).join('') : `${lines.join('\n')}\n`;
      const accepted = res.write(text);
      stall.wrote(accepted);
      // The client gone meanwhile aborts the wait (its close aborts `stop`).
      if (!accepted) await once(res, 'drain', { signal: stop.signal });
    }
  } catch {
    // the log could not be read further: the stream ends
  } finally {
    stall.stop();
    clearInterval(keepAlive);
    res.off('close', end);
    stop.abort();
    if (!res.destroyed) res.end();
  }
}
