/**
 * What users see of an endpoint's replicas: the replicas themselves (state,
 * version, where they run, since when, recent failures), each replica's
 * engine log (its last lines, and following it live), and the endpoint's
 * event history, page by page. Access follows the endpoint's: whoever cannot
 * see the endpoint gets its 404. Logs are read through the runtime; nothing
 * shown names an engine's address, locator (pid, pod) or token.
 */
import { DEFAULT_CRASH_POLICY } from '../controller/crash-policy.js';
import type { EndpointEventRecord } from '../domain/endpoint.js';
import { parsePageRequest, toPage, type Page } from '../domain/pagination.js';
import { fail, invalidArgument, notFound, ok, type DomainError, type Result } from '../domain/result.js';
import { EngineLogUnavailable, type Runtime } from '../runtime/runtime.js';
import type { Sql } from '../storage/database.js';
import {
  endpointReplica,
  endpointReplicas,
  eventPage,
  failedSince,
  newestReplica,
  replicaLocator,
  type ReplicaView,
} from '../storage/replica-reads.js';
import type { EndpointService } from './endpoint-service.js';
import type { Principal } from './principal.js';

export type { ReplicaView };

export interface ReplicaServiceOptions {
  /** Where engine logs are read; without one (a gateway with no runtime), logs are unavailable. */
  runtime?: Runtime | undefined;
  /** The engines are an external command's (ENGINE_COMMAND), whose logs may quote requests. */
  externalEngine?: boolean;
  /** The window in which failed replicas are counted. @default the crash policy's (10 min) */
  failureWindowMs?: number;
}

export interface ReplicaList {
  replicas: ReplicaView[];
  failures: { windowSeconds: number; count: number; last: ReplicaView | null };
}

export interface LogRequest {
  /** The replica; the endpoint's newest (a READY one first) when not given. */
  replica?: string | null | undefined;
  /** Lines from the end, 1 to 10000. @default 100 */
  tail?: unknown;
}

export const LOG_TAIL = { default: 100, max: 10_000 } as const;
/** Replicas that ended are listed for a day, at most this many. */
const ENDED_SHOWN = { ms: 86_400_000, max: 20 } as const;
const EVENT_CURSOR = 'evt';

/**
 * A log line as users see it: the built-in engine's ENGINE_READY line keeps when it was ready and drops its port and
 * process id (internal ids).
 */
export function userLogLine(line: string): string {
  const ready = /^ENGINE_READY (\{.*\})\s*$/.exec(line);
  if (!ready) return line;
  try {
    const { readyAt, uptimeMs } = JSON.parse(ready[1]!) as { readyAt?: number; uptimeMs?: number };
    return `ENGINE_READY ${JSON.stringify({ readyAt, uptimeMs })}`;
  } catch {
    return 'ENGINE_READY';
  }
}

const toLines = (text: string): string[] => (text === '' ? [] : text.split('\n').map(userLogLine));

function parseTail(raw: unknown, field: string): Result<number> {
  if (raw === undefined || raw === null || raw === '') return ok(LOG_TAIL.default);
  const n = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : raw;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > LOG_TAIL.max) {
    return fail(invalidArgument([{ field, message: `must be an integer from 0 to ${LOG_TAIL.max}` }]));
  }
  return ok(n);
}

const unavailable = (message: string): DomainError => ({ type: 'CONFLICT', message });

export class ReplicaService {
  constructor(
    private readonly db: Sql,
    private readonly endpoints: EndpointService,
    private readonly options: ReplicaServiceOptions = {},
  ) {}

  async list(principal: Principal, endpointId: string): Promise<Result<ReplicaList>> {
    const endpoint = await this.endpoints.get(principal, endpointId);
    if (endpoint.type === 'error') return endpoint;
    return ok(await this.listVisible(endpointId));
  }

  /** The replicas of an endpoint already known to be visible (GraphQL's field resolver). */
  async listVisible(endpointId: string): Promise<ReplicaList> {
    const windowMs = this.options.failureWindowMs ?? DEFAULT_CRASH_POLICY.windowMs;
    const now = Date.now();
    const [replicas, failed] = await Promise.all([
      endpointReplicas(this.db, endpointId, { endedSince: new Date(now - ENDED_SHOWN.ms), maxEnded: ENDED_SHOWN.max }),
      failedSince(this.db, endpointId, new Date(now - windowMs)),
    ]);
    return { replicas, failures: { windowSeconds: Math.round(windowMs / 1000), ...failed } };
  }

  /** The last lines of a replica's engine log. */
  async log(
    principal: Principal,
    endpointId: string,
    request: LogRequest,
    names = { replica: 'replica', tail: 'tail' },
  ): Promise<Result<{ replica: ReplicaView; lines: string[] }>> {
    const target = await this.logTarget(principal, endpointId, request, names);
    if (target.type === 'error') return target;
    const { replica, tail, ref, runtime } = target.value;
    try {
      return ok({ replica, lines: toLines(tail === 0 ? '' : await runtime.readLog(ref, { tailLines: tail })) });
    } catch (error) {
      if (error instanceof EngineLogUnavailable) return fail(unavailable(error.message));
      throw error;
    }
  }

  /**
   * A replica's log followed live: its last `tail` lines first, then each chunk of new lines, until `signal` aborts
   * (or the log ends with its pod). Access is checked once, here; the caller ends the stream when access ends.
   */
  async follow(
    principal: Principal,
    endpointId: string,
    request: LogRequest,
    signal: AbortSignal,
    names = { replica: 'replica', tail: 'tail' },
  ): Promise<Result<{ replica: ReplicaView; chunks: AsyncIterable<string[]> }>> {
    const target = await this.logTarget(principal, endpointId, request, names);
    if (target.type === 'error') return target;
    const { replica, tail, ref, runtime } = target.value;
    let source: AsyncIterable<string>;
    try {
      source = await runtime.followLog(ref, signal, { tailLines: tail });
    } catch (error) {
      if (error instanceof EngineLogUnavailable) return fail(unavailable(error.message));
      throw error;
    }
    async function* chunks(): AsyncGenerator<string[]> {
      for await (const text of source) {
        const lines = toLines(text);
        if (lines.length > 0) yield lines;
      }
    }
    return ok({ replica, chunks: chunks() });
  }

  private async logTarget(principal: Principal, endpointId: string, request: LogRequest, names: { replica: string; tail: string }) {
    const tail = parseTail(request.tail, names.tail);
    if (tail.type === 'error') return tail;
    const endpoint = await this.endpoints.get(principal, endpointId);
    if (endpoint.type === 'error') return endpoint;
    const replica = request.replica
      ? await endpointReplica(this.db, endpointId, request.replica)
      : await newestReplica(this.db, endpointId);
    if (!replica) {
      return fail(request.replica ? notFound('replica', request.replica) : notFound('replica of endpoint', endpointId));
    }
    const { runtime } = this.options;
    if (!runtime) return fail(unavailable('engine logs are not available on this gateway'));
    if (replica.runtime !== runtime.name) {
      return fail(unavailable(`the replica ran on the ${replica.runtime} runtime; this gateway runs ${runtime.name}`));
    }
    if (this.options.externalEngine && !endpoint.value.current.spec.advanced.enableContentLogging) {
      return fail(
        unavailable(
          "this gateway's engines come from ENGINE_COMMAND, whose logs may quote requests: they are shown only for an endpoint with enable_content_logging on",
        ),
      );
    }
    const ref = { replicaId: replica.id, node: replica.node, locator: await replicaLocator(this.db, replica.id) };
    return ok({ replica, tail: tail.value, ref, runtime });
  }

  /** A page of the endpoint's event history: oldest first, or newest first, like its versions. */
  async events(
    principal: Principal,
    endpointId: string,
    query: { cursor?: unknown; limit?: unknown; newestFirst?: boolean },
    names?: { cursor: string; limit: string },
  ): Promise<Result<Page<EndpointEventRecord>>> {
    const page = this.parseEventPage(query, names);
    if (page.type === 'error') return page;
    const endpoint = await this.endpoints.get(principal, endpointId);
    if (endpoint.type === 'error') return endpoint;
    return ok(await this.eventPage(endpointId, page.value, query.newestFirst === true));
  }

  /** Reads `first`/`after` (or `limit`/`cursor`) for an event page; newest first counts down from the largest id. */
  parseEventPage(query: { cursor?: unknown; limit?: unknown; newestFirst?: boolean }, names?: { cursor: string; limit: string }) {
    const start = query.newestFirst ? Number.MAX_SAFE_INTEGER : -1;
    return parsePageRequest(EVENT_CURSOR, query, names, start, Number.MAX_SAFE_INTEGER);
  }

  /** A page of events of an endpoint already known to be visible. */
  async eventPage(endpointId: string, page: { after: number; limit: number }, newestFirst = false): Promise<Page<EndpointEventRecord>> {
    const rows = await eventPage(this.db, endpointId, { after: page.after, limit: page.limit + 1, newestFirst });
    return toPage(EVENT_CURSOR, rows, page.limit, (e) => Number(e.id));
  }
}
